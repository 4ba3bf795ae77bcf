package storage

import (
	"crypto/sha256"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/weir-mq/weir/internal/compress"
	"github.com/weir-mq/weir/internal/record"
)

// Compaction bounds (docs/storage.md, "Compaction").
const (
	// cleanerMaxKeys bounds the key map of one pass: dirty segments are added to it, whole, until it holds
	// this many keys (at least one segment is always taken).
	cleanerMaxKeys = 256 << 10
	// cleanerMaxBatchBytes bounds a batch's decompressed records; a larger batch is kept as it is.
	cleanerMaxBatchBytes = 64 << 20
)

// keyHash identifies a record key in the cleaner's maps.
type keyHash [sha256.Size]byte

// cleaner is a log's compaction state. running admits one pass at a time; the other fields belong to the
// pass that holds it.
type cleaner struct {
	running atomic.Bool
	// bound is the cleanable end offset plus one (SetCleanableEnd); 0 means no bound.
	bound atomic.Int64
	// gen is the log generation (truncation count) the fields below were computed under.
	gen uint64
	// cleanedTo: in the closed segments ending at or below it, every key has at most one record apart from
	// the pinned ones.
	cleanedTo int64
	// due is when the earliest tombstone kept by the last pass expires; zero if none.
	due time.Time
	// pinned maps a key to the highest offset of a superseded record that had to be kept (transactional
	// batches and each producer's last batch): a tombstone above it is kept, so the old record cannot
	// reappear as the key's latest value.
	pinned map[keyHash]int64
}

// SetCleanableEnd bounds compaction to closed segments that end at or below offset; the owner passes the
// high watermark (or the last stable offset), so that compaction never acts on records a follower
// truncation may still remove. A negative offset removes the bound (the default: every closed segment).
func (l *Log) SetCleanableEnd(offset int64) {
	if offset < 0 {
		l.cleaner.bound.Store(0)
		return
	}
	l.cleaner.bound.Store(min(offset, math.MaxInt64-1) + 1)
}

// compact runs one compaction pass if the config asks for it and there is work: dirty closed segments, or
// a kept tombstone whose delete.retention.ms has passed. It reads from a published view without holding mu
// and takes mu only to swap each cleaned segment in, so appends and reads go on meanwhile.
func (l *Log) compact() error {
	c := &l.cleaner
	if !c.running.CompareAndSwap(false, true) {
		return nil
	}
	defer c.running.Store(false)
	l.mu.Lock()
	if err := l.writable(); err != nil {
		l.mu.Unlock()
		return err
	}
	cfg, now, v, gen, changes := l.cfg, l.clock.Now(), l.view.Load(), l.gen.Load(), l.changes.Load()
	aborted, known := l.abortedEntries()
	l.mu.Unlock()
	if !cfg.Compact {
		return nil
	}
	if gen != c.gen {
		c.gen, c.cleanedTo, c.due, c.pinned = gen, 0, time.Time{}, nil
	}
	p := &pass{log: l, view: v, gen: gen, changes: changes, now: now, retention: cfg.DeleteRetention, pinned: c.pinned,
		txnKnown: known, aborted: abortedByProducer(aborted)}
	if p.pinned == nil {
		p.pinned = map[keyHash]int64{}
	}
	n := len(v.segs) - 1
	if b := c.bound.Load(); b > 0 {
		n = min(n, endingBy(v.segs[:n], b-1))
	}
	if l.jName != "" {
		// a segment journal records past the last checkpoint still refer to must keep its bytes
		n = min(n, endingBy(v.segs[:n], l.ckptEnd.Load()-1))
	}
	if cfg.MinCompactionLag > 0 {
		var err error
		if n, err = p.olderThan(n, now.Add(-cfg.MinCompactionLag)); err != nil {
			return p.quiet(err)
		}
	}
	dirty := 0
	for dirty < n && v.segs[dirty].next <= c.cleanedTo {
		dirty++
	}
	worth, err := p.worthCleaning(dirty, n, cfg)
	if err != nil {
		return p.quiet(err)
	}
	end := dirty
	switch {
	case worth:
		if end, err = p.buildMap(dirty, n); err != nil {
			return p.quiet(err)
		}
	case c.due.IsZero() || now.Before(c.due):
		return nil
	}
	if err := p.scanProducers(); err != nil {
		return p.quiet(err)
	}
	for i := range end {
		if err := p.cleanSegment(i); err != nil {
			return p.quiet(err)
		}
		if p.stopped {
			return nil
		}
	}
	if end > 0 {
		c.cleanedTo = max(c.cleanedTo, v.segs[end-1].next)
	}
	c.due, c.pinned = p.due, p.pinned
	return nil
}

// olderThan returns how many of the first n segments of the view come before the first one holding a
// record at or after cutoff (by its largest timestamp, or when it was sealed or last modified without
// timestamps): min.compaction.lag.ms keeps that segment and every later one out of the pass, as Kafka's
// first uncleanable offset does.
func (p *pass) olderThan(n int, cutoff time.Time) (int, error) {
	for i := range n {
		old, err := p.log.segmentOlderThan(p.view.segs[i], cutoff)
		if err != nil || !old {
			return i, err
		}
	}
	return n, nil
}

// worthCleaning says whether dirty segments dirty..n-1 are worth a pass: their bytes are more than
// min.cleanable.dirty.ratio of the bytes of segments 0..n-1, or the first batch of one of them is older
// than max.compaction.lag.ms (Kafka's LogCleanerManager rules).
func (p *pass) worthCleaning(dirty, n int, cfg Config) (bool, error) {
	if dirty == n {
		return false, nil
	}
	var clean, dirtyBytes int64
	for i := range n {
		if i < dirty {
			clean += p.view.size(i)
		} else {
			dirtyBytes += p.view.size(i)
		}
	}
	if dirtyBytes > 0 && float64(dirtyBytes) > cfg.MinCleanableDirtyRatio*float64(clean+dirtyBytes) {
		return true, nil
	}
	if cfg.MaxCompactionLag <= 0 {
		return false, nil
	}
	cutoff := p.now.Add(-cfg.MaxCompactionLag).UnixMilli()
	for i := dirty; i < n; i++ {
		ts, err := p.firstBatchTimestamp(i)
		if err != nil {
			return false, err
		}
		if ts >= 0 && ts < cutoff {
			return true, nil
		}
	}
	return false, nil
}

// firstBatchTimestamp is the max timestamp of segment i's first batch, -1 if it has none or is empty.
func (p *pass) firstBatchTimestamp(i int) (int64, error) {
	seg, size := p.view.segs[i], p.view.size(i)
	if size == 0 {
		return -1, nil
	}
	f, err := seg.acquire()
	if err != nil {
		return 0, err
	}
	defer seg.release()
	h, err := newSegReader(f, size).header(0)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: header at 0: %w", ErrCorruption, seg.path, err)
	}
	return h.MaxTimestamp, nil
}

// endingBy returns how many of segs (in offset order) end at or below offset.
func endingBy(segs []*segment, offset int64) int {
	i := 0
	for i < len(segs) && segs[i].next <= offset {
		i++
	}
	return i
}

// pass is one compaction pass over a view.
type pass struct {
	log       *Log
	view      *view
	gen       uint64
	changes   uint64 // the log's change count (Log.stable) the view is current for
	now       time.Time
	retention time.Duration
	// latest maps each key of the mapped (dirty) segments to the offset of its last record.
	latest map[keyHash]int64
	// lastData maps each producer id to the base offset of its last data batch in the log.
	lastData map[int64]int64
	pinned   map[keyHash]int64
	due      time.Time
	// stopped is set when a truncation ended the pass.
	stopped bool
	// txnKnown says the owner gave the log every aborted transaction (SetAborted): then aborted lists,
	// per producer, the ranges [first offset, marker] of its aborted transactions, and a transactional
	// batch outside them is committed (the pass cleans only below the last stable offset, where every
	// transaction is decided).
	txnKnown bool
	aborted  map[int64][]TxnIndexEntry
}

// abortedByProducer groups aborted transactions by producer id.
func abortedByProducer(es []TxnIndexEntry) map[int64][]TxnIndexEntry {
	m := map[int64][]TxnIndexEntry{}
	for _, e := range es {
		m[e.ProducerID] = append(m[e.ProducerID], e)
	}
	return m
}

// txnState says what the pass may do with a data batch: plain (a non-transactional batch, or a
// transactional one known committed: its records supersede and are cleaned like any), aborted (a
// record of an aborted transaction: dropped, and it supersedes nothing), or unknown (a transactional
// batch of a log whose aborted transactions were never given: kept as it is, superseding nothing).
func (p *pass) txnState(h record.Header) txnBatch {
	if !h.Transactional() {
		return txnPlain
	}
	if !p.txnKnown {
		return txnUnknown
	}
	for _, e := range p.aborted[h.ProducerID] {
		if e.FirstOffset <= h.BaseOffset && h.BaseOffset <= e.LastOffset {
			return txnAborted
		}
	}
	return txnPlain
}

// txnBatch is txnState's answer.
type txnBatch uint8

const (
	txnPlain txnBatch = iota
	txnAborted
	txnUnknown
)

// quiet turns the errors of a view that changed under the pass (a segment deleted, cut or replaced
// meanwhile, so that a read may have failed on it) into a pass that simply stops; the next Maintain starts
// over and reports the error again if it was real.
func (p *pass) quiet(err error) error {
	if !p.log.unchangedSince(p.changes) {
		return nil
	}
	return err
}

// batchRecords decodes a data batch's records, decompressing them; false if the batch is a control batch or
// cannot be decoded (bad CRC, unknown codec, too large, malformed records), in which case it is kept as it is.
func batchRecords(b []byte) (record.Header, []record.Record, bool) {
	h, err := record.Validate(b)
	if err != nil || h.Control() {
		return h, nil, false
	}
	body, err := compress.Decode(compress.Codec(h.Compression()), record.Body(b), cleanerMaxBatchBytes)
	if err != nil {
		return h, nil, false
	}
	recs, err := record.DecodeRecords(body, int(h.NumRecords))
	if err != nil {
		return h, nil, false
	}
	for _, r := range recs {
		if r.OffsetDelta < 0 || r.OffsetDelta > h.LastOffsetDelta {
			return h, nil, false
		}
	}
	return h, recs, true
}

// eachBatch calls fn with every batch of segment i of the view, in order. The bytes are valid only during
// the call.
func (p *pass) eachBatch(i int, fn func(b []byte)) error {
	seg, size := p.view.segs[i], p.view.size(i)
	f, err := seg.acquire()
	if err != nil {
		return err
	}
	defer seg.release()
	r := newSegReader(f, size)
	for pos := int64(0); pos < size; {
		h, err := r.header(pos)
		if err != nil {
			return fmt.Errorf("%w: %s: header at %d: %w", ErrCorruption, seg.path, pos, err)
		}
		b, err := r.read(pos, h.Size())
		if err != nil {
			return fmt.Errorf("%w: %s: batch at %d: %w", ErrCorruption, seg.path, pos, err)
		}
		fn(b)
		pos += int64(h.Size())
	}
	return nil
}

// buildMap records the last offset of every key in dirty segments from..n-1, whole segments, until the map
// is full; it returns the index after the last segment mapped. Aborted transactional batches (and every
// transactional batch while the aborted ones are unknown) stay out of the map: an aborted record must
// not supersede anything.
func (p *pass) buildMap(from, n int) (int, error) {
	p.latest = map[keyHash]int64{}
	i := from
	for i < n && (i == from || len(p.latest) < cleanerMaxKeys) {
		err := p.eachBatch(i, func(b []byte) {
			h, recs, ok := batchRecords(b)
			if !ok || p.txnState(h) != txnPlain {
				return
			}
			for _, r := range recs {
				if r.Key != nil {
					p.latest[sha256.Sum256(r.Key)] = h.BaseOffset + int64(r.OffsetDelta)
				}
			}
		})
		if err != nil {
			return 0, err
		}
		i++
	}
	return i, nil
}

// scanProducers finds the last data batch of every producer in the whole log, active segment included.
func (p *pass) scanProducers() error {
	p.lastData = map[int64]int64{}
	for i := range p.view.segs {
		if _, err := scanSegment(p.view, i, p.view.segs[i].base, func(h record.Header) bool {
			if h.ProducerID >= 0 && !h.Control() {
				p.lastData[h.ProducerID] = h.BaseOffset
			}
			return true
		}); err != nil {
			return err
		}
	}
	return nil
}

// superseded reports whether a later record of the same key is in the map.
func (p *pass) superseded(k keyHash, offset int64) bool {
	last, ok := p.latest[k]
	return ok && last > offset
}

// cleanSegment rewrites closed segment i without its superseded records and expired tombstones, and swaps
// it in if anything changed.
func (p *pass) cleanSegment(i int) error {
	expired, deadline, err := p.tombstonesExpired(i)
	if err != nil {
		return err
	}
	var out []byte
	changed, keptTombstone := false, false
	err = p.eachBatch(i, func(b []byte) {
		h, recs, ok := batchRecords(b)
		if !ok {
			out = append(out, b...)
			return
		}
		state := p.txnState(h)
		if state == txnUnknown || (h.ProducerID >= 0 && p.lastData[h.ProducerID] == h.BaseOffset) {
			for _, r := range recs {
				off := h.BaseOffset + int64(r.OffsetDelta)
				if r.Key != nil && p.superseded(sha256.Sum256(r.Key), off) {
					k := sha256.Sum256(r.Key)
					p.pinned[k] = max(p.pinned[k], off)
				}
				keptTombstone = keptTombstone || (r.Key != nil && r.Value == nil)
			}
			out = append(out, b...)
			return
		}
		if state == txnAborted {
			changed = true
			return
		}
		keep := make([]record.Record, 0, len(recs))
		for _, r := range recs {
			if p.keep(r, h.BaseOffset+int64(r.OffsetDelta), expired) {
				keep = append(keep, r)
				keptTombstone = keptTombstone || (r.Key != nil && r.Value == nil)
			}
		}
		if len(keep) == len(recs) {
			out = append(out, b...)
			return
		}
		rewritten, ok := rewriteBatch(h, keep)
		if !ok {
			out = append(out, b...)
			return
		}
		out = append(out, rewritten...)
		changed = true
	})
	if err != nil {
		return err
	}
	if keptTombstone && !expired && !deadline.IsZero() && (p.due.IsZero() || deadline.Before(p.due)) {
		p.due = deadline
	}
	if !changed {
		return nil
	}
	return p.swap(i, out)
}

// keep decides one record of a batch that may be rewritten.
func (p *pass) keep(r record.Record, offset int64, tombstonesExpired bool) bool {
	if r.Key == nil {
		return true // invalid in a compacted topic; kept, as Kafka does
	}
	k := sha256.Sum256(r.Key)
	if p.superseded(k, offset) {
		return false
	}
	if r.Value != nil || !tombstonesExpired {
		return true
	}
	pin, ok := p.pinned[k]
	return ok && pin < offset
}

// tombstonesExpired applies the tombstone rule to closed segment i: its tombstones may go once
// delete.retention.ms has passed since the segment's largest timestamp (or, without timestamps, since it was
// sealed or last modified). deadline is that moment, zero if unknown.
func (p *pass) tombstonesExpired(i int) (bool, time.Time, error) {
	seg := p.view.segs[i]
	ts, err := seg.maxTimestamp()
	if err != nil {
		return false, time.Time{}, err
	}
	var at time.Time
	if ts >= 0 {
		at = time.UnixMilli(ts)
	} else {
		seg.mu.Lock()
		at = seg.sealedAt
		seg.mu.Unlock()
		if at.IsZero() {
			st, err := p.log.fs.Stat(seg.path)
			if err != nil {
				return false, time.Time{}, fmt.Errorf("storage: stat %s: %w", seg.path, err)
			}
			at = st.ModTime()
		}
	}
	if at.IsZero() {
		return false, time.Time{}, nil
	}
	deadline := at.Add(p.retention)
	return !p.now.Before(deadline), deadline, nil
}

// rewriteBatch encodes the kept records of the batch h, in runs of consecutive offsets: each run becomes a
// batch whose base offset is the run's first offset, so every record keeps its offset and each batch keeps
// numRecords = lastOffsetDelta+1. Codec, timestamps (base and max), leader epoch and producer fields are
// kept; the base sequence moves with the base offset. It returns nothing for no records, and false if a
// codec fails (the batch is then kept whole).
func rewriteBatch(h record.Header, keep []record.Record) ([]byte, bool) {
	var out []byte
	for len(keep) > 0 {
		n := 1
		for n < len(keep) && keep[n].OffsetDelta == keep[n-1].OffsetDelta+1 {
			n++
		}
		run := keep[:n]
		keep = keep[n:]
		first := run[0].OffsetDelta
		var body []byte
		for _, r := range run {
			r.OffsetDelta -= first
			body = record.AppendRecord(body, r)
		}
		body, err := compress.Encode(compress.Codec(h.Compression()), body)
		if err != nil {
			return nil, false
		}
		rh := h
		rh.BaseOffset = h.BaseOffset + int64(first)
		rh.LastOffsetDelta = int32(n - 1)
		rh.NumRecords = int32(n)
		if h.BaseSequence >= 0 {
			rh.BaseSequence = int32((int64(h.BaseSequence) + int64(first)) % (math.MaxInt32 + 1))
		}
		out = record.AppendBatch(out, rh, body)
	}
	return out, true
}

// swap replaces closed segment i with data under mu, unless the log was truncated or the segment deleted or
// replaced since the view was taken; a truncation aborts the pass.
func (p *pass) swap(i int, data []byte) error {
	l := p.log
	l.settle()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waitJob()
	if err := l.writable(); err != nil {
		return err
	}
	if l.gen.Load() != p.gen {
		p.stopped = true
		return nil
	}
	j := slices.Index(l.segs[:len(l.segs)-1], p.view.segs[i])
	if j < 0 {
		return nil
	}
	current := l.unchangedSince(p.changes)
	if err := l.replaceSegment(j, data); err != nil {
		return err
	}
	if current {
		// the pass's own swap: the rest of its view is untouched by it
		p.changes = l.changes.Load()
	}
	return nil
}
