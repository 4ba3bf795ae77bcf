package server_test

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/server"
	"github.com/weir-mq/weir/internal/vfs"
)

// failSyncOf returns a switch that, enabled, fails every fdatasync of the files of one replica
// directory with EIO.
func failSyncOf(dataDir, replicaDir string) *vfs.Toggle {
	return vfs.NewToggle(vfs.OnOp(vfs.OpSync, filepath.Join(dataDir, replicaDir)+string(filepath.Separator), syscall.EIO))
}

// TestServerStopsOnFailedFsync: a failed fdatasync of a partition log is never acknowledged, and
// the node stops itself with ErrStorageFailed; restarted on the repaired disk, it serves the log
// again with every acknowledged record.
func TestServerStopsOnFailedFsync(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	disk := failSyncOf(dir, "fragile-0")
	cfg.FS = vfs.NewFaulty(vfs.OS, disk)
	n := start(t, cfg)
	ctx := testCtx(t)
	if _, err := kadm.NewClient(client(t, n)).CreateTopic(ctx, 1, 1, nil, "fragile"); err != nil {
		t.Fatalf("create: %v", err)
	}
	cl := client(t, n, kgo.DefaultProduceTopic("fragile"), kgo.DisableIdempotentWrite(), kgo.RecordRetries(0))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("acked")}).FirstErr(); err != nil {
		t.Fatalf("produce before the fault: %v", err)
	}

	disk.Enable()
	res, err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("lost")}).First()
	if err == nil {
		t.Fatalf("a produce whose fdatasync failed was acknowledged at offset %d", res.Offset)
	}
	t.Logf("the produce whose fdatasync failed: %v", err)
	select {
	case <-n.Done():
	case <-ctx.Done():
		t.Fatal("the node did not stop after its fdatasync failed")
	}
	if err := n.Err(); !errors.Is(err, server.ErrStorageFailed) || !errors.Is(err, partition.ErrDirFailed) ||
		!errors.Is(err, syscall.EIO) {
		t.Fatalf("node error %v, want ErrStorageFailed wrapping the EIO", err)
	}
	if err := n.Shutdown(ctx); !errors.Is(err, server.ErrClosed) {
		t.Fatalf("shutdown of a stopped node: %v, want ErrClosed", err)
	}

	disk.Disable()
	n = start(t, testConfig(dir))
	cons := client(t, n, kgo.ConsumeTopics("fragile"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for {
		fetches := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading back after the restart: %v", err)
		}
		if recs := fetches.Records(); len(recs) > 0 {
			if recs[0].Offset != 0 || string(recs[0].Value) != "acked" {
				t.Fatalf("first record after the restart: offset %d %q", recs[0].Offset, recs[0].Value)
			}
			break
		}
	}
	again := client(t, n, kgo.DefaultProduceTopic("fragile"))
	if err := again.ProduceSync(ctx, &kgo.Record{Value: []byte("again")}).FirstErr(); err != nil {
		t.Fatalf("produce after the restart: %v", err)
	}
}
