package server_test

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/delay"
	"github.com/weir-mq/weir/internal/server"
)

// TestServerDelayTopic runs a delay topic in process (under -race, the releaser, its start by the
// image loop and its stop at shutdown): three records due at once, after 100 ms (weir.delay-ms) and
// at a weir.deliver-at 300 ms ahead, published in the reverse order, come out of the target in due
// order with the delay headers, and one with a malformed weir.deliver-at is refused with
// INVALID_RECORD; a change of the topic's weir.delivery.delay.ms restarts the releaser, which
// releases the next record once; a client's record carrying the progress header is refused with
// INVALID_RECORD; after a restart of the node on its data directory, one more record
// is released and none of the first three again (the releaser resumed from its progress record).
func TestServerDelayTopic(t *testing.T) {
	dir := t.TempDir()
	n := start(t, testConfig(dir))
	ctx := testCtx(t)
	adm := kadm.NewClient(client(t, n))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "out"); err != nil {
		t.Fatalf("create out: %v", err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"weir.delay.target.topic": kadm.StringPtr("out")}, "in"); err != nil {
		t.Fatalf("create in: %v", err)
	}
	at := strconv.FormatInt(time.Now().Add(300*time.Millisecond).UnixMilli(), 10)
	delayProduce(t, n, &kgo.Record{Topic: "in", Value: []byte("at"), Headers: []kgo.RecordHeader{{Key: "weir.deliver-at", Value: []byte(at)}}},
		&kgo.Record{Topic: "in", Value: []byte("delay"), Headers: []kgo.RecordHeader{{Key: "weir.delay-ms", Value: []byte("100")}}},
		&kgo.Record{Topic: "in", Value: []byte("now")})
	got := delayConsume(t, n, "out", 3)
	for i, want := range []string{"now", "delay", "at"} {
		r := got[i]
		if string(r.Value) != want {
			t.Fatalf("released %d: %q, want %q", i, r.Value, want)
		}
		hs := map[string]string{}
		for _, h := range r.Headers {
			hs[h.Key] = string(h.Value)
		}
		if hs["weir.delay.topic"] != "in" || hs["weir.delay.partition"] != "0" || hs["weir.delay.offset"] != strconv.Itoa(2-i) {
			t.Errorf("released %q with headers %v, want in, 0, %d", want, hs, 2-i)
		}
	}
	if got[2].Timestamp.UnixMilli() < delayInt(t, at) {
		t.Errorf("released at %d, due %s", got[2].Timestamp.UnixMilli(), at)
	}
	bad := &kgo.Record{Topic: "in", Value: []byte("bad"), Headers: []kgo.RecordHeader{{Key: "weir.deliver-at", Value: []byte("soon")}}}
	if err := client(t, n, kgo.RecordRetries(0)).ProduceSync(ctx, bad).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Errorf("a malformed weir.deliver-at on a delay topic: %v, want INVALID_RECORD", err)
	}

	// A config change restarts the partition's releaser, after the old one has stopped.
	alter, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "weir.delivery.delay.ms", Value: kadm.StringPtr("50")}}, "in")
	if err == nil {
		err = alter[0].Err
	}
	if err != nil {
		t.Fatalf("alter weir.delivery.delay.ms: %v", err)
	}
	delayProduce(t, n, &kgo.Record{Topic: "in", Value: []byte("altered")})
	if got = delayConsume(t, n, "out", 4); string(got[3].Value) != "altered" {
		t.Fatalf("released after the config change: %q, want altered", got[3].Value)
	}

	// A client's record with the reserved header is refused: only the releaser writes progress.
	forged := delay.AppendProgress(nil, delay.Progress{ScanEnd: 1 << 40, Low: 1 << 40})
	rec := &kgo.Record{Topic: "in", Headers: []kgo.RecordHeader{{Key: delay.ProgressHeader, Value: forged}}}
	if err := client(t, n, kgo.RecordRetries(0)).ProduceSync(ctx, rec).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Errorf("a client's progress record: %v, want INVALID_RECORD", err)
	}

	if err := n.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	n = start(t, testConfig(dir))
	delayProduce(t, n, &kgo.Record{Topic: "in", Value: []byte("after")})
	got = delayConsume(t, n, "out", 5)
	if v := string(got[4].Value); v != "after" {
		t.Fatalf("released after the restart: %q, want after", v)
	}
	if end := delayEndOffset(t, n, "out"); end != 5 {
		t.Fatalf("the target ends at %d after the restart, want 5: a record was released again", end)
	}
}

func delayProduce(t *testing.T, n *server.Node, recs ...*kgo.Record) {
	t.Helper()
	if err := client(t, n).ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// delayConsume reads topic from its start until it has k records.
func delayConsume(t *testing.T, n *server.Node, topic string, k int) []*kgo.Record {
	t.Helper()
	cl := client(t, n, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := testCtx(t)
	var got []*kgo.Record
	for len(got) < k {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("consume %s: %v after %d records", topic, err, len(got))
		}
		got = append(got, fs.Records()...)
	}
	return got
}

func delayEndOffset(t *testing.T, n *server.Node, topic string) int64 {
	t.Helper()
	ends, err := kadm.NewClient(client(t, n)).ListEndOffsets(testCtx(t), topic)
	if err != nil {
		t.Fatalf("end offsets: %v", err)
	}
	o, _ := ends.Lookup(topic, 0)
	return o.Offset
}

func delayInt(t *testing.T, s string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestServerDelayMetrics: a node's /metrics reports its delay topics' releasers: partitions, records
// released and their lateness, records held pending (those due in an hour), and, once the target
// topic is deleted so that releases fail, how long the earliest pending record has been due.
func TestServerDelayMetrics(t *testing.T) {
	n := start(t, testConfig(t.TempDir()))
	ctx := testCtx(t)
	adm := kadm.NewClient(client(t, n))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "out"); err != nil {
		t.Fatalf("create out: %v", err)
	}
	if _, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"weir.delay.target.topic": kadm.StringPtr("out")}, "in"); err != nil {
		t.Fatalf("create in: %v", err)
	}
	at := func(d time.Duration) []kgo.RecordHeader {
		return []kgo.RecordHeader{{Key: "weir.deliver-at", Value: []byte(strconv.FormatInt(time.Now().Add(d).UnixMilli(), 10))}}
	}
	var recs []*kgo.Record
	for i := range 4 {
		recs = append(recs, &kgo.Record{Topic: "in", Partition: int32(i % 2), Value: []byte("soon"), Headers: at(200 * time.Millisecond)})
	}
	for i := range 3 {
		recs = append(recs, &kgo.Record{Topic: "in", Partition: int32(i % 2), Value: []byte("later"), Headers: at(time.Hour)})
	}
	if err := client(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	delayConsume(t, n, "out", 4)
	in := map[string]string{"topic": "in"}
	want := map[string]float64{"weir_delay_partitions": 2, "weir_delay_released_records_total": 4, "weir_delay_held_records": 3,
		"weir_delay_overdue_seconds": 0, "weir_delay_release_lateness_seconds": 4}
	waitFor(t, "the delay series", func() string {
		fams := scrape(t, n)
		for name, v := range want {
			labels := in
			if name == "weir_delay_release_lateness_seconds" {
				labels = nil
			}
			if got := series(fams, name, labels); len(got) != 1 || value(got[0]) != v {
				return fmt.Sprintf("%s%v: %v, want %v", name, labels, got, v)
			}
		}
		if got := fams["weir_delay_release_lateness_seconds"].GetType().String(); got != "HISTOGRAM" {
			return "weir_delay_release_lateness_seconds is a " + got
		}
		return ""
	})

	if resp, err := adm.DeleteTopic(ctx, "out"); err != nil || resp.Err != nil {
		t.Fatalf("delete out: %v %v", err, resp.Err)
	}
	if err := client(t, n).ProduceSync(ctx, &kgo.Record{Topic: "in", Value: []byte("stuck"), Headers: at(0)}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	waitFor(t, "an overdue record", func() string {
		if got := series(scrape(t, n), "weir_delay_overdue_seconds", in); len(got) != 1 || value(got[0]) < 1 {
			return fmt.Sprintf("weir_delay_overdue_seconds%v: %v, want at least 1", in, got)
		}
		return ""
	})
}

// waitFor waits, up to 30 s, until check returns "" (else why not yet).
func waitFor(t *testing.T, what string, check func() string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for why := check(); why != ""; why = check() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %s", what, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
