package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// producerIDBlock is how many producer ids the broker reserves from the metadata store at a time, so
// that one durable metadata write serves many InitProducerId requests.
const producerIDBlock = 1000

// producerIDs hands out producer ids from blocks the metadata store reserved durably: an id is never
// given twice, across restarts too (ids left in a block at shutdown are skipped).
type producerIDs struct {
	// turn is held (a value sent) while taking an id; a channel rather than a mutex because refilling
	// waits for a durable metadata write, and a caller must be able to give up when its ctx ends.
	turn       chan struct{}
	next, stop int64
}

// takeProducerID returns a fresh producer id, reserving a new block when the current one is used up.
func (b *Broker) takeProducerID(ctx context.Context) (int64, error) {
	p := &b.pids
	select {
	case p.turn <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	defer func() { <-p.turn }()
	if p.next == p.stop {
		first, err := b.meta.AllocateProducerIDs(ctx, producerIDBlock)
		if err != nil {
			return 0, err
		}
		p.next, p.stop = first, first+producerIDBlock
	}
	id := p.next
	p.next++
	return id, nil
}

// initProducerID answers InitProducerId (key 22) for idempotent producers: a new producer id at
// epoch 0. Transactional ids are refused until the transaction coordinator exists.
func (b *Broker) initProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = errorCode(errTransactionsUnsupported)
		return resp
	}
	id, err := b.takeProducerID(ctx)
	if err != nil {
		resp.ErrorCode = b.errorCode(err)
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp
}
