package storage

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/record/recordtest"
)

// rollBench* shape BenchmarkAppendRollLatency: 1 KiB batches, a roll every ~240 of them in the rolling
// rounds, and rounds long enough for a dozen rolls each.
const (
	rollBenchSegmentBytes = 256 << 10
	rollBenchRound        = 3 * time.Second
	rollBenchPairs        = 7
	rollBenchMaxRun       = time.Second
)

// BenchmarkAppendRollLatency measures what a segment roll costs the appends around it under FlushAlways on the
// real disk: first the log's maximum durable rate (one appender that waits for each batch), then rounds at half
// that rate, paced, each append's latency taken from its scheduled time to its durability, alternating a small
// segment (a roll every ~240 batches) with one that never rolls. It reports the medians over the rounds of
// each kind's p50, p99 and p99.9, and the median over the pairs of rounds of p99(roll)/p99(no roll), each
// pair run back to back so that both see the same noise of a shared machine. Run it alone, once:
//
//	go test ./internal/storage/ -run XXX -bench AppendRollLatency -benchtime 1x
func BenchmarkAppendRollLatency(b *testing.B) {
	data := recordtest.Batch(recordtest.Spec{Records: 1, ValueBytes: 1000, Timestamp: 1})
	dir := benchDir(b)
	syncer := NewSyncer()
	defer syncer.Close()
	for b.Loop() {
		rate := maxDurableRate(b, filepath.Join(dir, "max"), syncer, data)
		var p50, p99, p999 [2][]float64
		for i := range 2 * rollBenchPairs {
			roll := i % 2
			segBytes := int64(math.MaxInt32)
			if roll == 1 {
				segBytes = rollBenchSegmentBytes
			}
			lat := pacedRound(b, filepath.Join(dir, "round-"+strconv.Itoa(i)), syncer, data, segBytes, rate/2)
			p50[roll] = append(p50[roll], quantile(lat, 0.50))
			p99[roll] = append(p99[roll], quantile(lat, 0.99))
			p999[roll] = append(p999[roll], quantile(lat, 0.999))
		}
		b.ReportMetric(rate, "max-batches/s")
		b.ReportMetric(median(p50[0]), "p50-noroll-ms")
		b.ReportMetric(median(p99[0]), "p99-noroll-ms")
		b.ReportMetric(median(p50[1]), "p50-roll-ms")
		b.ReportMetric(median(p99[1]), "p99-roll-ms")
		b.ReportMetric(median(p999[0]), "p99.9-noroll-ms")
		b.ReportMetric(median(p999[1]), "p99.9-roll-ms")
		ratios := make([]float64, rollBenchPairs)
		for i := range ratios {
			ratios[i] = p99[1][i] / p99[0][i]
		}
		b.ReportMetric(median(ratios), "p99-ratio")
	}
}

func rollBenchLog(b *testing.B, dir string, syncer *Syncer, segBytes int64) *Log {
	cfg := DefaultConfig()
	cfg.SegmentBytes = segBytes
	l, err := Open(dir, cfg, Options{Syncer: syncer})
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// maxDurableRate is how many batches a second one appender gets durable when it waits for each one, on a log
// that does not roll.
func maxDurableRate(b *testing.B, dir string, syncer *Syncer, data []byte) float64 {
	l := rollBenchLog(b, dir, syncer, math.MaxInt32)
	defer l.Close()
	buf := slices.Clone(data)
	n := 0
	start := time.Now()
	for time.Since(start) < rollBenchMaxRun {
		appendOne(b, l, buf)
		n++
	}
	return float64(n) / time.Since(start).Seconds()
}

// pacedRound appends at rate batches a second for rollBenchRound and returns each append's latency in ms,
// from the time it was due (so that an append held up by the one before it counts its wait) to the time its
// batch was durable. A second goroutine waits for durability, in order, so the appender keeps its pace.
func pacedRound(b *testing.B, dir string, syncer *Syncer, data []byte, segBytes int64, rate float64) []float64 {
	l := rollBenchLog(b, dir, syncer, segBytes)
	defer l.Close()
	type pending struct {
		due time.Time
		end int64
	}
	n := int(rate * rollBenchRound.Seconds())
	interval := time.Duration(float64(time.Second) / rate)
	appended := make(chan pending, n)
	lat := make([]float64, 0, n)
	waited := make(chan error, 1)
	go func() {
		for p := range appended {
			if err := l.WaitDurable(context.Background(), p.end); err != nil {
				waited <- err
				return
			}
			lat = append(lat, float64(time.Since(p.due))/float64(time.Millisecond))
		}
		waited <- nil
	}()
	buf := slices.Clone(data)
	start := time.Now()
	for i := range n {
		due := start.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(due))
		res, err := l.Append(buf, 0)
		if err != nil {
			b.Fatal(err)
		}
		appended <- pending{due: due, end: res.LastOffset + 1}
	}
	close(appended)
	if err := <-waited; err != nil {
		b.Fatal(err)
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	return lat
}

func quantile(v []float64, q float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(int(q*float64(len(s))), len(s)-1)]
}

func median(v []float64) float64 { return quantile(v, 0.5) }
