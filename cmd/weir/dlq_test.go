package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/server"
)

// setGroupConfig sets group configs with IncrementalAlterConfigs.
func setGroupConfig(t *testing.T, ctx context.Context, cl *kgo.Client, group string, kv ...string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for i := 0; i+1 < len(kv); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = kv[i], kmsg.StringPtr(kv[i+1])
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || kerr.ErrorForCode(resp.Resources[0].ErrorCode) != nil {
		t.Fatalf("set %v on %s: %v %+v", kv, group, err, resp)
	}
}

// readFrom reads n records of topic's partition 0 from offset at.
func readFrom(t *testing.T, ctx context.Context, addr, topic string, at int64, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(at)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s from %d", len(out), n, topic, at)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// TestCLIDLQRedrive: records a share consumer rejects land in the group's dead-letter topic; dlq
// redrive produces them back to their source partition with their key, value and own headers and
// without the weir.dlq.* ones, and a second run moves nothing; --to sends them elsewhere; a group
// without a dead-letter topic is refused.
func TestCLIDLQRedrive(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.KafkaAddr, cfg.HTTPAddr, cfg.ControllerAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.ShareGroups = true
	n, err := server.Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() { _ = n.Close() })
	addr := n.KafkaAddr()
	ctx, cancel := context.WithTimeout(t.Context(), testBound)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const topic, group, dlq = "jobs", "workers", "dlq.jobs"
	on := "true"
	for name, configs := range map[string]map[string]*string{topic: nil, dlq: {"errors.deadletterqueue.group.enable": &on}} {
		if _, err := adm.CreateTopic(ctx, 1, 1, configs, name); err != nil {
			t.Fatal(err)
		}
	}
	setGroupConfig(t, ctx, cl, group, "share.auto.offset.reset", "earliest", "errors.deadletterqueue.topic.name", dlq)
	values := []string{"bad-0", "good", "bad-1", "bad-2"}
	for _, v := range values {
		r := &kgo.Record{Topic: topic, Key: []byte("k-" + v), Value: []byte(v), Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte(v)}}}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	sc, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	for acked := 0; acked < len(values); {
		fs := sc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("share consumer acknowledged %d of %d", acked, len(values))
		}
		for _, r := range fs.Records() {
			if strings.HasPrefix(string(r.Value), "bad") {
				sc.MarkAcks(kgo.AckReject, r)
			} else {
				sc.MarkAcks(kgo.AckAccept, r)
			}
			acked++
		}
	}
	if err := sc.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	sc.Close()
	readFrom(t, ctx, addr, dlq, 0, 3)

	first := runCLI(t, "", "dlq", "redrive", group, "--rate", "50", "--brokers", addr)
	if first.err != nil || !strings.Contains(first.stdout, "redrove 3 records from "+dlq) || !strings.Contains(first.stderr, "] 3/3 records") {
		t.Fatalf("first redrive: %v, stdout %q, stderr %q", first.err, first.stdout, first.stderr)
	}
	t.Logf("first redrive: %s%s", first.stderr, first.stdout)
	back := readFrom(t, ctx, addr, topic, int64(len(values)), 3)
	for i, want := range []string{"bad-0", "bad-1", "bad-2"} {
		r := back[i]
		if string(r.Value) != want || string(r.Key) != "k-"+want || len(r.Headers) != 1 || r.Headers[0].Key != "trace" || string(r.Headers[0].Value) != want {
			t.Fatalf("redriven record %d: key %q value %q headers %v", i, r.Key, r.Value, r.Headers)
		}
	}
	if out := mustRun(t, "", "dlq", "redrive", group, "--brokers", addr); !strings.Contains(out, "redrove 0 records") {
		t.Fatalf("second redrive: %q", out)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup(topic, 0); o.Offset != int64(len(values))+3 {
		t.Fatalf("source topic ends at %d after two redrives, want %d", o.Offset, len(values)+3)
	}

	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "elsewhere"); err != nil {
		t.Fatal(err)
	}
	const other = "workers-2"
	setGroupConfig(t, ctx, cl, other, "errors.deadletterqueue.topic.name", dlq)
	if out := mustRun(t, "", "dlq", "redrive", other, "--to", "elsewhere", "--brokers", addr); !strings.Contains(out, "redrove 3 records") {
		t.Fatalf("redrive --to: %q", out)
	}
	if got := readFrom(t, ctx, addr, "elsewhere", 0, 3); string(got[2].Value) != "bad-2" {
		t.Fatalf("redrive --to wrote %q last", got[2].Value)
	}

	testRedriveResumes(t, ctx, cl, addr)

	if r := runCLI(t, "", "dlq", "redrive", "nobody", "--brokers", addr); !errors.Is(r.err, errNoDeadLetterTopic) {
		t.Fatalf("redrive of a group without a dead-letter topic: %v", r.err)
	}
	if r := runCLI(t, "", "dlq", "redrive", group, "--rate", "-1", "--brokers", addr); !errors.Is(r.err, errUsage) {
		t.Fatalf("negative --rate: %v", r.err)
	}
}

// cancelOnWrite cancels a context at its first write: the redrive's first progress line, written once
// its first records are produced and committed.
type cancelOnWrite struct {
	cancel context.CancelFunc
	buf    strings.Builder
}

func (w *cancelOnWrite) Write(b []byte) (int, error) {
	w.cancel()
	return w.buf.Write(b)
}

// testRedriveResumes: a redrive at 2 records a second, stopped right after its first commit (at about
// 1 s, 2 or 3 of 5 records), has moved only what it committed; the next run moves the rest, and the
// source topic gets each record once, in order.
func testRedriveResumes(t *testing.T, ctx context.Context, cl *kgo.Client, addr string) {
	t.Helper()
	const src, dlq, group = "slow", "dlq.slow", "slow-workers"
	adm := kadm.NewClient(cl)
	on := "true"
	for topic, configs := range map[string]map[string]*string{src: nil, dlq: {"errors.deadletterqueue.group.enable": &on}} {
		if _, err := adm.CreateTopic(ctx, 1, 1, configs, topic); err != nil {
			t.Fatal(err)
		}
	}
	setGroupConfig(t, ctx, cl, group, "errors.deadletterqueue.topic.name", dlq)
	const total = 5
	for i := range total {
		r := &kgo.Record{Topic: dlq, Partition: 0, Value: []byte{'0' + byte(i)}, Headers: []kgo.RecordHeader{
			{Key: "weir.dlq.topic", Value: []byte(src)}, {Key: "weir.dlq.partition", Value: []byte("0")}}}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	root := newRootCmd()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	progress := &cancelOnWrite{cancel: stop}
	var out strings.Builder
	root.SetArgs([]string{"dlq", "redrive", group, "--rate", "2", "--brokers", addr})
	root.SetOut(&out)
	root.SetErr(progress)
	if err := root.ExecuteContext(runCtx); !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped redrive: %v (stdout %q, stderr %q)", err, out.String(), progress.buf.String())
	}
	ends, err := adm.ListEndOffsets(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	moved, _ := ends.Lookup(src, 0)
	if moved.Offset < 1 || moved.Offset >= total {
		t.Fatalf("the stopped redrive moved %d of %d records (progress %q)", moved.Offset, total, progress.buf.String())
	}
	t.Logf("stopped after %d records: %q", moved.Offset, progress.buf.String())
	rest := mustRun(t, "", "dlq", "redrive", group, "--brokers", addr)
	if want := fmt.Sprintf("redrove %d records", total-moved.Offset); !strings.Contains(rest, want) {
		t.Fatalf("resumed redrive: %q, want %q", rest, want)
	}
	if ends, err = adm.ListEndOffsets(ctx, src); err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup(src, 0); o.Offset != total {
		t.Fatalf("source topic ends at %d after the two runs, want %d", o.Offset, total)
	}
	var got []string
	for _, r := range readFrom(t, ctx, addr, src, 0, total) {
		got = append(got, string(r.Value))
	}
	if strings.Join(got, "") != "01234" {
		t.Fatalf("source topic after the two runs: %v", got)
	}
}
