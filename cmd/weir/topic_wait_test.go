package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/server"
	"github.com/weir-mq/weir/internal/vfs"
)

// TestCLITopicCreateWaitsForThePartitions: a broker answers CreateTopics once the metadata is committed and
// opens the replicas in the background, so topic create waits, with progress on stderr, until every
// partition serves. The node's data directory is in memory, and creating one replica of the topic blocks
// for 6 s, longer than the broker waits before it answers CreateTopics and ListOffsets.
func TestCLITopicCreateWaitsForThePartitions(t *testing.T) {
	inj := vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if op == vfs.OpMkdirAll && strings.HasSuffix(path, "/slow-3") {
			time.Sleep(6 * time.Second)
		}
		return nil
	})
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir() // the controller's Raft store is on the real disk, the logs in memory
	cfg.FS = vfs.NewFaulty(vfs.NewMem(), inj)
	cfg.KafkaAddr, cfg.HTTPAddr, cfg.ControllerAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Logger = slog.New(slog.DiscardHandler)
	n, err := server.Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() { _ = n.Close() })

	res := runCLI(t, "", "--brokers", n.KafkaAddr(), "topic", "create", "slow", "--partitions", "8")
	if res.err != nil {
		t.Fatalf("topic create: %v\n%s", res.err, res.stderr)
	}
	if !strings.Contains(res.stderr, "of 8 partitions serve") {
		t.Errorf("no progress on stderr while the partitions opened: %q", res.stderr)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// right after the command, every partition serves: no retry needed
	offs, err := kadm.NewClient(cl).ListEndOffsets(context.Background(), "slow")
	if err != nil {
		t.Fatal(err)
	}
	offs.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Errorf("partition %d right after topic create: %v", o.Partition, o.Err)
		}
	})
	if res := runCLI(t, "", "--brokers", n.KafkaAddr(), "topic", "create", "quick", "--wait", "0"); res.err != nil || res.stderr != "" {
		t.Fatalf("topic create --wait 0: %v, stderr %q", res.err, res.stderr)
	}
}
