package share

// Writes keeps the books of a share-partition's writes when they go on behind its operations
// (docs/queues.md, "A share-partition"): the owner applies an operation to the Partition, notes what
// it owes (Owe) and goes on to the next one; one write is in flight at a time (Next, then Done), and
// the next one carries everything owed meanwhile, a group commit. C is what answers an operation. Its
// two rules:
//   - an operation is answered only once a write taken after it is committed: Done hands its
//     completions back only then;
//   - while a release is owed or in flight (Blocked), no record may be acquired, so that a released
//     record is written Available, with its delivery count, before it is handed out again: otherwise a
//     leader change after a second acquisition would lose two delivery counts instead of one.
//
// The zero Writes owes nothing. Only the owner goroutine touches it.
type Writes[C any] struct {
	// owed are the completions of operations applied and not yet in a write; due is set when a write
	// is owed (an operation that must be written, or a failed write); release when a failed write
	// carried a release.
	owed    []C
	due     bool
	release bool
	// flight holds the completions the write in flight carries; flying is set while one is.
	flight        []C
	flying        bool
	flightRelease bool
}

// Owe notes that an operation applied to the partition must be written, and cs, the completions to
// answer once it is committed.
func (w *Writes[C]) Owe(cs ...C) {
	w.owed = append(w.owed, cs...)
	w.due = true
}

// Blocked reports whether p may not acquire: a release is owed or in flight.
func (w *Writes[C]) Blocked(p *Partition) bool {
	return p.Released() || w.release || w.flightRelease
}

// Flying reports whether a write is in flight.
func (w *Writes[C]) Flying() bool { return w.flying }

// Next returns the record to write now, which holds every change of p since the last record, with
// cs, the completions it carries: ok when there is one, and then it is in flight until Done, which
// hands cs back once it is committed. With a write in flight, or none due, it returns nothing; with a
// write due and nothing changed (operations that changed no state) it returns the completions owed in
// cs without ok, to answer at once.
func (w *Writes[C]) Next(p *Partition) (r Record, cs []C, ok bool) {
	if w.flying || !w.due && !p.Released() {
		return Record{}, nil, false
	}
	release := w.release || p.Released()
	r, ok = p.Persist()
	w.due, w.release = false, false
	if !ok {
		cs, w.owed = w.owed, nil
		return Record{}, cs, false
	}
	w.flight, w.owed = w.owed, nil
	w.flying, w.flightRelease = true, release
	return r, w.flight, true
}

// Done ends the write in flight. Committed, it returns the completions to answer. Failed, p's next
// record is a snapshot (PersistFailed), the completions are owed again, before those owed since, and
// a release the write carried blocks acquisitions until a later write is committed.
func (w *Writes[C]) Done(p *Partition, committed bool) []C {
	flight := w.flight
	w.flight, w.flying = nil, false
	if committed {
		w.flightRelease = false
		return flight
	}
	p.PersistFailed()
	w.owed = append(flight, w.owed...)
	w.due = true
	w.release = w.release || w.flightRelease
	w.flightRelease = false
	return nil
}

// Drop forgets every completion not answered, in flight and owed, and returns them: the owner answers
// them with an error when it stops.
func (w *Writes[C]) Drop() []C {
	out := append(w.flight, w.owed...)
	*w = Writes[C]{}
	return out
}
