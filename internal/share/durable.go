package share

import (
	"fmt"
	"slices"
)

// Batch is a run of offsets [First, Last] in one state with one delivery count, as a Record keeps them
// (Kafka's StateBatches). A record's state in a Batch is never Acquired.
type Batch struct {
	First, Last   int64
	State         RecordState
	DeliveryCount int16
}

// Record is one write of a share-partition's durable state (docs/queues.md): a snapshot of the whole
// window, which starts round Seq, or the Slot-th update of round Seq, which holds the offsets changed
// since the record before it. Both carry the start offset, the window's end and the leader epoch of the
// leader that wrote them.
type Record struct {
	Snapshot bool
	// Seq is the round: the number of the snapshot that begins it.
	Seq int32
	// Slot is 0 for a snapshot and 1, 2, ... for the updates of its round.
	Slot        int32
	LeaderEpoch int32
	StartOffset int64
	End         int64
	// Batches are in offset order, within [StartOffset, End), and do not overlap. A snapshot's cover
	// the window; an offset a snapshot leaves out is Available with no delivery.
	Batches []Batch
}

// Persist returns the record the partition owes after its changes since the last one, and false when
// it owes none. The owner writes it; an acknowledgement is answered only once the record written after
// it is committed. A snapshot is written first, every UpdatesPerSnapshot updates and after a failed
// write; an update otherwise.
func (p *Partition) Persist() (Record, bool) {
	if !p.changed && !p.snapshotDue {
		return Record{}, false
	}
	r := Record{LeaderEpoch: p.leaderEpoch, StartOffset: p.spso, End: p.End()}
	lo, hi := p.spso, p.End()
	if p.snapshotDue || int(p.slot) >= p.cfg.UpdatesPerSnapshot {
		p.seq++
		p.slot = 0
		r.Snapshot = true
	} else {
		p.slot++
		lo, hi = max(lo, p.dirtyLo), min(hi, p.dirtyHi)
	}
	r.Seq, r.Slot = p.seq, p.slot
	for off := lo; off < hi; off++ {
		e := p.recs[off-p.spso]
		st := e.State
		if st == Acquired {
			st = Available
		}
		if k := len(r.Batches) - 1; k >= 0 && r.Batches[k].State == st && r.Batches[k].DeliveryCount == e.DeliveryCount {
			r.Batches[k].Last = off
			continue
		}
		r.Batches = append(r.Batches, Batch{First: off, Last: off, State: st, DeliveryCount: e.DeliveryCount})
	}
	p.snapshotDue, p.changed, p.released = false, false, false
	p.dirtyLo, p.dirtyHi = 0, 0
	return r, true
}

// Released reports whether a change not yet persisted made an acquired record Available again (a
// RELEASE, a lock expiry, a member leaving): the record Persist returns next must be committed before
// any record is acquired, so that a leader change loses at most one delivery count of a record.
func (p *Partition) Released() bool { return p.released }

// PersistFailed tells the partition that the write of a record it returned failed: the next record is
// a snapshot, in a round of its own, since the failed write may still be committed later.
func (p *Partition) PersistFailed() { p.snapshotDue = true }

// Clone returns a copy of p that shares nothing with it: the state to go back to (Rollback) if the
// changes made after it cannot be written.
func (p *Partition) Clone() *Partition {
	// ahead is shared: an attribute is never written once Track appended it.
	c := *p
	c.buf = slices.Clone(p.recs)
	c.recs = c.buf
	return &c
}

// Rollback puts p back to saved, a Clone of p taken before changes whose write failed for good, so
// that the records they touched are as they were: an acknowledgement answered with an error leaves
// its records held by the member, which may acknowledge them again. The rounds written since saved
// stay counted and the next record is a snapshot of a round of its own, since a failed write may
// still be committed. saved must not be used after.
func (p *Partition) Rollback(saved *Partition) {
	seq := p.seq
	*p = *saved
	p.seq = max(p.seq, seq)
	p.snapshotDue = true
}

// durableEntry is one offset of a Durable.
type durableEntry struct {
	state RecordState
	count int16
}

// Durable is a share-partition's durable state rebuilt from its records: what the share-state
// coordinator keeps per share-partition, and what a new leader restores. The zero Durable has seen no
// snapshot.
type Durable struct {
	loaded      bool
	leaderEpoch int32
	seq, slot   int32
	start       int64
	// recs[i] is the offset start+i; the window's end is start+len(recs).
	recs []durableEntry
}

// Loaded reports whether a snapshot has been applied: only then is there a state to restore.
func (d *Durable) Loaded() bool { return d.loaded }

// LeaderEpoch returns the leader epoch of the last record applied: a write with an older one is fenced.
func (d *Durable) LeaderEpoch() int32 { return d.leaderEpoch }

// StartOffset returns the share-partition start offset.
func (d *Durable) StartOffset() int64 { return d.start }

// Round returns the round (Seq) and the slot of the last record applied.
func (d *Durable) Round() (seq, slot int32) { return d.seq, d.slot }

// Completed returns how many offsets of the window are finished (Acknowledged or Archived): the
// share-partition's lag is the records from the start offset to the high watermark less these.
func (d *Durable) Completed() int64 {
	var n int64
	for _, e := range d.recs {
		if e.state != Available {
			n++
		}
	}
	return n
}

// Reset returns the snapshot that sets d's start offset to start with an empty window: a round of its
// own at d's leader epoch, so that Apply takes it after d (an admin's AlterShareGroupOffsets).
func (d *Durable) Reset(start int64) Record {
	return Record{Snapshot: true, Seq: d.seq + 1, LeaderEpoch: d.leaderEpoch, StartOffset: start, End: start}
}

// Clone returns a copy of d that shares nothing with it: a state to hand to another goroutine.
func (d *Durable) Clone() *Durable {
	c := *d
	c.recs = slices.Clone(d.recs)
	return &c
}

// Snapshot returns d as one snapshot record, at d's round and leader epoch: its batches cover the
// whole window (offsets never delivered are Available with count 0), so that applying it to a zero
// Durable gives d back, except for the slot, which a restore does not use. It is how a coordinator
// hands a state to a leader on another node.
func (d *Durable) Snapshot() Record {
	r := Record{Snapshot: true, Seq: d.seq, LeaderEpoch: d.leaderEpoch, StartOffset: d.start, End: d.start + int64(len(d.recs))}
	for i, e := range d.recs {
		off := d.start + int64(i)
		if k := len(r.Batches) - 1; k >= 0 && r.Batches[k].State == e.state && r.Batches[k].DeliveryCount == e.count {
			r.Batches[k].Last = off
			continue
		}
		r.Batches = append(r.Batches, Batch{First: off, Last: off, State: e.state, DeliveryCount: e.count})
	}
	return r
}

// Apply applies the next record in log order. A record of an older leader epoch is ErrFencedLeaderEpoch;
// an update of another round than the last snapshot's (or before any snapshot), and a snapshot of an
// older round than the last one's at the same leader epoch (a failed write that arrived late), are
// ErrStaleRecord; all change nothing and replay skips them. An update that cannot follow the last record (a slot missing,
// the start offset or the end going back, a higher leader epoch without a snapshot) is ErrCorruptRecord.
func (d *Durable) Apply(r Record) error {
	if d.loaded && r.LeaderEpoch < d.leaderEpoch {
		return fmt.Errorf("%w: record of leader epoch %d after %d", ErrFencedLeaderEpoch, r.LeaderEpoch, d.leaderEpoch)
	}
	if err := r.check(); err != nil {
		return err
	}
	if r.Snapshot && d.loaded && r.LeaderEpoch == d.leaderEpoch && r.Seq < d.seq {
		// A leader's rounds only go up: this is a write of its that failed and arrived late.
		return fmt.Errorf("%w: snapshot of round %d after round %d", ErrStaleRecord, r.Seq, d.seq)
	}
	if r.Snapshot {
		*d = Durable{loaded: true, leaderEpoch: r.LeaderEpoch, seq: r.Seq, start: r.StartOffset,
			recs: make([]durableEntry, r.End-r.StartOffset)}
		d.set(r.Batches)
		return nil
	}
	if !d.loaded || r.Seq != d.seq {
		return fmt.Errorf("%w: update %d of round %d", ErrStaleRecord, r.Slot, r.Seq)
	}
	switch {
	case r.LeaderEpoch != d.leaderEpoch:
		return fmt.Errorf("%w: update at leader epoch %d in a round of epoch %d", ErrCorruptRecord, r.LeaderEpoch, d.leaderEpoch)
	case r.Slot != d.slot+1:
		return fmt.Errorf("%w: update %d of round %d after update %d", ErrCorruptRecord, r.Slot, r.Seq, d.slot)
	case r.StartOffset < d.start || r.End < d.start+int64(len(d.recs)):
		return fmt.Errorf("%w: window [%d, %d) after [%d, %d)", ErrCorruptRecord, r.StartOffset, r.End, d.start, d.start+int64(len(d.recs)))
	}
	recs := make([]durableEntry, r.End-r.StartOffset)
	if drop := r.StartOffset - d.start; drop < int64(len(d.recs)) {
		copy(recs, d.recs[drop:])
	}
	d.recs = recs
	d.start, d.slot = r.StartOffset, r.Slot
	d.set(r.Batches)
	return nil
}

func (d *Durable) set(batches []Batch) {
	for _, b := range batches {
		for off := b.First; off <= b.Last; off++ {
			d.recs[off-d.start] = durableEntry{state: b.State, count: b.DeliveryCount}
		}
	}
}

// Restore returns the share-partition d describes, led by a leader of leaderEpoch, which must not be
// older than d's. Records that were acquired come back Available (their locks ended with the leader
// that granted them) or, past the delivery limit, Archived: those are returned for the dead-letter
// hook. The first Persist is a snapshot, which fences the older leaders' writes.
func Restore(cfg Config, d *Durable, leaderEpoch int32) (*Partition, []Archive, error) {
	if !d.loaded {
		return nil, nil, fmt.Errorf("%w: no snapshot to restore", ErrInvalidConfig)
	}
	if leaderEpoch < d.leaderEpoch {
		return nil, nil, fmt.Errorf("%w: restore at leader epoch %d of a state written at %d", ErrFencedLeaderEpoch, leaderEpoch, d.leaderEpoch)
	}
	p, err := New(cfg, d.start, leaderEpoch)
	if err != nil {
		return nil, nil, err
	}
	p.seq = d.seq
	p.buf = make([]Entry, len(d.recs))
	p.recs = p.buf
	var archived []Archive
	for i, de := range d.recs {
		p.recs[i] = Entry{State: de.state, DeliveryCount: de.count}
		if de.state == Available && int(de.count) >= p.cfg.DeliveryCountLimit {
			p.recs[i].State = Archived
			archived = append(archived, Archive{Offset: d.start + int64(i), Reason: ArchiveDeliveryLimit, DeliveryCount: de.count})
		}
	}
	p.advance()
	return p, archived, nil
}
