//go:build linux

package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The benchmarks in this file decide between two ways of making a group-commit round durable
// (docs/storage.md, "Journal (design)"), on the real disk and without weir code: the raw system calls
// each design would make for the same bytes. A round carries one B-byte block for each of N partitions.
//
//   files      today's Syncer: the N blocks appended to N files, then N fdatasyncs in parallel, one
//              goroutine each as syncRound runs them.
//   jappend    a journal: the N×B bytes appended to one file in one write, then one fdatasync.
//   jfalloc    jappend into a file reserved with fallocate(FALLOC_FL_KEEP_SIZE), as vfs.File.Allocate does.
//   joverwrite the journal as a ring of blocks written (and synced) before: pwrite over them, then one
//              fdatasync; the file's size and extents never change, so the sync has no metadata to write.
//   jdsync     joverwrite with one pwrite on a file opened O_DSYNC and no fdatasync.
//
// BenchmarkJournalRound alternates the five shapes round by round (the first shape of each round rotates)
// and reports each shape's p50 and p99 round latency, its bytes/s, and the ratio of today's p50 to each
// journal's. BenchmarkJournalCheckpoint measures what the journal defers: the segment files written
// without waiting and their fdatasyncs at a checkpoint, per 64 MiB of journal.

// journalBenchSizes are the partition counts and block sizes compared.
var (
	journalBenchN = []int{4, 64, 512, 4096}
	journalBenchB = []int{1 << 10, 16 << 10}
)

// journalBenchSpan bounds the bytes a shape writes before it starts its files again (off the clock), so
// that a run does not fill the disk; it is at least two rounds.
func journalBenchSpan(round int) int64 { return max(64<<20, 2*int64(round)) }

func BenchmarkJournalRound(b *testing.B) {
	for _, n := range journalBenchN {
		for _, size := range journalBenchB {
			b.Run(fmt.Sprintf("n=%d/b=%dKiB", n, size>>10), func(b *testing.B) { benchJournalRound(b, n, size) })
		}
	}
}

// ioShape is one way of making a round durable: round runs it on the clock, reset (off the clock) starts
// its files again once span bytes have gone into them.
type ioShape struct {
	name    string
	round   func() error
	reset   func() error
	written int64
	lat     []float64 // milliseconds
}

func benchJournalRound(b *testing.B, n, size int) {
	dir := benchDir(b)
	roundBytes := n * size
	span := journalBenchSpan(roundBytes)
	block := make([]byte, size)
	for i := range block {
		block[i] = byte(i)
	}
	buf := make([]byte, roundBytes)
	for i := range n {
		copy(buf[i*size:], block)
	}
	shapes := []*ioShape{
		filesShape(b, dir, n, block),
		appendShape(b, filepath.Join(dir, "jappend"), buf, 0),
		appendShape(b, filepath.Join(dir, "jfalloc"), buf, span),
		ringShape(b, filepath.Join(dir, "joverwrite"), buf, span, 0),
		ringShape(b, filepath.Join(dir, "jdsync"), buf, span, syscall.O_DSYNC),
	}
	shapes[1].name, shapes[2].name = "jappend", "jfalloc"
	shapes[3].name, shapes[4].name = "joverwrite", "jdsync"
	rounds := 0
	for b.Loop() {
		for k := range shapes {
			s := shapes[(rounds+k)%len(shapes)]
			if s.written+int64(roundBytes) > span {
				b.StopTimer()
				if err := s.reset(); err != nil {
					b.Fatal(err)
				}
				s.written = 0
				b.StartTimer()
			}
			start := time.Now()
			if err := s.round(); err != nil {
				b.Fatal(s.name, err)
			}
			s.lat = append(s.lat, ms(time.Since(start)))
			s.written += int64(roundBytes)
		}
		rounds++
	}
	b.StopTimer()
	p50 := make(map[string]float64)
	for _, s := range shapes {
		var total float64
		for _, d := range s.lat {
			total += d
		}
		p50[s.name] = median(s.lat)
		b.ReportMetric(p50[s.name], s.name+"-p50-ms")
		b.ReportMetric(quantile(s.lat, 0.99), s.name+"-p99-ms")
		b.ReportMetric(float64(roundBytes)*float64(len(s.lat))/total/1e3, s.name+"-MB/s")
	}
	for _, s := range shapes[1:] {
		b.ReportMetric(p50["files"]/p50[s.name], "files/"+s.name)
	}
	b.ReportMetric(float64(rounds), "rounds")
}

func ms(d time.Duration) float64 { return d.Seconds() * 1e3 }

func openRaw(b *testing.B, path string, flags int) int {
	fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_CREAT|syscall.O_TRUNC|syscall.O_CLOEXEC|flags, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = syscall.Close(fd) })
	return fd
}

// writeAll writes p at the file's end (off < 0) or at off.
func writeAll(fd int, p []byte, off int64) error {
	for len(p) > 0 {
		var n int
		var err error
		if off < 0 {
			n, err = syscall.Write(fd, p)
		} else {
			n, err = syscall.Pwrite(fd, p, off)
			off += int64(n)
		}
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

func fdatasync(fd int) error {
	for {
		if err := syscall.Fdatasync(fd); err != syscall.EINTR {
			return err
		}
	}
}

// truncSync empties fd and makes that durable, so the next round starts from a settled file.
func truncSync(fd int) error {
	if err := syscall.Ftruncate(fd, 0); err != nil {
		return err
	}
	return fdatasync(fd)
}

// syncAll fdatasyncs every fd, one goroutine each, as syncRound does.
func syncAll(fds []int) error {
	errs := make([]error, len(fds))
	var wg sync.WaitGroup
	for i, fd := range fds {
		wg.Go(func() { errs[i] = fdatasync(fd) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func openFiles(b *testing.B, dir string, n int) []int {
	fds := make([]int, n)
	for i := range fds {
		fds[i] = openRaw(b, filepath.Join(dir, "p-"+strconv.Itoa(i)), syscall.O_APPEND)
	}
	return fds
}

func filesShape(b *testing.B, dir string, n int, block []byte) *ioShape {
	fds := openFiles(b, dir, n)
	return &ioShape{
		name: "files",
		round: func() error {
			for _, fd := range fds {
				if err := writeAll(fd, block, -1); err != nil {
					return err
				}
			}
			return syncAll(fds)
		},
		reset: func() error {
			for _, fd := range fds {
				if err := truncSync(fd); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// appendShape appends buf to one file and fdatasyncs it; with reserve > 0 the file's first reserve bytes
// are allocated (keeping its size) each time it starts again.
func appendShape(b *testing.B, path string, buf []byte, reserve int64) *ioShape {
	fd := openRaw(b, path, syscall.O_APPEND)
	reset := func() error {
		if err := truncSync(fd); err != nil {
			return err
		}
		if reserve > 0 {
			if err := syscall.Fallocate(fd, fallocKeepSize, 0, reserve); err != nil {
				return err
			}
			return fdatasync(fd)
		}
		return nil
	}
	if err := reset(); err != nil {
		b.Fatal(err)
	}
	return &ioShape{
		round: func() error {
			if err := writeAll(fd, buf, -1); err != nil {
				return err
			}
			return fdatasync(fd)
		},
		reset: reset,
	}
}

// fallocKeepSize is FALLOC_FL_KEEP_SIZE (linux/falloc.h).
const fallocKeepSize = 0x1

// ringShape pwrites buf over a file of span bytes written and synced before, wrapping to its start; with
// O_DSYNC in flags the pwrite is the sync.
func ringShape(b *testing.B, path string, buf []byte, span int64, flags int) *ioShape {
	fd := openRaw(b, path, flags)
	fill := make([]byte, 1<<20)
	for off := int64(0); off < span; off += int64(len(fill)) {
		if err := writeAll(fd, fill[:min(int64(len(fill)), span-off)], off); err != nil {
			b.Fatal(err)
		}
	}
	if err := fdatasync(fd); err != nil {
		b.Fatal(err)
	}
	var off int64
	return &ioShape{
		round: func() error {
			if err := writeAll(fd, buf, off); err != nil {
				return err
			}
			off += int64(len(buf))
			if flags&syscall.O_DSYNC != 0 {
				return nil
			}
			return fdatasync(fd)
		},
		reset: func() error { off = 0; return nil },
	}
}

// journalCheckpointBytes is how much journal a checkpoint covers in BenchmarkJournalCheckpoint.
const journalCheckpointBytes = 64 << 20

// BenchmarkJournalCheckpoint measures the work a journal moves out of the round. Each iteration appends
// 64 MiB of blocks round-robin to the N segment files without syncing (write-ms: what the appenders pay
// for the page cache, also paid inside the files shape's rounds), then makes them durable, alternating
// between the N fdatasyncs in parallel (fdatasync-ms) and one syncfs(2) of the filesystem (syncfs-ms).
// fdatasync-us/round spreads the checkpoint over the rounds whose blocks it made durable: the disk time to
// add to a journal round for an honest total, though no append waits for it. While the checkpoint runs,
// joverwrite rounds of N×B bytes go on back to back, as appends would (busy-p50-ms, busy-p99-ms), against
// the same rounds on an idle disk just before the iteration's writes (idle-p50-ms, idle-p99-ms).
func BenchmarkJournalCheckpoint(b *testing.B) {
	for _, n := range journalBenchN {
		for _, size := range journalBenchB {
			b.Run(fmt.Sprintf("n=%d/b=%dKiB", n, size>>10), func(b *testing.B) { benchJournalCheckpoint(b, n, size) })
		}
	}
}

// journalIdleRounds is how many journal rounds each checkpoint iteration runs on the idle disk.
const journalIdleRounds = 8

func benchJournalCheckpoint(b *testing.B, n, size int) {
	dir := benchDir(b)
	fds := openFiles(b, dir, n)
	block := make([]byte, size)
	rounds := max(1, journalCheckpointBytes/(n*size))
	ring := ringShape(b, filepath.Join(dir, "journal"), make([]byte, n*size), journalBenchSpan(n*size), 0)
	span := journalBenchSpan(n * size)
	var ringWritten int64
	journalRound := func() (float64, error) {
		if ringWritten+int64(n*size) > span {
			if err := ring.reset(); err != nil {
				return 0, err
			}
			ringWritten = 0
		}
		start := time.Now()
		err := ring.round()
		ringWritten += int64(n * size)
		return ms(time.Since(start)), err
	}
	var writes, byFdatasync, bySyncfs, idle, busy []float64 // milliseconds
	iter := 0
	for b.Loop() {
		b.StopTimer()
		for _, fd := range fds {
			if err := truncSync(fd); err != nil {
				b.Fatal(err)
			}
		}
		for range journalIdleRounds {
			d, err := journalRound()
			if err != nil {
				b.Fatal(err)
			}
			idle = append(idle, d)
		}
		b.StartTimer()
		start := time.Now()
		for range rounds {
			for _, fd := range fds {
				if err := writeAll(fd, block, -1); err != nil {
					b.Fatal(err)
				}
			}
		}
		mid := time.Now()
		stop := make(chan struct{})
		var bg sync.WaitGroup
		var bgErr error
		bg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				d, err := journalRound()
				if err != nil {
					bgErr = err
					return
				}
				busy = append(busy, d)
			}
		})
		var err error
		if iter%2 == 0 {
			err = syncAll(fds)
		} else {
			err = unix.Syncfs(fds[0])
		}
		d := ms(time.Since(mid))
		close(stop)
		bg.Wait()
		if err = errors.Join(err, bgErr); err != nil {
			b.Fatal(err)
		}
		writes = append(writes, ms(mid.Sub(start)))
		if iter%2 == 0 {
			byFdatasync = append(byFdatasync, d)
		} else {
			bySyncfs = append(bySyncfs, d)
		}
		iter++
	}
	b.StopTimer()
	b.ReportMetric(median(writes), "write-ms")
	f := median(byFdatasync)
	b.ReportMetric(f, "fdatasync-ms")
	b.ReportMetric(f*1e3/float64(rounds), "fdatasync-us/round")
	b.ReportMetric(float64(rounds*n*size)/f/1e3, "fdatasync-MB/s")
	if len(bySyncfs) > 0 {
		b.ReportMetric(median(bySyncfs), "syncfs-ms")
	}
	b.ReportMetric(median(idle), "idle-p50-ms")
	b.ReportMetric(quantile(idle, 0.99), "idle-p99-ms")
	if len(busy) > 0 {
		b.ReportMetric(median(busy), "busy-p50-ms")
		b.ReportMetric(quantile(busy, 0.99), "busy-p99-ms")
	}
	b.ReportMetric(float64(iter), "checkpoints")
}

// BenchmarkJournalPipeline runs whole rounds of each design, so that what a journal defers is paid in the
// same run as what it saves. Each iteration runs a phase of at least journalPhase (and journalPhaseRounds
// rounds) of each shape, the order rotating:
//
//	files   today's round, as in BenchmarkJournalRound.
//	pipe    the journal design: the N blocks written to N segment files without waiting, then the
//	        joverwrite round of the same N×B bytes; every journalCheckpointEvery (or 64 MiB of journal) a
//	        checkpoint, the N segment files' fdatasyncs in parallel, runs in the background while rounds go
//	        on (not syncfs, which on a shared machine would also write back everyone else's files).
//	pipe-wb pipe, and after each round a writeback goroutine starts the segment ranges the round wrote
//	        (sync_file_range(SYNC_FILE_RANGE_WRITE), dropped when 4 are already queued), to see whether a
//	        checkpoint that finds little to write stalls rounds less.
//	pipe-falloc pipe with the jfalloc round instead of joverwrite: the journal as phase 1 builds it.
//
// It reports each shape's p50 and p99 round latency and MB/s, the ratios of files to pipe and to
// pipe-falloc, and the checkpoints run. Segment files start again (off the clock) after each phase.
func BenchmarkJournalPipeline(b *testing.B) {
	for _, n := range journalBenchN {
		for _, size := range journalBenchB {
			b.Run(fmt.Sprintf("n=%d/b=%dKiB", n, size>>10), func(b *testing.B) { benchJournalPipeline(b, n, size) })
		}
	}
}

const (
	journalPhase           = 2 * time.Second
	journalPhaseRounds     = 5
	journalCheckpointEvery = time.Second
)

// journalPipe is the journal design's round for BenchmarkJournalPipeline.
type journalPipe struct {
	segs       []int
	block      []byte
	roundBytes int64
	segOff     int64
	writeBack  chan int64 // the segment offset of a round's blocks, for the writeback goroutine
	// the checkpoint: sinceBytes and since are what the journal took since the last one started
	sinceBytes  int64
	since       time.Time
	ckpt        chan error // receives the running checkpoint's result
	checkpoints int
}

// startAgainIfFull starts s's files again if a round of roundBytes more would pass span.
func (s *ioShape) startAgainIfFull(roundBytes, span int64) error {
	if s.written+roundBytes <= span {
		return nil
	}
	s.written = 0
	return s.reset()
}

// round writes the round's blocks to the segment files, then runs the journal's round j.
func (p *journalPipe) round(j *ioShape, wb bool) error {
	for _, fd := range p.segs {
		if err := writeAll(fd, p.block, -1); err != nil {
			return err
		}
	}
	if err := j.round(); err != nil {
		return err
	}
	j.written += p.roundBytes
	if wb {
		select {
		case p.writeBack <- p.segOff:
		default:
		}
	}
	p.segOff += int64(len(p.block))
	p.sinceBytes += p.roundBytes
	if p.ckpt == nil && (p.sinceBytes >= journalCheckpointBytes || time.Since(p.since) >= journalCheckpointEvery) {
		p.ckpt = make(chan error, 1)
		p.sinceBytes, p.since = 0, time.Now()
		p.checkpoints++
		go func(done chan<- error) { done <- syncAll(p.segs) }(p.ckpt)
	}
	if p.ckpt != nil {
		select {
		case err := <-p.ckpt:
			p.ckpt = nil
			return err
		default:
		}
	}
	return nil
}

// settle waits for the running checkpoint and starts the segment files again.
func (p *journalPipe) settle() error {
	if p.ckpt != nil {
		if err := <-p.ckpt; err != nil {
			return err
		}
		p.ckpt = nil
	}
	for _, fd := range p.segs {
		if err := truncSync(fd); err != nil {
			return err
		}
	}
	p.segOff, p.sinceBytes, p.since = 0, 0, time.Now()
	return nil
}

func (p *journalPipe) writeBackLoop(size int64) {
	for off := range p.writeBack {
		for _, fd := range p.segs {
			_ = unix.SyncFileRange(fd, off, size, unix.SYNC_FILE_RANGE_WRITE) // a hint; the checkpoint reports errors
		}
	}
}

func benchJournalPipeline(b *testing.B, n, size int) {
	dir := benchDir(b)
	roundBytes := n * size
	block := make([]byte, size)
	for i := range block {
		block[i] = byte(i)
	}
	mkdir := func(name string) string {
		d := filepath.Join(dir, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			b.Fatal(err)
		}
		return d
	}
	files := filesShape(b, mkdir("files"), n, block)
	span := journalBenchSpan(roundBytes)
	p := &journalPipe{
		segs: openFiles(b, mkdir("segments"), n), block: block, roundBytes: int64(roundBytes),
		writeBack: make(chan int64, 4), since: time.Now(),
	}
	ring := ringShape(b, filepath.Join(dir, "journal"), make([]byte, roundBytes), span, 0)
	falloc := appendShape(b, filepath.Join(dir, "jfalloc"), make([]byte, roundBytes), span)
	go p.writeBackLoop(int64(size))
	defer close(p.writeBack)
	// A shape's before runs ahead of each round off the round's clock (starting full files again), its after
	// at the end of each phase, off the benchmark's clock.
	type shape struct {
		name   string
		before func() error
		round  func() error
		after  func() error
		lat    []float64 // milliseconds
		bytes  float64
		total  float64
	}
	shapes := []*shape{
		{
			name:   "files",
			before: func() error { return files.startAgainIfFull(int64(roundBytes), span) },
			round: func() error {
				files.written += int64(roundBytes)
				return files.round()
			},
			after: func() error { return nil },
		},
		{
			name:   "pipe",
			before: func() error { return ring.startAgainIfFull(int64(roundBytes), span) },
			round:  func() error { return p.round(ring, false) },
			after:  p.settle,
		},
		{
			name:   "pipe-wb",
			before: func() error { return ring.startAgainIfFull(int64(roundBytes), span) },
			round:  func() error { return p.round(ring, true) },
			after:  p.settle,
		},
		{
			name:   "pipe-falloc",
			before: func() error { return falloc.startAgainIfFull(int64(roundBytes), span) },
			round:  func() error { return p.round(falloc, false) },
			after:  p.settle,
		},
	}
	iter := 0
	for b.Loop() {
		for k := range shapes {
			s := shapes[(iter+k)%len(shapes)]
			start := time.Now()
			for rounds := 0; rounds < journalPhaseRounds || time.Since(start) < journalPhase; rounds++ {
				if err := s.before(); err != nil {
					b.Fatal(s.name, err)
				}
				t := time.Now()
				if err := s.round(); err != nil {
					b.Fatal(s.name, err)
				}
				d := ms(time.Since(t))
				s.lat = append(s.lat, d)
				s.total += d
				s.bytes += float64(roundBytes)
			}
			b.StopTimer()
			if err := s.after(); err != nil {
				b.Fatal(s.name, err)
			}
			b.StartTimer()
		}
		iter++
	}
	b.StopTimer()
	for _, s := range shapes {
		b.ReportMetric(median(s.lat), s.name+"-p50-ms")
		b.ReportMetric(quantile(s.lat, 0.99), s.name+"-p99-ms")
		b.ReportMetric(s.bytes/s.total/1e3, s.name+"-MB/s")
	}
	for _, s := range []*shape{shapes[1], shapes[3]} {
		b.ReportMetric(median(shapes[0].lat)/median(s.lat), "files/"+s.name+"-p50")
		b.ReportMetric(quantile(shapes[0].lat, 0.99)/quantile(s.lat, 0.99), "files/"+s.name+"-p99")
	}
	b.ReportMetric(float64(p.checkpoints), "checkpoints")
}
