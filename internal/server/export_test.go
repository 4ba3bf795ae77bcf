package server

import (
	"testing"
	"time"
)

// SetCloseTimeout sets closeTimeout for the rest of the test.
func SetCloseTimeout(t *testing.T, d time.Duration) {
	old := closeTimeout
	closeTimeout = d
	t.Cleanup(func() { closeTimeout = old })
}

// ShutdownStepsDone is closed once n's shutdown steps have ended, also after Shutdown gave up on them.
func ShutdownStepsDone(n *Node) <-chan struct{} { return n.stepsDone }
