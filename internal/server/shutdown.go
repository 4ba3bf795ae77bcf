package server

import (
	"context"
	"errors"
	"fmt"
	"time"
)

var (
	// ErrDrainTimeout is returned by Node.Shutdown, Close and Run when in-flight requests had not all
	// been answered when the drain deadline passed: their connections were cut.
	ErrDrainTimeout = errors.New("server: in-flight requests outlasted the drain deadline")
	// ErrShutdownStuck is returned by Node.Shutdown, Close and Run when a shutdown step was still
	// running closeTimeout after the drain deadline: the node gave up on it, and the logs it had not
	// closed recover on the next start.
	ErrShutdownStuck = errors.New("server: shutdown did not finish")
)

// closeTimeout bounds the shutdown steps still running once the drain deadline has passed: closing
// the logs, the metadata store and the HTTP server.
var closeTimeout = 10 * time.Second

// shutdown runs shutdownSteps on a goroutine of its own and waits for it until ctx has ended and
// closeTimeout more has passed. It then gives up: the goroutine is left running (stepsDone closes
// when it ends) and the error names the step it was in.
func (n *Node) shutdown(ctx context.Context) error {
	done := make(chan error, 1)
	n.stepsDone = make(chan struct{})
	n.setStep("starting the shutdown")
	go func() {
		defer close(n.stepsDone)
		done <- n.shutdownSteps(ctx)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	select {
	case err := <-done:
		return err
	case <-n.clock.After(closeTimeout):
	}
	step := *n.step.Load()
	n.logger.Error("shutdown gave up: a step did not finish after the drain deadline; exiting without it",
		"step", step, "close_timeout", closeTimeout)
	return fmt.Errorf("%w: %s did not finish within %v after the drain deadline", ErrShutdownStuck, step, closeTimeout)
}

func (n *Node) setStep(step string) { n.step.Store(&step) }
