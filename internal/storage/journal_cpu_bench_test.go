//go:build linux

package storage

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/weir-mq/weir/internal/record/recordtest"
	"github.com/weir-mq/weir/internal/vfs"
)

// BenchmarkJournalCPUPerRecord measures the CPU (user + system, of the whole process, from getrusage)
// that appending 1 KiB records costs, per record, on the real disk under b.TempDir(): N logs on one
// data directory, 8 appenders each appending to 8 consecutive logs under a Hold and waiting for the 8,
// as a produce request for 8 partitions does. Three shapes alternate, phase by phase (the first one
// rotating): `journal` (weir.flush.policy=always on OpenSyncer's journal: one fdatasync per round),
// `files` (always on a Syncer without a journal: one fdatasync per log per round, the design before
// the journal) and `never`. It reports each shape's median over the phases and the medians of the
// per-round ratios journal/never and files/never.
func BenchmarkJournalCPUPerRecord(b *testing.B) {
	for _, n := range []int{4, 512} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) { benchJournalCPU(b, n) })
	}
}

const (
	cpuBenchRecords   = 16000 // records per phase
	cpuBenchRounds    = 5
	cpuBenchAppenders = 8
	cpuBenchFanout    = 8 // logs per appender step
)

func benchJournalCPU(b *testing.B, n int) {
	shapes := []string{"journal", "files", "never"}
	perShape := map[string][]float64{}
	var jRatio, fRatio []float64
	for range b.N {
		for round := range cpuBenchRounds {
			got := map[string]float64{}
			for k := range shapes {
				shape := shapes[(round+k)%len(shapes)]
				us, err := cpuBenchPhase(b.TempDir(), shape, n)
				if err != nil {
					b.Fatal(err)
				}
				got[shape] = us
				perShape[shape] = append(perShape[shape], us)
			}
			jRatio = append(jRatio, got["journal"]/got["never"])
			fRatio = append(fRatio, got["files"]/got["never"])
		}
	}
	for _, s := range shapes {
		b.ReportMetric(median(perShape[s]), s+"-cpu-us/record")
	}
	b.ReportMetric(median(jRatio), "journal/never")
	b.ReportMetric(median(fRatio), "files/never")
}

// cpuBenchPhase appends cpuBenchRecords records to n fresh logs in dir under shape and returns the
// process's CPU microseconds per record.
func cpuBenchPhase(dir, shape string, n int) (float64, error) {
	var s *Syncer
	var err error
	if shape == "journal" {
		if s, err = OpenSyncer(vfs.OS, dir, quietLogFn); err != nil {
			return 0, err
		}
	} else {
		s = NewSyncer()
	}
	defer s.Close()
	cfg := DefaultConfig()
	if shape == "never" {
		cfg.Flush = FlushNever
	}
	logs := make([]*Log, n)
	for i := range logs {
		if logs[i], err = Open(filepath.Join(dir, fmt.Sprintf("t-%d", i)), cfg, Options{Syncer: s, Logger: quietLogFn}); err != nil {
			return 0, err
		}
	}
	defer func() {
		for _, l := range logs {
			_ = l.Close()
		}
	}()
	value := recordtest.Spec{Records: 1, ValueBytes: 1024}
	steps := cpuBenchRecords / cpuBenchAppenders / cpuBenchFanout
	before := cpuTime()
	var wg sync.WaitGroup
	errs := make([]error, cpuBenchAppenders)
	for a := range cpuBenchAppenders {
		wg.Go(func() {
			next := a * cpuBenchFanout
			ends := make([]int64, cpuBenchFanout)
			for range steps {
				release := s.Hold()
				for k := range cpuBenchFanout {
					res, err := logs[(next+k)%n].Append(recordtest.Batch(value), 0)
					if err != nil {
						release()
						errs[a] = err
						return
					}
					ends[k] = res.LastOffset + 1
				}
				release()
				for k := range cpuBenchFanout {
					if err := logs[(next+k)%n].WaitDurable(context.Background(), ends[k]); err != nil {
						errs[a] = err
						return
					}
				}
				next += cpuBenchAppenders * cpuBenchFanout
			}
		})
	}
	wg.Wait()
	used := cpuTime() - before
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return used / float64(steps*cpuBenchAppenders*cpuBenchFanout), nil
}

// cpuTime is the process's user and system CPU time so far, in microseconds.
func cpuTime() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru) // RUSAGE_SELF of a running process cannot fail
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e3
}
