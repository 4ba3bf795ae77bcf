package server_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/server"
	"github.com/weir-mq/weir/internal/vfs"
)

// TestServerShutdownIsBounded: a node whose disk stops answering (an fdatasync of a partition log
// that never returns) while a produce waits for it still finishes Shutdown soon after the drain
// deadline: the produce's connection is cut, the step stuck closing the logs is given up on, and
// Shutdown says so with ErrShutdownStuck instead of hanging.
func TestServerShutdownIsBounded(t *testing.T) {
	const drain, closeTimeout = 300 * time.Millisecond, 500 * time.Millisecond
	server.SetCloseTimeout(t, closeTimeout)
	dir := t.TempDir()
	var hang atomic.Bool
	entered, release := make(chan struct{}, 1), make(chan struct{})
	stuckDir := filepath.Join(dir, "stuck-0") + string(filepath.Separator)
	cfg := testConfig(dir)
	cfg.FS = vfs.NewFaulty(vfs.OS, vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if op == vfs.OpSync && hang.Load() && strings.HasPrefix(path, stuckDir) {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-release
		}
		return nil
	}))
	n := start(t, cfg)
	ctx := testCtx(t)
	if _, err := kadm.NewClient(client(t, n)).CreateTopic(ctx, 1, 1, nil, "stuck"); err != nil {
		t.Fatalf("create: %v", err)
	}
	cl := client(t, n, kgo.DefaultProduceTopic("stuck"), kgo.RecordRetries(0))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatalf("produce before the disk hangs: %v", err)
	}

	hang.Store(true)
	cl.Produce(ctx, &kgo.Record{Value: []byte("hangs")}, nil)
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the produce's fdatasync never started")
	}
	shutCtx, cancel := context.WithTimeout(ctx, drain)
	defer cancel()
	began := time.Now()
	err := n.Shutdown(shutCtx)
	took := time.Since(began)
	t.Logf("Shutdown returned after %v: %v", took, err)
	if !errors.Is(err, server.ErrShutdownStuck) || !strings.Contains(err.Error(), "closing the partition logs") {
		t.Fatalf("Shutdown: %v, want ErrShutdownStuck in the step closing the logs", err)
	}
	if limit := drain + closeTimeout + 2*time.Second; took > limit {
		t.Fatalf("Shutdown took %v, more than %v", took, limit)
	}
	select {
	case <-n.Done():
	default:
		t.Fatal("the node is not Done after Shutdown returned")
	}
	close(release)
	<-server.ShutdownStepsDone(n)
}
