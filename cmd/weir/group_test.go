package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/server"
)

// startGroupNode runs a real node in-process for the group commands.
func startGroupNode(t *testing.T) string {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.KafkaAddr, cfg.HTTPAddr, cfg.ControllerAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Groups = group.CoordinatorConfig{OffsetsPartitions: 2, SessionTimeoutMin: 100 * time.Millisecond}
	n, err := server.Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n.KafkaAddr()
}

func groupOffsets(t *testing.T, adm *kadm.Client, g string) map[int32]int64 {
	t.Helper()
	os, err := adm.FetchOffsets(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	os.Each(func(o kadm.OffsetResponse) { out[o.Partition] = o.At })
	return out
}

func TestCLIGroup(t *testing.T) {
	addr := startGroupNode(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(t.Context(), testBound)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "cli-t"); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	for i := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "cli-t", Value: []byte{byte('a' + i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("cli-g"), kgo.ConsumeTopics("cli-t"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.ClientID("cli-consumer"))
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < 10; {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("consume timed out")
		}
		n += len(fs.Records())
		if err := consumer.CommitRecords(ctx, fs.Records()...); err != nil {
			t.Fatal(err)
		}
	}

	out := mustRun(t, "", "--brokers", addr, "group", "describe", "cli-g")
	for _, want := range []string{"STATE     Stable", "MEMBERS   1", "LAG       0", "cli-t  0          5          5        0    cli-consumer-", "cli-consumer"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe lacks %q:\n%s", want, out)
		}
	}
	if r := runCLI(t, "", "--brokers", addr, "group", "reset-offsets", "cli-g", "--to-earliest"); r.err == nil || !strings.Contains(r.err.Error(), "active members") {
		t.Errorf("reset of an active group: %v", r.err)
	}
	if r := runCLI(t, "", "--brokers", addr, "group", "delete", "cli-g"); r.err == nil || !strings.Contains(r.err.Error(), "NON_EMPTY_GROUP") {
		t.Errorf("delete of an active group: %v", r.err)
	}
	consumer.Close()

	if out := mustRun(t, "", "--brokers", addr, "group", "list"); !strings.Contains(out, "cli-g  Empty  consumer") {
		t.Errorf("list:\n%s", out)
	}
	if out := mustRun(t, "", "--brokers", addr, "group", "list", "--state", "Stable"); strings.Contains(out, "cli-g") {
		t.Errorf("list --state Stable shows the empty group:\n%s", out)
	}
	out = mustRun(t, "", "--brokers", addr, "group", "reset-offsets", "cli-g", "--to-earliest", "--dry-run")
	if !strings.Contains(out, "cli-t  0          5    0") || !strings.Contains(out, "dry run") {
		t.Errorf("dry run:\n%s", out)
	}
	if got := groupOffsets(t, adm, "cli-g"); got[0] != 5 || got[1] != 5 {
		t.Fatalf("dry run changed offsets: %v", got)
	}
	for _, tc := range []struct {
		args []string
		want int64
	}{
		{[]string{"--to-earliest"}, 0},
		{[]string{"--to-offset", "3"}, 3},
		{[]string{"--to-offset", "99"}, 5},
		{[]string{"--to-latest"}, 5},
		{[]string{"--to-datetime", before.Add(-time.Hour).UTC().Format(time.RFC3339)}, 0},
		{[]string{"--to-datetime", time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "--topic", "cli-t"}, 5},
	} {
		mustRun(t, "", append([]string{"--brokers", addr, "group", "reset-offsets", "cli-g"}, tc.args...)...)
		if got := groupOffsets(t, adm, "cli-g"); got[0] != tc.want || got[1] != tc.want {
			t.Errorf("reset %v: offsets %v, want %d", tc.args, got, tc.want)
		}
	}
	if r := runCLI(t, "", "--brokers", addr, "group", "reset-offsets", "cli-g", "--to-earliest", "--to-latest"); r.err == nil {
		t.Error("two reset modes accepted")
	}
	if out := mustRun(t, "", "--brokers", addr, "group", "delete", "cli-g"); !strings.Contains(out, "deleted group cli-g") {
		t.Errorf("delete:\n%s", out)
	}
	if out := mustRun(t, "", "--brokers", addr, "group", "list"); strings.Contains(out, "cli-g") {
		t.Errorf("deleted group still listed:\n%s", out)
	}
	if r := runCLI(t, "", "--brokers", addr, "group", "delete", "cli-g"); r.err == nil || !strings.Contains(r.err.Error(), "GROUP_ID_NOT_FOUND") {
		t.Errorf("delete of a deleted group: %v", r.err)
	}
}

func TestCLIGroupDescribeUnknown(t *testing.T) {
	addr := startGroupNode(t)
	r := runCLI(t, "", "--brokers", addr, "group", "describe", "no-such-group")
	if !errors.Is(r.err, errNoSuchGroup) || r.err.Error() != "group describe no-such-group: no such group" {
		t.Fatalf("err %v, want %q", r.err, "group describe no-such-group: no such group")
	}
	if r.stdout != "" {
		t.Errorf("stdout %q, want nothing", r.stdout)
	}
}
