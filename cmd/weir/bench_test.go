package main

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestBenchHistBuckets(t *testing.T) {
	// Every value lies in its bucket, buckets tile the range without gaps, and a bucket is at most
	// 1/histSub of its lower bound wide.
	for i := range histBuckets - 1 {
		lo, hi := histLow(i), histHigh(i)
		if hi < lo || histLow(i+1) != hi+1 {
			t.Fatalf("bucket %d is [%d, %d], next starts at %d", i, lo, hi, histLow(i+1))
		}
		if lo >= 2*histSub && float64(hi-lo+1)/float64(lo) > 1.0/histSub {
			t.Fatalf("bucket %d [%d, %d] is wider than 1/%d of its value", i, lo, hi, histSub)
		}
		for _, v := range []uint64{lo, hi} {
			if got := histIndex(v); got != i {
				t.Fatalf("histIndex(%d) = %d, want %d", v, got, i)
			}
		}
	}
	if got := histIndex(1 << 62); got != histOverflow {
		t.Fatalf("histIndex(2^62) = %d, want the overflow bucket %d", got, histOverflow)
	}
}

func TestBenchHistQuantiles(t *testing.T) {
	var h latencyHist
	if s := h.Snapshot(); s.Quantile(0.5) != 0 || s.Max() != 0 || s.Mean() != 0 {
		t.Fatalf("empty histogram: p50 %v max %v mean %v, want zeros", s.Quantile(0.5), s.Max(), s.Mean())
	}
	rng := rand.New(rand.NewPCG(1, 2))
	vals := make([]time.Duration, 100_000)
	for i := range vals {
		// Log-uniform from 1µs to 1s, the spread latencies have.
		vals[i] = time.Duration(1e3 * float64(uint64(1)<<rng.IntN(20)) * (1 + rng.Float64()))
		h.Record(vals[i])
	}
	h.Record(-time.Second) // a clock step counts as zero
	vals = append(vals, 0)
	slices.Sort(vals)
	s := h.Snapshot()
	if s.Count() != uint64(len(vals)) {
		t.Fatalf("count %d, want %d", s.Count(), len(vals))
	}
	for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 0.999} {
		want := vals[int(q*float64(len(vals)))]
		got := s.Quantile(q)
		if diff := float64(got-want) / float64(want); diff > 1.0/histSub || diff < -1.0/histSub {
			t.Errorf("q%.3f = %v, exact %v: off by %.1f%%", q, got, want, 100*diff)
		}
	}
	if s.Max() != vals[len(vals)-1] || s.Quantile(1) != vals[len(vals)-1] {
		t.Errorf("max %v, q1 %v, want exact %v", s.Max(), s.Quantile(1), vals[len(vals)-1])
	}

	// Since sees only what came after the earlier snapshot.
	h.Record(5 * time.Millisecond)
	h.Record(5 * time.Millisecond)
	d := h.Snapshot().Since(s)
	if d.Count() != 2 || d.Quantile(0.5) < 4900*time.Microsecond || d.Quantile(0.5) > 5100*time.Microsecond {
		t.Errorf("since: count %d p50 %v, want 2 around 5ms", d.Count(), d.Quantile(0.5))
	}
}

func TestBenchFlags(t *testing.T) {
	brokers := newFakeCluster(t)
	for _, args := range [][]string{
		{"produce", "--size", "-1"},
		{"e2e", "--size", "4"},
		{"produce", "--partitions", "0"},
		{"produce", "--producers", "0"},
		{"consume", "--consumers", "0"},
		{"produce", "--rate", "-5"},
		{"produce", "--duration", "-1s"},
		{"produce", "--batch-bytes", "0"},
		{"produce", "--topic-config", "novalue"},
		{"produce", "--acks", "2", "--records", "1"},
		{"produce", "--compression", "brotli", "--records", "1"},
	} {
		r := runCLI(t, "", append([]string{"bench", "--brokers", brokers}, args...)...)
		if !errors.Is(r.err, errUsage) {
			t.Errorf("weir bench %s: err %v, want a usage error", strings.Join(args, " "), r.err)
		}
	}
}

// TestBenchJSON runs each mode against kfake and checks the JSON summary adds up.
func TestBenchJSON(t *testing.T) {
	brokers := newFakeCluster(t)
	common := []string{"--brokers", brokers, "--topic", "b", "--json", "--interval", "0"}
	producing := []string{"--partitions", "3", "--size", "100"}
	decode := func(out string) benchResult {
		t.Helper()
		var res benchResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("output %q is not one JSON object: %v", out, err)
		}
		return res
	}

	prod := decode(mustRun(t, "", append([]string{"bench", "produce", "--records", "2000", "--producers", "2",
		"--compression", "lz4", "--linger", "1ms", "--topic-config", "retention.ms=60000"}, append(producing, common...)...)...))
	if prod.Mode != "produce" || prod.Records != 2000 || prod.Errors != 0 || prod.Partitions != 3 || prod.RecordBytes != 100 {
		t.Fatalf("produce summary %+v", prod)
	}
	if prod.Latency == nil || prod.Latency.Count != 2000 || prod.Latency.P50 > prod.Latency.P99 || prod.Latency.P99 > prod.Latency.Max {
		t.Fatalf("produce latency %+v", prod.Latency)
	}
	if prod.RecordsPerSec <= 0 || prod.MBPerSec != prod.RecordsPerSec*100/1e6 {
		t.Fatalf("produce rates %v records/s, %v MB/s", prod.RecordsPerSec, prod.MBPerSec)
	}

	// Consume reads to the end offsets seen at its start: everything produced above (the 2,000 counted
	// records and each producer's warm-up record), split over 2 clients.
	cons := decode(mustRun(t, "", append([]string{"bench", "consume", "--consumers", "2"}, common...)...))
	if cons.Mode != "consume" || cons.Records != 2002 || cons.RecordBytes != 100 || cons.Latency != nil ||
		cons.MBPerSec <= 0 {
		t.Fatalf("consume summary %+v", cons)
	}

	// e2e at a set rate reads exactly what it produced, starting after the records already there; its
	// warm-up record is read but not counted.
	e2e := decode(mustRun(t, "", append([]string{"bench", "e2e", "--records", "300", "--rate", "3000"}, append(producing, common...)...)...))
	if e2e.Mode != "e2e" || e2e.Records != 300 || e2e.Missing != 0 || e2e.Latency == nil || e2e.ProduceLatency == nil ||
		e2e.Latency.Count != 300 || e2e.ProduceLatency.Count != 300 {
		t.Fatalf("e2e summary %+v", e2e)
	}
}

func TestBenchTextOutput(t *testing.T) {
	brokers := newFakeCluster(t)
	out := mustRun(t, "", "bench", "produce", "--brokers", brokers, "--records", "500", "--interval", "1ms")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 {
		t.Fatalf("output %q: want a summary and a latency line", out)
	}
	// Not a terminal: no carriage returns, and the summary comes last.
	if strings.Contains(out, "\r") {
		t.Errorf("output has carriage returns outside a terminal: %q", out)
	}
	sum := lines[len(lines)-2]
	if !strings.HasPrefix(sum, "produce weir-bench (1 partitions, 1024 B records): 500 records in ") {
		t.Errorf("summary line %q", sum)
	}
	lat := lines[len(lines)-1]
	for _, want := range []string{"p50", "p90", "p99", "p99.9", "max"} {
		if !strings.Contains(lat, want+" ") {
			t.Errorf("latency line %q lacks %s", lat, want)
		}
	}
}

// TestBenchConsumeStopsAtRecords checks that consume counts exactly --records, though fetches return
// whole batches that overshoot it.
func TestBenchConsumeStopsAtRecords(t *testing.T) {
	brokers := newFakeCluster(t)
	common := []string{"--brokers", brokers, "--topic", "b", "--json", "--interval", "0"}
	mustRun(t, "", append([]string{"bench", "produce", "--records", "5000", "--partitions", "2", "--size", "10",
		"--linger", "50ms"}, common...)...)
	for _, consumers := range []string{"1", "2"} {
		var res benchResult
		// --size and --linger are accepted and ignored, for scripts that give every mode the same flags.
		out := mustRun(t, "", append([]string{"bench", "consume", "--records", "1001", "--consumers", consumers,
			"--size", "1024", "--linger", "0s"}, common...)...)
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("output %q: %v", out, err)
		}
		if res.Records != 1001 || res.RecordBytes != 10 {
			t.Errorf("consume --records 1001 --consumers %s: %d records of %d B, want 1001 of 10 B", consumers, res.Records, res.RecordBytes)
		}
	}
}
