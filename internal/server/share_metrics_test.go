package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/server"
)

// shareGauge scrapes n and returns the value of the share gauge name, or -1 when n has no such series.
func shareGauge(t *testing.T, n *server.Node, name string) float64 {
	t.Helper()
	got := series(scrape(t, n), name, nil)
	if len(got) != 1 {
		return -1
	}
	return value(got[0])
}

// waitShareGauge waits until the share gauge name is want.
func waitShareGauge(t *testing.T, n *server.Node, name string, want float64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for v := shareGauge(t, n, name); v != want; v = shareGauge(t, n, name) {
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v, want %v", name, v, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestServerShareMetrics: a node serving share groups reports its share-partition owners and share
// sessions: one each while a franz-go share consumer reads a one-partition topic, no session once it
// closed, and no owner once the topic is deleted (the image's deletion stops the owner without a
// request for it), and the dropped dead letters by reason, all 0. A node without share groups has none
// of these series.
func TestServerShareMetrics(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.ShareGroups = true
	n := start(t, cfg)
	ctx := testCtx(t)
	adm := kadm.NewClient(client(t, n))
	if resp, err := adm.CreateTopic(ctx, 1, 1, nil, "work"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	prod := client(t, n)
	cons := client(t, n, kgo.ShareGroup("sg"), kgo.ConsumeTopics("work"), kgo.FetchMaxWait(100*time.Millisecond))
	// The share-partition starts at the log end when first fetched: produce until a record arrives.
	for got := false; !got; {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "work", Value: []byte("job")}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		poll, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		got = len(cons.PollFetches(poll).Records()) > 0
		cancel()
		if ctx.Err() != nil {
			t.Fatal("the share consumer got nothing")
		}
	}
	if o, s := shareGauge(t, n, "weir_share_partition_owners"), shareGauge(t, n, "weir_share_sessions"); o != 1 || s != 1 {
		t.Fatalf("while consuming: %v owners, %v sessions, want 1 and 1", o, s)
	}
	fams := scrape(t, n)
	for _, reason := range []string{"prefix", "not-enabled", "missing"} {
		if got := series(fams, "weir_share_dead_letters_dropped_total", map[string]string{"reason": reason}); len(got) != 1 || value(got[0]) != 0 {
			t.Fatalf("weir_share_dead_letters_dropped_total{reason=%q}: %v, want one series at 0", reason, got)
		}
	}
	cons.Close()
	waitShareGauge(t, n, "weir_share_sessions", 0)
	if resp, err := adm.DeleteTopic(ctx, "work"); err != nil || resp.Err != nil {
		t.Fatalf("delete: %v %v", err, resp.Err)
	}
	waitShareGauge(t, n, "weir_share_partition_owners", 0)

	plain := start(t, testConfig(t.TempDir()))
	if v := shareGauge(t, plain, "weir_share_partition_owners"); v != -1 {
		t.Fatalf("a node without share groups reports %v owners", v)
	}
	if got := series(scrape(t, plain), "weir_share_dead_letters_dropped_total", nil); len(got) != 0 {
		t.Fatalf("a node without share groups reports dropped dead letters: %v", got)
	}
}
