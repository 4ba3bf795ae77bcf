package api_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/server"
)

// readToEnd reads topic's partition 0 from its start to its high watermark and returns the records.
func readToEnd(t *testing.T, n *server.Node, adm *kadm.Client, topic string) []*kgo.Record {
	t.Helper()
	ctx := testCtx(t)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	cl := newClient(t, n, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []*kgo.Record
	for len(got) == 0 || got[len(got)-1].Offset < end.Offset-1 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d records of %s up to %d: %v", len(got), topic, end.Offset, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s[%d]: %v", topic, p, err) })
		got = append(got, fs.Records()...)
	}
	cl.Close()
	return got
}

// TestAPICompactionLagKeepsRecentRecords: two compacted topics get the same overwrites through
// franz-go; the node's periodic maintenance compacts the one without a lag, twice, while the one with
// min.compaction.lag.ms=1h keeps every record, superseded ones included.
func TestAPICompactionLagKeepsRecentRecords(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	base := map[string]*string{"cleanup.policy": kadm.StringPtr("compact"), "segment.bytes": kadm.StringPtr("1024")}
	lagged := map[string]*string{"min.compaction.lag.ms": kadm.StringPtr("3600000")}
	for k, v := range base {
		lagged[k] = v
	}
	createTopic(t, adm, "eager", 1, base)
	createTopic(t, adm, "lagged", 1, lagged)
	cl := newClient(t, n)
	produce := func(round int) {
		t.Helper()
		for i := range 100 {
			for _, topic := range []string{"eager", "lagged"} {
				r := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i%5), Value: fmt.Appendf(nil, "v%d-%d", round, i)}
				if err := cl.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	waitCompacted := func(written int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second) // a few 10 s maintenance periods
		defer cancel()
		for len(readToEnd(t, n, adm, "eager")) >= written {
			select {
			case <-ctx.Done():
				t.Fatalf("eager was not compacted: %d records", written)
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	// The second compaction needs a maintenance period that started after the first ended: by then
	// lagged has had a whole one since round 0 was written.
	produce(0)
	waitCompacted(100)
	left := len(readToEnd(t, n, adm, "eager"))
	produce(1)
	waitCompacted(left + 100)
	got := readToEnd(t, n, adm, "lagged")
	if len(got) != 200 {
		t.Fatalf("lagged holds %d records, want all 200 (none is older than min.compaction.lag.ms)", len(got))
	}
	for i, r := range got {
		if r.Offset != int64(i) {
			t.Fatalf("lagged record %d has offset %d", i, r.Offset)
		}
	}
}
