package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// benchResult is the summary of one run, and the --json object.
type benchResult struct {
	Mode          string  `json:"mode"`
	Topic         string  `json:"topic"`
	Partitions    int32   `json:"partitions"`
	RecordBytes   int     `json:"record_bytes"`
	Records       int64   `json:"records"`
	Errors        int64   `json:"errors"`
	Missing       int64   `json:"missing,omitempty"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	// Latency is the ack latency for produce and the produce-to-consume latency for e2e.
	Latency *latencySummary `json:"latency_ms,omitempty"`
	// ProduceLatency is the ack latency during e2e.
	ProduceLatency *latencySummary `json:"produce_latency_ms,omitempty"`
}

// latencySummary holds percentiles in milliseconds.
type latencySummary struct {
	Count uint64  `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p99_9"`
	Max   float64 `json:"max"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func summarize(s *histSnapshot) latencySummary {
	return latencySummary{
		Count: s.Count(),
		Mean:  ms(s.Mean()),
		P50:   ms(s.Quantile(0.50)),
		P90:   ms(s.Quantile(0.90)),
		P99:   ms(s.Quantile(0.99)),
		P999:  ms(s.Quantile(0.999)),
		Max:   ms(s.Max()),
	}
}

func (res benchResult) write(w io.Writer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		return enc.Encode(res)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s (%d partitions, %d B records): %d records in %.2fs, %.0f records/s, %.1f MB/s",
		res.Mode, res.Topic, res.Partitions, res.RecordBytes, res.Records, res.Seconds, res.RecordsPerSec, res.MBPerSec)
	if res.Errors > 0 {
		fmt.Fprintf(&b, ", %d failed", res.Errors)
	}
	if res.Missing > 0 {
		fmt.Fprintf(&b, ", %d not consumed", res.Missing)
	}
	b.WriteByte('\n')
	line := func(name string, l *latencySummary) {
		if l != nil {
			fmt.Fprintf(&b, "%s latency ms: p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f  (mean %.3f, %d samples)\n",
				name, l.P50, l.P90, l.P99, l.P999, l.Max, l.Mean, l.Count)
		}
	}
	switch res.Mode {
	case string(benchE2E):
		line("end-to-end", res.Latency)
		line("produce", res.ProduceLatency)
	default:
		line("produce", res.Latency)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// progress prints a line every interval: records/s and MB/s over the interval, and latency percentiles
// of the interval when the mode has latencies. On a terminal the line is rewritten in place.
type progress struct {
	done chan struct{}
	wg   sync.WaitGroup
}

func startProgress(w io.Writer, interval time.Duration, r *benchRun) *progress {
	p := &progress{done: make(chan struct{})}
	if interval <= 0 {
		return p
	}
	tty := isTerminal(w)
	p.wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		start := time.Now()
		last, lastBytes, lastAt, lastHist := r.done(), r.doneBytes(), start, r.lat.Snapshot()
		printed := false
		for {
			select {
			case <-p.done:
				if tty && printed {
					fmt.Fprintln(w)
				}
				return
			case now := <-t.C:
				n, nBytes, h := r.done(), r.doneBytes(), r.lat.Snapshot()
				line := progressLine(now.Sub(start), n-last, nBytes-lastBytes, now.Sub(lastAt), h.Since(lastHist), r.mode)
				last, lastBytes, lastAt, lastHist = n, nBytes, now, h
				if tty {
					fmt.Fprintf(w, "\r%-100s", line)
				} else {
					fmt.Fprintln(w, line)
				}
				printed = true
			}
		}
	})
	return p
}

func (p *progress) stop() {
	close(p.done)
	p.wg.Wait()
}

func progressLine(elapsed time.Duration, n, nBytes int64, window time.Duration, h *histSnapshot, mode benchMode) string {
	s := fmt.Sprintf("%7.1fs %10.0f records/s %8.1f MB/s", elapsed.Seconds(), float64(n)/window.Seconds(),
		float64(nBytes)/window.Seconds()/1e6)
	if mode != benchConsume && h.Count() > 0 {
		s += fmt.Sprintf("  p50 %.3f ms  p99 %.3f ms", ms(h.Quantile(0.5)), ms(h.Quantile(0.99)))
	}
	return s
}

// isTerminal reports whether w is a character device, i.e. a terminal the progress line can redraw.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
