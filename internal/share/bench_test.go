package share

import (
	"testing"
	"time"
)

// BenchmarkSharePartitionCycle is one fetch-and-acknowledge round of a share consumer as the leader
// runs it on the core: acquire 500 records, accept them in one batch, and encode the record to persist.
// It reports the cost per record.
func BenchmarkSharePartitionCycle(b *testing.B) {
	p, err := New(Config{}, 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	const batch = 500
	now := t0
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		got := p.Acquire("m1", batch, int64(i+1)*batch, now)
		if len(got) != 1 {
			b.Fatalf("acquired %v", got)
		}
		if _, err := p.Acknowledge("m1", []AckBatch{{First: got[0].First, Last: got[0].Last, Types: []AckType{AckAccept}}}, now); err != nil {
			b.Fatal(err)
		}
		r, _ := p.Persist()
		_ = r.Encode()
		now = now.Add(time.Millisecond)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/record")
}

// BenchmarkSharePartitionFullWindow is an acquisition against a full window of 2000 records all held by
// another member, and the deadline after it: the two scans over the window a fetch pays while the
// window is full.
func BenchmarkSharePartitionFullWindow(b *testing.B) {
	p, err := New(Config{}, 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	p.Acquire("m1", DefaultRecordLocksMax, 1<<20, t0)
	b.ReportAllocs()
	for b.Loop() {
		if got := p.Acquire("m2", 500, 1<<20, t0); got != nil {
			b.Fatalf("acquired %v", got)
		}
		if p.Deadline().IsZero() {
			b.Fatal("no deadline")
		}
	}
}
