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
//	go test -run '^$' -bench 'ManagerCreatePartitions|RawCreateDirs' -benchtime 1x -count 3 ./internal/partition/
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

// BenchmarkRawCreateDirs is the floor under BenchmarkManagerCreatePartitions on the same disk: 10,000
// directories, each with one small file written and fdatasync'd and the directory synced, on as many
// goroutines as the Manager opens replicas with, and the parent synced once per 128. Run the two in
// alternation and compare partitions/s:
//
//	go test -run '^$' -bench 'ManagerCreatePartitions|RawCreateDirs' -benchtime 1x -count 3 ./internal/partition/
func BenchmarkRawCreateDirs(b *testing.B) {
	const dirs = 10_000
	parent := b.TempDir()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		for from := 0; from < dirs; from += openBatch {
			n := min(openBatch, dirs-from)
			for _, err := range inParallel(n, func(j int) error {
				d := filepath.Join(parent, fmt.Sprintf("t%d-%d", i, from+j))
				if err := vfs.OS.MkdirAll(d); err != nil {
					return err
				}
				f, err := vfs.OS.Create(filepath.Join(d, "f"))
				if err != nil {
					return err
				}
				if _, err := f.Write([]byte("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n")); err != nil {
					return err
				}
				if err := f.Sync(); err != nil {
					return err
				}
				if err := f.Close(); err != nil {
					return err
				}
				return vfs.OS.SyncDir(d)
			}) {
				if err != nil {
					b.Fatal(err)
				}
			}
			if err := vfs.OS.SyncDir(parent); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N*dirs)/time.Since(start).Seconds(), "partitions/s")
}
