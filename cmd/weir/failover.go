package main

import (
	"context"
	"errors"
	"io"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// failoverBackoff is the pause between two tries of a request that retrying repeats.
const failoverBackoff = 250 * time.Millisecond

// retrying is call, repeated while the request fails with a transient error, for up to --timeout after
// the first failure. The move commands use it for the requests that are safe to repeat (a reassignment
// to the same target, a throttle set again, reads), so that the loss of the controller leader or of a
// broker in the middle of a move does not abort the command: a new controller leader is elected within
// a few seconds and the moves, which live in the metadata, carry on.
func retrying[T any](ctx context.Context, g *globalOpts, what string, fn func(context.Context) (T, error)) (T, error) {
	var deadline time.Time
	for {
		v, err := call(ctx, g, what, fn)
		if err == nil || !transient(err) {
			return v, err
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(g.timeout)
		} else if time.Now().After(deadline) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(failoverBackoff):
		}
	}
}

// transient reports an error that a failover explains: a retriable Kafka error (NOT_CONTROLLER while
// a new controller leader is elected, REQUEST_TIMED_OUT), or a connection that failed or closed under
// the request because its broker stopped. A request sharded over brokers is transient when each of its
// failed shards is.
func transient(err error) bool {
	if se, ok := errors.AsType[*kadm.ShardErrors](err); ok {
		for _, s := range se.Errs {
			if !transient(s.Err) {
				return false
			}
		}
		return len(se.Errs) > 0
	}
	if ke, ok := errors.AsType[*kerr.Error](err); ok {
		return ke.Retriable || ke == kerr.RequestTimedOut
	}
	_, closed := errors.AsType[*kgo.ErrFirstReadEOF](err)
	_, sys := errors.AsType[*os.SyscallError](err)
	return closed || sys || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
