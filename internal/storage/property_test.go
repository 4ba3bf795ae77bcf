package storage

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/record/recordtest"
	"github.com/weir-mq/weir/internal/vfs"
)

var (
	seedFlag    = flag.Uint64("seed", 0, "run the storage property test with this seed only")
	crashFlag   = flag.Int("crashes", 300, "crash cycles in the storage property test")
	quietLogFn  = slog.New(slog.DiscardHandler)
	verboseProp = flag.Bool("propverbose", false, "log every step of the storage property test")
)

// modelBatch is one batch the model expects in the log; id is carried in the batch's base timestamp.
type modelBatch struct {
	base, last int64
	id         int64
}

// model is the expected content of the log: batches in offset order from start.
type model struct {
	batches []modelBatch
	start   int64
	acked   int64 // every offset below acked was acknowledged durable
}

func (m *model) end() int64 {
	if len(m.batches) == 0 {
		return m.start
	}
	return m.batches[len(m.batches)-1].last + 1
}

// cut keeps the batches that end below end.
func (m *model) cut(end int64) {
	n := 0
	for n < len(m.batches) && m.batches[n].last < end {
		n++
	}
	m.batches = m.batches[:n]
}

func (m *model) find(off int64) (modelBatch, bool) {
	for _, b := range m.batches {
		if b.last >= off {
			return b, b.base <= off
		}
	}
	return modelBatch{}, false
}

type propertyRun struct {
	t      *testing.T
	rng    *rand.Rand
	clk    *fakeClock
	mem    *vfs.Mem
	log    *Log
	model  model
	nextID int64
	epoch  int32
	cfg    Config
	// journal runs the log on a journaled syncer of /data (OpenSyncer), reopened at every crash.
	journal bool
	syncer  *Syncer
}

const propDir = "/data/topic-0"

func TestLogPropertyCrashCycles(t *testing.T) {
	t.Run("files", func(t *testing.T) { runPropertyCrashCycles(t, false) })
	t.Run("journal", func(t *testing.T) { runPropertyCrashCycles(t, true) })
}

func runPropertyCrashCycles(t *testing.T, journal bool) {
	seed := *seedFlag
	if seed == 0 {
		seed = 1
	}
	t.Logf("seed %d (replay with -seed=%d)", seed, seed)
	p := &propertyRun{t: t, rng: rand.New(rand.NewPCG(seed, 0x5eed)), clk: newClock(), mem: vfs.NewMem(), journal: journal}
	if err := p.mem.MkdirAll("/data"); err != nil {
		t.Fatal(err)
	}
	p.mem.SyncAll()
	p.cfg = testConfig()
	p.cfg.SegmentBytes = int64(1024 + p.rng.IntN(3072))
	p.cfg.IndexIntervalBytes = int32(p.rng.IntN(512))
	p.cfg.RetentionAge = -1
	p.open()
	crashes := *crashFlag
	if testing.Short() {
		crashes /= 10
	}
	for cycle := range crashes {
		for range 1 + p.rng.IntN(12) {
			p.step()
		}
		p.crash(cycle)
	}
	p.close()
}

func (p *propertyRun) open() {
	p.t.Helper()
	opts := Options{FS: p.mem, Clock: p.clk, Logger: quietLogFn}
	if p.journal {
		s, err := OpenSyncer(p.mem, "/data", quietLogFn)
		if err != nil {
			p.t.Fatalf("OpenSyncer: %v", err)
		}
		s.directBytes = directBytesChoice(p.rng)
		p.syncer, opts.Syncer = s, s
	}
	l, err := Open(propDir, p.cfg, opts)
	if err != nil {
		p.t.Fatalf("Open: %v", err)
	}
	p.log = l
}

// close closes the log and, under the journal, its syncer.
func (p *propertyRun) close() {
	_ = p.log.Close()
	if p.syncer != nil {
		p.syncer.Close()
	}
}

func (p *propertyRun) step() {
	t := p.t
	r := p.rng.IntN(100)
	if *verboseProp {
		t.Logf("step %d: log [%d, %d) model [%d, %d) acked %d", r, p.log.StartOffset(), p.log.EndOffset(), p.model.start, p.model.end(), p.model.acked)
	}
	switch {
	case r < 45:
		p.append(true)
	case r < 60:
		p.append(false)
	case r < 75:
		p.checkRead()
	case r < 80:
		end := p.model.start + p.rng.Int64N(p.model.end()-p.model.start+1)
		if *verboseProp {
			t.Logf("truncate %d", end)
		}
		if err := p.log.Truncate(end); err != nil {
			t.Fatalf("Truncate(%d): %v", end, err)
		}
		p.model.cut(end)
		p.model.acked = min(p.model.acked, p.model.end())
		p.checkEnds()
	case r < 84:
		off := p.model.start + p.rng.Int64N(p.model.end()-p.model.start+1)
		if err := p.log.AdvanceStart(off); err != nil {
			t.Fatalf("AdvanceStart(%d): %v", off, err)
		}
		p.model.start = max(p.model.start, off)
		p.dropBelowStart()
	case r < 92:
		p.clk.now = p.clk.now.Add(time.Duration(p.rng.IntN(3)) * 24 * time.Hour)
		cfg := p.cfg
		if p.rng.IntN(3) == 0 {
			cfg.RetentionBytes = int64(p.rng.IntN(8192))
		}
		if err := p.log.SetConfig(cfg); err != nil {
			t.Fatal(err)
		}
		if err := p.log.Maintain(); err != nil {
			t.Fatalf("Maintain: %v", err)
		}
		p.model.start = p.log.StartOffset()
		p.dropBelowStart()
		if err := p.log.SetConfig(p.cfg); err != nil {
			t.Fatal(err)
		}
	case r < 95:
		p.epoch++
	default:
		p.checkTime()
	}
}

func (p *propertyRun) dropBelowStart() {
	n := 0
	for n < len(p.model.batches) && p.model.batches[n].last < p.model.start {
		n++
	}
	p.model.batches = p.model.batches[n:]
}

func (p *propertyRun) append(wait bool) {
	t := p.t
	var specs []recordtest.Spec
	for range 1 + p.rng.IntN(3) {
		p.nextID++
		specs = append(specs, recordtest.Spec{Records: 1 + p.rng.IntN(5), ValueBytes: p.rng.IntN(300), Timestamp: p.nextID * 1000})
	}
	res, err := p.log.Append(recordtest.Batches(specs...), p.epoch)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	off := res.FirstOffset
	if off != p.model.end() {
		t.Fatalf("Append at %d, model end %d", off, p.model.end())
	}
	for _, s := range specs {
		p.model.batches = append(p.model.batches, modelBatch{base: off, last: off + int64(s.Records) - 1, id: s.Timestamp})
		off += int64(s.Records)
	}
	if wait {
		if err := p.log.WaitDurable(context.Background(), res.LastOffset+1); err != nil {
			t.Fatalf("WaitDurable: %v", err)
		}
		p.model.acked = res.LastOffset + 1
	}
	p.checkEnds()
}

func (p *propertyRun) checkEnds() {
	p.t.Helper()
	if p.log.EndOffset() != p.model.end() || p.log.StartOffset() != p.model.start {
		p.t.Fatalf("log [%d, %d), model [%d, %d)", p.log.StartOffset(), p.log.EndOffset(), p.model.start, p.model.end())
	}
}

// checkRead reads from a random offset and compares what comes back with the model.
func (p *propertyRun) checkRead() {
	t := p.t
	span := p.model.end() - p.model.start
	off := p.model.start + p.rng.Int64N(span+1)
	b, err := p.log.Read(off, p.rng.IntN(2000), 1<<62)
	if err != nil {
		t.Fatalf("Read(%d): %v", off, err)
	}
	p.compare(off, b)
}

func (p *propertyRun) compare(off int64, b []byte) {
	t := p.t
	if off == p.model.end() {
		if len(b) != 0 {
			t.Fatalf("Read at end returned %d bytes", len(b))
		}
		return
	}
	if len(b) == 0 {
		t.Fatalf("Read(%d) below end %d returned nothing", off, p.model.end())
	}
	first := true
	for bb, err := range record.Batches(b) {
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		h, err := record.Validate(bb)
		if err != nil {
			t.Fatalf("Read(%d): bad batch: %v", off, err)
		}
		want, ok := p.model.find(off)
		if first && !ok {
			want, ok = p.model.find(h.BaseOffset)
		}
		if !ok || want.base != h.BaseOffset || want.last != h.LastOffset() || want.id != h.BaseTimestamp {
			t.Fatalf("Read(%d): batch [%d, %d] id %d, model %+v", off, h.BaseOffset, h.LastOffset(), h.BaseTimestamp, want)
		}
		off, first = h.NextOffset(), false
	}
}

func (p *propertyRun) checkTime() {
	if len(p.model.batches) == 0 {
		return
	}
	want := p.model.batches[p.rng.IntN(len(p.model.batches))]
	off, ok, err := p.log.OffsetForTime(want.id)
	if err != nil || !ok || off != max(want.base, p.model.start) {
		p.t.Fatalf("OffsetForTime(%d) = %d, %v, %v; want %d", want.id, off, ok, err, want.base)
	}
}

// crash takes a crash image of the filesystem, reopens the log on it and checks the durability contract.
func (p *propertyRun) crash(cycle int) {
	t := p.t
	opts := vfs.CrashOptions{KeepUnsyncedProbability: p.rng.Float64(), TornWrite: p.rng.IntN(2) == 0}
	if p.rng.IntN(4) == 0 {
		if err := p.log.Close(); err != nil {
			t.Fatalf("cycle %d: Close: %v", cycle, err)
		}
	}
	if p.journal && p.rng.IntN(3) == 0 {
		// a checkpoint syncs the segments and trims the journal: the crash must lose nothing acknowledged
		if err := p.syncer.checkpoint(); err != nil {
			t.Fatalf("cycle %d: checkpoint: %v", cycle, err)
		}
	}
	clone := p.mem.CrashClone(p.rng, opts)
	p.close()
	p.mem = clone
	p.open()
	end := p.log.EndOffset()
	if end < p.model.acked {
		t.Fatalf("cycle %d: end %d below acknowledged %d (%+v)", cycle, end, p.model.acked, opts)
	}
	if end > p.model.end() {
		t.Fatalf("cycle %d: end %d past everything written %d", cycle, end, p.model.end())
	}
	if p.log.StartOffset() < p.model.start {
		t.Fatalf("cycle %d: start went back from %d to %d", cycle, p.model.start, p.log.StartOffset())
	}
	p.model.start = p.log.StartOffset()
	p.dropBelowStart()
	p.model.cut(end)
	if p.model.end() != end && !(len(p.model.batches) == 0 && end == p.model.start) {
		t.Fatalf("cycle %d: recovered end %d is not a batch boundary of the model (model end %d)", cycle, end, p.model.end())
	}
	if len(p.model.batches) == 0 {
		p.model.start = end
	}
	p.checkEnds()
	for off := p.model.start; off < end; {
		b, err := p.log.Read(off, 1<<16, 1<<62)
		if err != nil {
			t.Fatalf("cycle %d: Read(%d): %v", cycle, off, err)
		}
		p.compare(off, b)
		h, err := record.ParseHeader(b[len(b)-lastBatchSize(b):])
		if err != nil {
			t.Fatal(err)
		}
		off = h.NextOffset()
	}
	p.model.acked = min(p.model.acked, end)
	if e := p.log.LatestEpoch(); e > p.epoch {
		t.Fatalf("cycle %d: latest epoch %d above appended %d", cycle, e, p.epoch)
	}
}

// lastBatchSize returns the size of the last batch in b.
func lastBatchSize(b []byte) int {
	n := 0
	for bb, err := range record.Batches(b) {
		if err != nil {
			panic(fmt.Sprintf("bad batches: %v", err))
		}
		n = len(bb)
	}
	return n
}
