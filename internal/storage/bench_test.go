package storage

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/record/recordtest"
	"github.com/weir-mq/weir/internal/vfs"
)

// benchDir is where benchmarks put their logs: $WEIR_BENCH_DIR (to measure a chosen disk) or a temp dir.
func benchDir(b *testing.B) string {
	if d := os.Getenv("WEIR_BENCH_DIR"); d != "" {
		dir, err := os.MkdirTemp(d, "weir-bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = os.RemoveAll(dir) })
		return dir
	}
	return b.TempDir()
}

// benchBatch is 16 records of 1 KiB: a 16 KiB batch.
func benchBatch() []byte {
	return recordtest.Batch(recordtest.Spec{Records: 16, ValueBytes: 1024, Timestamp: 1})
}

func BenchmarkAppend(b *testing.B) {
	for _, policy := range []FlushPolicy{FlushNever, FlushInterval, FlushAlways} {
		b.Run(policy.String(), func(b *testing.B) {
			benchAppend(b, policy, 1, 1)
		})
	}
	b.Run("always-8logs", func(b *testing.B) {
		benchAppend(b, FlushAlways, 8, 1)
	})
	b.Run("always-8logs-inflight5", func(b *testing.B) {
		benchAppend(b, FlushAlways, 8, 5)
	})
}

// benchAppend runs appenders on nLogs logs; each keeps up to inflight appends waiting for durability, as a
// producer with max.in.flight.requests.per.connection does.
func benchAppend(b *testing.B, policy FlushPolicy, nLogs, inflight int) {
	dir := benchDir(b)
	cfg := DefaultConfig()
	cfg.Flush = policy
	cfg.FlushInterval = 50 * time.Millisecond
	syncer := NewSyncer()
	defer syncer.Close()
	logs := make([]*Log, nLogs)
	for i := range logs {
		l, err := Open(filepath.Join(dir, "bench-"+strconv.Itoa(i)), cfg, Options{Syncer: syncer})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		logs[i] = l
	}
	data := benchBatch()
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	if nLogs == 1 {
		buf := append([]byte(nil), data...)
		for b.Loop() {
			appendOne(b, logs[0], buf)
		}
	} else {
		var next atomic.Int64
		b.SetParallelism((nLogs + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
		b.RunParallel(func(pb *testing.PB) {
			l := logs[int(next.Add(1)-1)%nLogs]
			buf := append([]byte(nil), data...)
			var pending []int64
			for pb.Next() {
				res, err := l.Append(buf, 0)
				if err != nil {
					b.Fatal(err)
				}
				pending = append(pending, res.LastOffset+1)
				if len(pending) == inflight {
					if err := l.WaitDurable(context.Background(), pending[0]); err != nil {
						b.Fatal(err)
					}
					pending = pending[1:]
				}
			}
			for _, end := range pending {
				if err := l.WaitDurable(context.Background(), end); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.StopTimer()
	for _, l := range logs {
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

func appendOne(b *testing.B, l *Log, buf []byte) {
	res, err := l.Append(buf, 0)
	if err != nil {
		b.Fatal(err)
	}
	if err := l.WaitDurable(context.Background(), res.LastOffset+1); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRead reads a 256 MiB log sequentially in 1 MiB fetches.
func BenchmarkRead(b *testing.B) {
	dir := benchDir(b)
	cfg := DefaultConfig()
	cfg.Flush = FlushNever
	l, err := Open(filepath.Join(dir, "read-0"), cfg, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	data := benchBatch()
	for range (256 << 20) / len(data) {
		if _, err := l.Append(data, 0); err != nil {
			b.Fatal(err)
		}
	}
	end := l.EndOffset()
	off := int64(0)
	var total int64
	buf := make([]byte, 1<<20+len(data))
	b.ResetTimer()
	for b.Loop() {
		got, err := l.ReadInto(buf, off, 1<<20, end)
		if err != nil {
			b.Fatal(err)
		}
		total += int64(len(got))
		off += int64(len(got)/len(data)) * 16
		if off >= end {
			off = 0
		}
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds()/1e6, "MB/s")
}

// BenchmarkOpen2GiB writes a 2 GiB log once, then measures Open after a clean shutdown and after a crash
// (clean-shutdown marker removed), with and without a recovery point checkpoint. Set WEIR_BENCH_OPEN=1.
func BenchmarkOpen2GiB(b *testing.B) {
	if os.Getenv("WEIR_BENCH_OPEN") == "" {
		b.Skip("set WEIR_BENCH_OPEN=1 to write a 2 GiB log")
	}
	dir := filepath.Join(benchDir(b), "open-0")
	cfg := DefaultConfig()
	cfg.Flush = FlushNever
	l, err := Open(dir, cfg, Options{})
	if err != nil {
		b.Fatal(err)
	}
	big := recordtest.Batch(recordtest.Spec{Records: 60, ValueBytes: 16 << 10, Timestamp: 1})
	for range (2 << 30) / len(big) {
		if _, err := l.Append(big, 0); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	run := func(name string, prepare func()) {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				prepare()
				runtime.GC()
				b.StartTimer()
				l, err := Open(dir, cfg, Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := l.Maintain(); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(rssBytes())/(1<<20), "RSS-MiB")
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
	removeCheckpoint := func(name string) func() {
		return func() { _ = vfs.OS.Remove(filepath.Join(dir, name)) }
	}
	run("clean", func() {})
	run("crash-after-recovery-point", removeCheckpoint(cleanShutdownName))
	run("crash-no-recovery-point", func() {
		removeCheckpoint(cleanShutdownName)()
		removeCheckpoint(recoveryCheckpointName)()
	})
}

// rssBytes reads the process's resident set size from /proc (0 where unavailable).
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
