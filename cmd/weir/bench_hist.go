package main

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// A log-linear latency histogram in the manner of HDR histograms: values below 2·histSub nanoseconds
// have a bucket each, and every further power of two is split into histSub equal buckets, so a bucket
// is at most 1/histSub (about 3%) of its value wide. Values from 0 to 2^histMaxBits ns (about 18
// minutes) are kept; larger ones share one overflow bucket, while max stays exact.
const (
	histSubBits  = 5
	histSub      = 1 << histSubBits
	histMaxBits  = 40
	histOverflow = (histMaxBits - histSubBits + 1) * histSub
	histBuckets  = histOverflow + 1
)

// histIndex returns the bucket of v nanoseconds.
func histIndex(v uint64) int {
	if v < 2*histSub {
		return int(v)
	}
	if v >= 1<<histMaxBits {
		return histOverflow
	}
	shift := bits.Len64(v) - histSubBits - 1
	return shift*histSub + int(v>>shift)
}

// histLow and histHigh bound bucket i: it holds the values low..high, inclusive.
func histLow(i int) uint64 {
	switch {
	case i < 2*histSub:
		return uint64(i)
	case i == histOverflow:
		return 1 << histMaxBits
	}
	shift := i/histSub - 1
	return uint64(i-shift*histSub) << shift
}

func histHigh(i int) uint64 {
	switch {
	case i < 2*histSub:
		return uint64(i)
	case i == histOverflow:
		return math.MaxUint64
	}
	shift := i/histSub - 1
	return histLow(i) + 1<<shift - 1
}

// latencyHist counts durations; Record is safe to call from many goroutines at once.
type latencyHist struct {
	counts [histBuckets]atomic.Uint64
	max    atomic.Uint64
}

// Record adds one duration; negative durations (clock steps) count as zero.
func (h *latencyHist) Record(d time.Duration) {
	v := uint64(max(d, 0))
	h.counts[histIndex(v)].Add(1)
	for {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			return
		}
	}
}

// Snapshot copies the counts; the copy is not affected by later Records.
func (h *latencyHist) Snapshot() *histSnapshot {
	s := &histSnapshot{max: h.max.Load()}
	for i := range h.counts {
		s.counts[i] = h.counts[i].Load()
		s.n += s.counts[i]
	}
	return s
}

// histSnapshot is a point-in-time copy of a latencyHist.
type histSnapshot struct {
	counts [histBuckets]uint64
	n      uint64
	max    uint64
}

// Since returns the values recorded between prev and s (prev taken earlier from the same histogram).
// Its max is the upper bound of the highest bucket that grew, capped at s's max.
func (s *histSnapshot) Since(prev *histSnapshot) *histSnapshot {
	d := &histSnapshot{}
	for i := range s.counts {
		d.counts[i] = s.counts[i] - prev.counts[i]
		d.n += d.counts[i]
		if d.counts[i] > 0 {
			d.max = min(histHigh(i), s.max)
		}
	}
	return d
}

// Count is the number of recorded values.
func (s *histSnapshot) Count() uint64 { return s.n }

// Quantile returns the value at or below which a fraction q of the values lie: the middle of the
// bucket holding that rank, never above the largest value recorded. It is 0 when nothing was recorded.
func (s *histSnapshot) Quantile(q float64) time.Duration {
	if s.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(s.n)))
	rank = min(max(rank, 1), s.n)
	var seen uint64
	for i, c := range s.counts {
		seen += c
		if seen >= rank {
			mid := histLow(i) + (histHigh(i)-histLow(i))/2
			return time.Duration(min(mid, s.max))
		}
	}
	return time.Duration(s.max)
}

// Max is the largest value recorded (exact for a histogram's own snapshot).
func (s *histSnapshot) Max() time.Duration { return time.Duration(s.max) }

// Mean is the average, using each bucket's middle.
func (s *histSnapshot) Mean() time.Duration {
	if s.n == 0 {
		return 0
	}
	var sum float64
	for i, c := range s.counts {
		if c > 0 {
			sum += float64(c) * float64(histLow(i)+(histHigh(i)-histLow(i))/2)
		}
	}
	return time.Duration(sum / float64(s.n))
}
