package server_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

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

// lockedBuffer is a bytes.Buffer that a node's log handler writes to while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestServerStopsOnFailedFsync: a failed fdatasync of a partition log is never acknowledged, and
// the node stops itself with ErrStorageFailed, saying that its partitions, having no other replica,
// are offline until it is repaired and restarted; restarted on the repaired disk, it serves the log
// again with every acknowledged record.
func TestServerStopsOnFailedFsync(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	disk := failSyncOf(dir, "fragile-0")
	cfg.FS = vfs.NewFaulty(vfs.OS, disk)
	var logs lockedBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
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
	// One node: the topic and __consumer_offsets (if created) have no other replica to move to.
	const offline = "no other replica can lead its partitions"
	const until = "offline until the data directory is repaired and the node restarted"
	if text := n.Err().Error(); !strings.Contains(text, offline) || !strings.Contains(text, until) {
		t.Fatalf("node error %q does not say its partitions are offline until it is repaired", text)
	}
	out := logs.String()
	if !strings.Contains(out, "this broker is fenced; "+offline) || !strings.Contains(out, until) || strings.Contains(out, "moved") {
		t.Fatalf("the logs do not say the partitions are offline until the node is repaired:\n%s", out)
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

// TestServerFailedFsyncMovesLeadership: on three nodes, the leader of an RF=3 partition
// (min.insync.replicas=2) fails an fdatasync of its log. It fences itself and stops, so another
// replica leads at once (the session timeout is far longer than the test may run), every
// acknowledged record is read back from the new leader at its offset, producing goes on, and the
// failed node, restarted on the repaired disk, comes back into the ISR.
func TestServerFailedFsyncMovesLeadership(t *testing.T) {
	ctx := testCtx(t)
	const topic = "moved"
	cfgs := make([]server.Config, 3)
	disks := make([]*vfs.Toggle, 3)
	nodes := startVoters(ctx, t, func(i int, cfg server.Config) server.Config {
		cfg.BrokerSessionTimeout = 10 * testTimeout
		cfg.BrokerHeartbeatInterval = 100 * time.Millisecond
		cfg.LeaderRebalanceInterval = -1
		disks[i] = failSyncOf(cfg.DataDir, topic+"-0")
		cfg.FS = vfs.NewFaulty(vfs.OS, disks[i])
		cfgs[i] = cfg
		return cfg
	})
	seeds := kgo.SeedBrokers(nodes[0].KafkaAddr(), nodes[1].KafkaAddr(), nodes[2].KafkaAddr())
	adm := kadm.NewClient(client(t, nodes[0], seeds))
	resp, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	before := partitionState(ctx, t, adm, topic)
	prod := client(t, nodes[0], seeds, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MetadataMinAge(50*time.Millisecond))
	acked := map[int64]string{}
	produce := func(value string) {
		t.Helper()
		res, err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(value)}).First()
		// A connection the stopping leader accepted and closed before it read a request fails the record
		// with ErrFirstReadEOF, which franz-go does not retry (it takes it for a SASL or TLS mismatch), so
		// an application sends the record again, as this does, once.
		if _, firstRead := errors.AsType[*kgo.ErrFirstReadEOF](err); firstRead {
			res, err = prod.ProduceSync(ctx, &kgo.Record{Value: []byte(value)}).First()
		}
		if err != nil {
			t.Fatalf("produce %s: %v", value, err)
		}
		acked[res.Offset] = value
	}
	for i := range 20 {
		produce("before-" + strconv.Itoa(i))
	}

	failed := int(before.Leader) - 1
	disks[failed].Enable()
	for i := range 5 {
		produce("after-" + strconv.Itoa(i))
	}
	select {
	case <-nodes[failed].Done():
	case <-ctx.Done():
		t.Fatal("the leader did not stop after its fdatasync failed")
	}
	if err := nodes[failed].Err(); !errors.Is(err, server.ErrStorageFailed) {
		t.Fatalf("failed node's error %v, want ErrStorageFailed", err)
	}
	survivor := nodes[(failed+1)%3]
	adm = kadm.NewClient(client(t, survivor, kgo.SeedBrokers(survivor.KafkaAddr())))
	after := partitionState(ctx, t, adm, topic)
	if after.Leader == before.Leader || after.LeaderEpoch <= before.LeaderEpoch {
		t.Fatalf("leadership did not move: before %+v, after %+v", before, after)
	}
	cons := client(t, survivor, kgo.SeedBrokers(survivor.KafkaAddr()), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[int64]string{}
	for len(got) < len(acked) {
		fetches := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read back %d of %d acknowledged records", len(got), len(acked))
		}
		for _, r := range fetches.Records() {
			got[r.Offset] = string(r.Value)
		}
	}
	for off, v := range acked {
		if got[off] != v {
			t.Fatalf("offset %d holds %q, acknowledged %q", off, got[off], v)
		}
	}

	disks[failed].Disable()
	nodes[failed] = start(t, cfgs[failed])
	for {
		st := partitionState(ctx, t, adm, topic)
		if len(st.ISR) == 3 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the restarted node did not rejoin the ISR: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// partitionState returns partition 0 of topic as the metadata names it, once it has a leader.
func partitionState(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) kadm.PartitionDetail {
	t.Helper()
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			if p, ok := md.Topics[topic].Partitions[0]; ok && p.Leader >= 0 && p.Err == nil {
				return p
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("metadata of %s: %v", topic, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
