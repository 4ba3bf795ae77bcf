package partition

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/clock"
	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/vfs"
)

// BenchmarkManagerCreatePartitions measures how fast one node opens the replicas of a newly created topic
// on the real filesystem (each new replica's directory, partition.metadata and first segment are made
// durable), b.N topics of 10,000 partitions, reported as partitions/s, and how long the Manager then takes to
// close them all cleanly (close-s).
//
//	go test -run '^$' -bench ManagerCreatePartitions -benchtime 1x ./internal/partition/
func BenchmarkManagerCreatePartitions(b *testing.B) {
	const partitions = 10_000
	dir := b.TempDir()
	store, err := controller.OpenLocal(vfs.OS, filepath.Join(dir, "controller"), controller.Broker{NodeID: 1, Host: "h", Port: 9092}, clock.System{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	m, err := NewManager(dir, ManagerOptions{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if _, err := store.CreateTopic(context.Background(), fmt.Sprintf("t%d", i), partitions, nil, false); err != nil {
			b.Fatal(err)
		}
		if err := m.Reconcile(store.Image()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*partitions)/time.Since(start).Seconds(), "partitions/s")
	start = time.Now()
	if err := m.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(time.Since(start).Seconds(), "close-s")
}
