package storage

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
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
	// No roll inside the timed loop: under never and interval a roll syncs the closed segment, which would
	// put a 1 GiB fdatasync into a figure compared with dd's buffered write.
	cfg.SegmentBytes = math.MaxInt32
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
		written := 0
		for b.Loop() {
			appendOne(b, logs[0], buf)
			if written += len(buf); written >= benchFileBytes {
				b.StopTimer()
				logs[0] = replaceLog(b, logs[0], cfg, syncer)
				written = 0
				b.StartTimer()
			}
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

// BenchmarkRawWrite is BenchmarkAppend/never without weir: the same batches written to a plain file, a fresh
// one every benchFileBytes.
func BenchmarkRawWrite(b *testing.B) {
	path := filepath.Join(benchDir(b), "raw")
	create := func() vfs.File {
		f, err := vfs.OS.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		return f
	}
	f := create()
	block := benchBatch()
	b.SetBytes(int64(len(block)))
	written := 0
	for b.Loop() {
		if _, err := f.Write(block); err != nil {
			b.Fatal(err)
		}
		if written += len(block); written >= benchFileBytes {
			b.StopTimer()
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
			f = create()
			written = 0
			b.StartTimer()
		}
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRawFdatasync is the disk's own ceiling for BenchmarkAppend's durable shapes, without weir: each
// of n goroutines appends a 16 KiB block to its own file and fdatasyncs it, in lockstep rounds (a round
// ends when every file is synced, as a group-commit round does). One file is the oflag=dsync pattern;
// eight files are what always-8logs asks of the disk.
func BenchmarkRawFdatasync(b *testing.B) {
	for _, n := range []int{1, 8} {
		b.Run(strconv.Itoa(n)+"files", func(b *testing.B) {
			dir := benchDir(b)
			files := make([]vfs.File, n)
			for i := range files {
				f, err := vfs.OS.Create(filepath.Join(dir, "raw-"+strconv.Itoa(i)))
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				files[i] = f
			}
			block := benchBatch()
			b.SetBytes(int64(n * len(block)))
			errs := make([]error, n)
			for b.Loop() {
				var wg sync.WaitGroup
				for i, f := range files {
					wg.Go(func() {
						if _, err := f.Write(block); err != nil {
							errs[i] = err
							return
						}
						errs[i] = f.Sync()
					})
				}
				wg.Wait()
				if err := errors.Join(errs...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchFileBytes is what a single appender writes to one log before the benchmark replaces it with a fresh
// one: dd's 1 GiB file. Buffered writes fit in the page cache's dirty limit at this size; gigabytes more
// would measure the disk's writeback instead, which dd's buffered figure does not.
const benchFileBytes = 1 << 30

// replaceLog closes and deletes l and opens an empty log in its place.
func replaceLog(b *testing.B, l *Log, cfg Config, syncer *Syncer) *Log {
	dir := l.Dir()
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		b.Fatal(err)
	}
	nl, err := Open(dir, cfg, Options{Syncer: syncer})
	if err != nil {
		b.Fatal(err)
	}
	return nl
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

// BenchmarkRead reads a 256 MiB log sequentially in 1 MiB fetches, from the page cache (log), next to plain
// 1 MiB preads of the same segment file (pread): a log written in 16 KiB appends sits in the page cache
// differently from dd's file written in 1 MiB blocks, so the second is the raw read of the same bytes.
func BenchmarkRead(b *testing.B) {
	dir := benchDir(b)
	cfg := DefaultConfig()
	cfg.Flush = FlushNever
	l, err := Open(filepath.Join(dir, "read-0"), cfg, Options{})
	if err != nil {
		b.Fatal(err)
	}
	data := benchBatch()
	for range (256 << 20) / len(data) {
		if _, err := l.Append(data, 0); err != nil {
			b.Fatal(err)
		}
	}
	// Close syncs the log: the reads then meet clean cached pages, as dd's read of its synced file does,
	// not pages the kernel is still writing back.
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	if l, err = Open(filepath.Join(dir, "read-0"), cfg, Options{}); err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	buf := make([]byte, 1<<20+len(data))
	b.Run("log", func(b *testing.B) {
		end := l.EndOffset()
		off := int64(0)
		var total int64
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
	})
	b.Run("pread", func(b *testing.B) {
		f, err := vfs.OS.Open(filepath.Join(dir, "read-0", segmentName(0)+logSuffix))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		size, err := f.Size()
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(1 << 20)
		off := int64(0)
		for b.Loop() {
			if _, err := f.ReadAt(buf[:1<<20], off); err != nil {
				b.Fatal(err)
			}
			if off += 1 << 20; off+1<<20 > size {
				off = 0
			}
		}
	})
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
