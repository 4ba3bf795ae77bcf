// Package server builds a weir node from its Config and owns its lifecycle and shutdown order.
package server

import (
	"context"
	"errors"
)

// Run serves until ctx is cancelled or the process is told to stop.
func Run(ctx context.Context, cfg Config) error {
	return errors.New("server: not built yet")
}
