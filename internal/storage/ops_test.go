package storage

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/record/recordtest"
)

func TestLogEpochCacheEndOffsetFor(t *testing.T) {
	l := openLog(t, newMem(t), "/data/e-0", testConfig(), newClock())
	defer l.Close()
	for _, e := range []int32{1, 1, 3, 3, 5} {
		if _, err := l.Append(batch(2, 10, 1), e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Append(batch(1, 1, 1), 4); !errors.Is(err, ErrStaleLeaderEpoch) {
		t.Fatalf("stale epoch: %v", err)
	}
	tests := []struct {
		epoch     int32
		wantEpoch int32
		wantEnd   int64
	}{
		{0, 0, 0}, {1, 1, 4}, {2, 1, 4}, {3, 3, 8}, {4, 3, 8}, {5, 5, 10}, {6, -1, -1}, {-1, -1, -1},
	}
	for _, tt := range tests {
		if e, end := l.EndOffsetForEpoch(tt.epoch); e != tt.wantEpoch || end != tt.wantEnd {
			t.Errorf("EndOffsetForEpoch(%d) = %d, %d; want %d, %d", tt.epoch, e, end, tt.wantEpoch, tt.wantEnd)
		}
	}
	if err := l.Truncate(5); err != nil {
		t.Fatal(err)
	}
	if l.EndOffset() != 4 || l.LatestEpoch() != 1 {
		t.Fatalf("after Truncate(5): end %d latest epoch %d", l.EndOffset(), l.LatestEpoch())
	}
}

func TestLogAppendAsFollowerKeepsOffsetsAndEpochs(t *testing.T) {
	l := openLog(t, newMem(t), "/data/f-1", testConfig(), newClock())
	defer l.Close()
	data := recordtest.Batches(
		recordtest.Spec{BaseOffset: 0, Records: 2, LeaderEpoch: 2},
		recordtest.Spec{BaseOffset: 5, Records: 1, LeaderEpoch: 4},
	)
	res, err := l.AppendAsFollower(data)
	if err != nil {
		t.Fatal(err)
	}
	if res.FirstOffset != 0 || res.LastOffset != 5 || l.EndOffset() != 6 || l.LatestEpoch() != 4 {
		t.Fatalf("res %+v end %d epoch %d", res, l.EndOffset(), l.LatestEpoch())
	}
	if e, end := l.EndOffsetForEpoch(2); e != 2 || end != 5 {
		t.Fatalf("EndOffsetForEpoch(2) = %d, %d", e, end)
	}
	if _, err := l.AppendAsFollower(recordtest.Batch(recordtest.Spec{BaseOffset: 3, LeaderEpoch: 4})); !errors.Is(err, ErrOffsetNotMonotonic) {
		t.Fatalf("offset below end: %v", err)
	}
	b, err := l.Read(3, 1000, 100)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := record.ParseHeader(b); h.BaseOffset != 5 {
		t.Fatalf("Read(3) in a gap returned base %d", h.BaseOffset)
	}
}

func TestLogAppendRejects(t *testing.T) {
	cfg := testConfig()
	cfg.MaxBatchBytes = 500
	l := openLog(t, newMem(t), "/data/x-0", cfg, newClock())
	defer l.Close()
	if _, err := l.Append(batch(1, 600, 1), 0); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("large batch: %v", err)
	}
	bad := batch(1, 10, 1)
	bad[len(bad)-1] ^= 1
	if _, err := l.Append(bad, 0); !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("bad crc: %v", err)
	}
	if l.EndOffset() != 0 {
		t.Fatalf("rejected appends moved the end to %d", l.EndOffset())
	}
}

func TestLogReadLimits(t *testing.T) {
	l := openLog(t, newMem(t), "/data/r-1", testConfig(), newClock())
	defer l.Close()
	for range 5 {
		if _, err := l.Append(batch(4, 100, 1), 0); err != nil {
			t.Fatal(err)
		}
	}
	one := len(batch(4, 100, 1))
	b, err := l.Read(6, 1, 1<<62)
	if err != nil || len(b) != one {
		t.Fatalf("Read with maxBytes 1: %d bytes, %v", len(b), err)
	}
	if h, _ := record.ParseHeader(b); h.BaseOffset != 4 {
		t.Fatalf("Read(6) started at %d", h.BaseOffset)
	}
	if b, _ := l.Read(0, 10*one, 8); len(b) != 2*one {
		t.Fatalf("Read below maxOffset 8: %d bytes", len(b))
	}
	if b, _ := l.Read(0, 10*one, 3); len(b) != 0 {
		t.Fatalf("Read with the first batch reaching maxOffset: %d bytes", len(b))
	}
	if b, err := l.Read(20, 100, 1<<62); err != nil || len(b) != 0 {
		t.Fatalf("Read at end: %d bytes, %v", len(b), err)
	}
	if _, err := l.Read(21, 100, 1<<62); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Read past end: %v", err)
	}
}

func TestLogOffsetForTimeAndRetention(t *testing.T) {
	clk := newClock()
	cfg := testConfig()
	cfg.RetentionAge = time.Hour
	l := openLog(t, newMem(t), "/data/ret-0", cfg, clk)
	defer l.Close()
	now := clk.now.UnixMilli()
	for i := range 40 {
		if _, err := l.Append(batch(2, 200, now-int64(40-i)*int64(time.Minute/time.Millisecond)*3), 0); err != nil {
			t.Fatal(err)
		}
	}
	if len(l.Segments()) < 4 {
		t.Fatalf("want several segments, got %d", len(l.Segments()))
	}
	target := now - 30*3*int64(time.Minute/time.Millisecond)
	off, ok, err := l.OffsetForTime(target)
	if err != nil || !ok || off != 20 {
		t.Fatalf("OffsetForTime = %d, %v, %v; want 20", off, ok, err)
	}
	if _, ok, _ := l.OffsetForTime(now + 1); ok {
		t.Fatal("OffsetForTime after the newest batch found one")
	}
	if err := l.Maintain(); err != nil {
		t.Fatal(err)
	}
	start := l.StartOffset()
	if start == 0 {
		t.Fatal("retention by time deleted nothing")
	}
	if b, err := l.Read(start, 100, 1<<62); err != nil || len(b) == 0 {
		t.Fatalf("Read at new start: %v", err)
	}
	if h, _ := record.ParseHeader(mustRead(t, l, start)); h.MaxTimestamp < now-int64(time.Hour/time.Millisecond)-int64(30*time.Minute/time.Millisecond) {
		t.Fatalf("kept a segment far older than retention: %d", h.MaxTimestamp)
	}
	if err := l.AdvanceStart(start + 3); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(start, 100, 1<<62); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Read below advanced start: %v", err)
	}
	cfg.RetentionBytes = 1
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if err := l.Maintain(); err != nil {
		t.Fatal(err)
	}
	if n := len(l.Segments()); n != 1 {
		t.Fatalf("retention by size left %d segments", n)
	}
}

func mustRead(t *testing.T, l *Log, off int64) []byte {
	t.Helper()
	b, err := l.Read(off, 1, 1<<62)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLogReplaceSegment(t *testing.T) {
	mem := newMem(t)
	l := openLog(t, mem, "/data/c-0", testConfig(), newClock())
	for range 30 {
		if _, err := l.Append(batch(2, 200, 5), 0); err != nil {
			t.Fatal(err)
		}
	}
	segs := l.Segments()
	first := segs[0]
	kept := mustRead(t, l, first.NextOffset-2)
	if err := l.ReplaceSegment(first.BaseOffset, kept); err != nil {
		t.Fatalf("ReplaceSegment: %v", err)
	}
	b, err := l.Read(0, 1<<20, 1<<62)
	if err != nil || len(b) != len(kept) {
		t.Fatalf("Read after replace: %d bytes, %v", len(b), err)
	}
	if err := l.ReplaceSegment(segs[len(segs)-1].BaseOffset, nil); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("replacing the active segment: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, mem, "/data/c-0", testConfig(), newClock())
	defer l.Close()
	if b := mustRead(t, l, 0); len(b) != len(kept) {
		t.Fatalf("after reopen: %d bytes", len(b))
	}
	if err := l.WaitDurable(context.Background(), l.EndOffset()); err != nil {
		t.Fatal(err)
	}
}
