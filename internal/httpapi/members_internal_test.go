package httpapi

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fetchOf is a fetch of n records of size bytes for each of partitions 0 to parts-1 of topic t, from
// offset from.
func fetchOf(parts int32, from int64, n, size int) kgo.Fetches {
	var f kgo.Fetch
	f.Topics = []kgo.FetchTopic{{Topic: "t"}}
	for p := range parts {
		fp := kgo.FetchPartition{Partition: p}
		for i := range n {
			fp.Records = append(fp.Records, &kgo.Record{Topic: "t", Partition: p, Offset: from + int64(i), Value: make([]byte, size)})
		}
		f.Topics[0].Partitions = append(f.Topics[0].Partitions, fp)
	}
	return kgo.Fetches{f}
}

// TestMemberPending: a member answers its pending records in the order it took them, takes no more
// once they reach either bound, and a revoke drops those of the partitions revoked and no others.
func TestMemberPending(t *testing.T) {
	m := &member{assigned: map[string][]int32{"t": {0, 1, 2}}}
	m.hold(fetchOf(3, 0, 4, 10))
	if got := m.room(); got != pendingMax-12 {
		t.Fatalf("room %d after 12 records, want %d", got, pendingMax-12)
	}
	first := m.take(5)
	want := []string{"0@0", "0@1", "0@2", "0@3", "1@0"}
	if got := keys(first); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("took %v, want %v", got, want)
	}
	m.revoke(map[string][]int32{"t": {1}})
	if got := keys(m.take(100)); fmt.Sprint(got) != fmt.Sprint([]string{"2@0", "2@1", "2@2", "2@3"}) {
		t.Fatalf("after revoking partition 1 the member answers %v", got)
	}
	if m.pendingBytes != 0 || len(m.pending) != 0 || m.room() != pendingMax {
		t.Fatalf("nothing pending, yet %d bytes, %d records, room %d", m.pendingBytes, len(m.pending), m.room())
	}
	m.hold(fetchOf(1, 4, 2, pendingBytesMax/2))
	if got := m.room(); got != 0 {
		t.Fatalf("room %d with %d bytes pending, want none", got, m.pendingBytes)
	}
	m.take(1)
	if got := m.room(); got != pendingMax-1 {
		t.Fatalf("room %d with one record of half the bytes bound pending, want %d", got, pendingMax-1)
	}
}

func keys(recs []*kgo.Record) []string {
	out := make([]string, 0, len(recs))
	for _, r := range recs {
		out = append(out, fmt.Sprintf("%d@%d", r.Partition, r.Offset))
	}
	return out
}
