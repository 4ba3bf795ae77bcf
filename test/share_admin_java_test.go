package test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestJavaShareAdmin drives the share group admin calls of the Java AdminClient (kafka-clients 4.x:
// listShareGroupOffsets, alterShareGroupOffsets, deleteShareGroupOffsets, deleteShareGroups; keys 90,
// 91, 92 and 42) against a weir process while franz-go share consumers read the topic:
//   - an alter on a group no one joined yet sets both share-partitions' start offsets to 0;
//   - a consumer reads the 20 records; while it is a member, alter and delete answer
//     GroupNotEmptyException; once it left, the start offsets are 10 and 10, and 5 more records on
//     partition 0 show as its lag;
//   - altered back to offset 3, a new consumer gets exactly partition 0's records 3-14 again;
//   - deleted offsets leave no start offset; the group is deleted once, then not found.
func TestJavaShareAdmin(t *testing.T) {
	javaClasspath(t)
	ctx := testContext(t, 3*time.Minute)
	n := startNode(t, nodeOptions{Args: []string{"--share-groups"}})
	const topic, group = "share-admin-java", "share-admin-group"
	n.createTopic(ctx, t, topic, 2, nil)
	prod := n.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(p int32, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			r := &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "p%d-%02d", p, i)}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	admin := func(steps ...string) []string {
		t.Helper()
		out := runJava(ctx, t, "ShareAdmin", append([]string{n.kafkaAddr(), group, topic}, steps...)...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) == 0 || lines[len(lines)-1] != "done" {
			t.Fatalf("ShareAdmin %v: %q", steps, out)
		}
		return lines[:len(lines)-1]
	}
	// offsets lists partitions 0 and 1 as "START/LAG", or "none".
	offsets := func() [2]string {
		t.Helper()
		var got [2]string
		for _, l := range admin("list:0,1") {
			var p int
			var start, epoch, lag int64
			switch {
			case strings.HasPrefix(l, "none "):
				if _, err := fmt.Sscanf(l, "none %d", &p); err != nil || p > 1 {
					t.Fatalf("list: %q", l)
				}
				got[p] = "none"
			default:
				if _, err := fmt.Sscanf(l, "offset %d %d %d %d", &p, &start, &epoch, &lag); err != nil || p > 1 {
					t.Fatalf("list: %q", l)
				}
				got[p] = fmt.Sprintf("%d/%d", start, lag)
				if start < 0 {
					got[p] = "none"
				}
			}
		}
		return got
	}
	expect := func(got, want []string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Fatalf("ShareAdmin printed %q, want %q", got, want)
		}
	}
	// consume reads with a new share consumer until it has the values want, accepts them (flushed
	// before whileMember runs), fails on any other value, and closes the consumer, which leaves the
	// group.
	consume := func(want []string, whileMember func()) {
		t.Helper()
		c := n.newClient(t, kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(200*time.Millisecond))
		got := map[string]bool{}
		for len(got) < len(want) {
			fs := c.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("got %d of %d records", len(got), len(want))
			}
			for _, r := range fs.Records() {
				if !slices.Contains(want, string(r.Value)) || got[string(r.Value)] {
					t.Fatalf("record %s at %d-%d delivered, want each of %v once", r.Value, r.Partition, r.Offset, want)
				}
				got[string(r.Value)] = true
			}
			c.MarkAcks(kgo.AckAccept)
		}
		if err := c.FlushAcks(ctx); err != nil {
			t.Fatalf("flush acknowledgements: %v", err)
		}
		if whileMember != nil {
			whileMember()
		}
		c.Close()
	}
	values := func(p int32, from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf("p%d-%02d", p, i))
		}
		return out
	}

	produce(0, 0, 10)
	produce(1, 0, 10)
	expect(admin("alter:0=0,1=0"), []string{"altered"})
	if got := offsets(); got != [2]string{"0/10", "0/10"} {
		t.Fatalf("after the first alter: %v, want 0/10 for both", got)
	}

	consume(append(values(0, 0, 10), values(1, 0, 10)...), func() {
		expect(admin("alter:0=0", "delete-offsets", "delete-group"), []string{
			"error alter GroupNotEmptyException", "error delete-offsets GroupNotEmptyException", "error delete-group GroupNotEmptyException"})
	})
	if got := offsets(); got != [2]string{"10/0", "10/0"} {
		t.Fatalf("after the first consumer: %v, want 10/0 for both", got)
	}
	produce(0, 10, 15)
	if got := offsets(); got != [2]string{"10/5", "10/0"} {
		t.Fatalf("after 5 more records: %v, want 10/5 and 10/0", got)
	}

	expect(admin("alter:0=3"), []string{"altered"})
	if got := offsets(); got != [2]string{"3/12", "10/0"} {
		t.Fatalf("after the alter to 3: %v, want 3/12 and 10/0", got)
	}
	consume(values(0, 3, 15), nil)
	if got := offsets(); got != [2]string{"15/0", "10/0"} {
		t.Fatalf("after the second consumer: %v, want 15/0 and 10/0", got)
	}

	expect(admin("delete-offsets"), []string{"deleted-offsets"})
	if got := offsets(); got != [2]string{"none", "none"} {
		t.Fatalf("after delete-offsets: %v", got)
	}
	expect(admin("delete-group", "delete-group"), []string{"deleted-group", "error delete-group GroupIdNotFoundException"})
}
