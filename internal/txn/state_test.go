package txn

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

var t0 = time.UnixMilli(1_735_689_600_000)

// stored writes out's record and applies it at once, failing the test when there is none.
func stored(t *testing.T, x *Txn, out Output) Effect {
	t.Helper()
	if out.Record == nil {
		t.Fatalf("no record written (err %v)", out.Err)
	}
	return x.Stored(nil)
}

func wantErr(t *testing.T, out Output, want error) {
	t.Helper()
	if out.Record != nil && want == nil {
		t.Fatalf("wrote %+v, want no record", *out.Record)
	}
	if !errors.Is(out.Err, want) || (want == nil && out.Err != nil) {
		t.Fatalf("err %v, want %v", out.Err, want)
	}
}

var tpA, tpB = TopicPartition{Topic: "a", Partition: 0}, TopicPartition{Topic: "b", Partition: 3}

// begun returns an id with producer 7 at epoch 0 and an Ongoing transaction over tpA.
func begun(t *testing.T) *Txn {
	t.Helper()
	x := NewTxn("tx")
	wantErr(t, x.InitProducerID(t0, InitRequest{Timeout: time.Minute, ProducerID: NoProducerID, NewProducerID: NoProducerID}), ErrProducerIDNeeded)
	stored(t, x, x.InitProducerID(t0, InitRequest{Timeout: time.Minute, ProducerID: NoProducerID, NewProducerID: 7}))
	stored(t, x, x.AddPartitions(t0.Add(time.Second), 7, 0, []TopicPartition{tpA}))
	return x
}

func TestTxnInitNewAndBump(t *testing.T) {
	x := NewTxn("tx")
	out := x.InitProducerID(t0, InitRequest{Timeout: time.Minute, ProducerID: NoProducerID, NewProducerID: 7})
	if x.Exists() {
		t.Fatal("the id exists before its record is stored")
	}
	wantErr(t, x.InitProducerID(t0, InitRequest{Timeout: time.Minute, ProducerID: NoProducerID, NewProducerID: 8}), ErrConcurrentTransactions)
	stored(t, x, out)
	if m := x.Metadata(); m.ProducerID != 7 || m.ProducerEpoch != 0 || m.State != Empty || m.Timeout != time.Minute {
		t.Fatalf("after init: %+v", m)
	}
	stored(t, x, x.InitProducerID(t0, InitRequest{Timeout: time.Minute, ProducerID: NoProducerID, NewProducerID: NoProducerID}))
	if m := x.Metadata(); m.ProducerID != 7 || m.ProducerEpoch != 1 {
		t.Fatalf("after bump: %+v", m)
	}
	// KIP-360: the producer's current epoch bumps; a retry of that bump answers it again; another
	// epoch is fenced.
	stored(t, x, x.InitProducerID(t0, InitRequest{Timeout: time.Minute, ProducerID: 7, ProducerEpoch: 1, NewProducerID: NoProducerID}))
	wantErr(t, x.InitProducerID(t0, InitRequest{Timeout: time.Minute, ProducerID: 7, ProducerEpoch: 1, NewProducerID: NoProducerID}), nil)
	wantErr(t, x.InitProducerID(t0, InitRequest{Timeout: time.Minute, ProducerID: 7, ProducerEpoch: 0, NewProducerID: NoProducerID}), ErrProducerFenced)
	wantErr(t, x.InitProducerID(t0, InitRequest{Timeout: time.Minute, ProducerID: 9, ProducerEpoch: 2, NewProducerID: NoProducerID}), ErrProducerFenced)
}

func TestTxnInitEpochExhausted(t *testing.T) {
	x := RestoreTxn(Metadata{ID: "tx", ProducerID: 7, ProducerEpoch: epochExhausted, PreviousProducerID: NoProducerID, State: CompleteCommit})
	wantErr(t, x.InitProducerID(t0, InitRequest{Timeout: time.Minute, ProducerID: NoProducerID, NewProducerID: NoProducerID}), ErrProducerIDNeeded)
	stored(t, x, x.InitProducerID(t0, InitRequest{Timeout: time.Minute, ProducerID: NoProducerID, NewProducerID: 11}))
	if m := x.Metadata(); m.ProducerID != 11 || m.ProducerEpoch != 0 || m.PreviousProducerID != 7 {
		t.Fatalf("after exhaustion: %+v", m)
	}
	// A KIP-360 retry with the old producer id gets the new one again.
	wantErr(t, x.InitProducerID(t0, InitRequest{Timeout: time.Minute, ProducerID: 7, ProducerEpoch: epochExhausted, NewProducerID: NoProducerID}), nil)
}

func TestTxnInitFencesOngoing(t *testing.T) {
	x := begun(t)
	out := x.InitProducerID(t0, InitRequest{Timeout: time.Minute, ProducerID: NoProducerID, NewProducerID: NoProducerID})
	wantErr(t, Output{Err: out.Err}, ErrConcurrentTransactions)
	if out.Record == nil || out.Record.State != PrepareAbort || out.Record.ProducerEpoch != 1 {
		t.Fatalf("fence record %+v", out.Record)
	}
	if x.State() != PrepareEpochFence {
		t.Fatalf("state while fencing %v", x.State())
	}
	if eff := x.Stored(nil); !eff.Markers {
		t.Fatal("a stored PrepareAbort asks for no markers")
	}
	// The old epoch is fenced; the retry waits for the markers.
	wantErr(t, x.EndTxn(t0, 7, 0, true), ErrProducerFenced)
	wantErr(t, x.InitProducerID(t0, InitRequest{Timeout: time.Minute, ProducerID: NoProducerID, NewProducerID: NoProducerID}), ErrConcurrentTransactions)
	stored(t, x, x.MarkersWritten(t0))
	if m := x.Metadata(); m.State != CompleteAbort || m.Partitions != nil {
		t.Fatalf("after the markers: %+v", m)
	}
	stored(t, x, x.InitProducerID(t0, InitRequest{Timeout: time.Minute, ProducerID: NoProducerID, NewProducerID: NoProducerID}))
	if m := x.Metadata(); m.ProducerEpoch != 2 || m.State != Empty {
		t.Fatalf("after the retry: %+v", m)
	}
}

func TestTxnAddPartitions(t *testing.T) {
	x := begun(t)
	if m := x.Metadata(); m.State != Ongoing || !m.Start.Equal(t0.Add(time.Second)) {
		t.Fatalf("after the first add: %+v", m)
	}
	wantErr(t, x.AddPartitions(t0.Add(2*time.Second), 7, 0, []TopicPartition{tpA}), nil)
	stored(t, x, x.AddPartitions(t0.Add(2*time.Second), 7, 0, []TopicPartition{tpB, tpA}))
	if m := x.Metadata(); !reflect.DeepEqual(m.Partitions, []TopicPartition{tpA, tpB}) || !m.Start.Equal(t0.Add(time.Second)) {
		t.Fatalf("after the second add: %+v", m)
	}
	wantErr(t, x.AddPartitions(t0, 8, 0, []TopicPartition{tpA}), ErrInvalidProducerIDMapping)
	wantErr(t, x.AddPartitions(t0, 7, 1, []TopicPartition{tpA}), ErrProducerFenced)
	wantErr(t, NewTxn("other").AddPartitions(t0, 7, 0, []TopicPartition{tpA}), ErrInvalidProducerIDMapping)
	stored(t, x, x.EndTxn(t0, 7, 0, true))
	wantErr(t, x.AddPartitions(t0, 7, 0, []TopicPartition{tpA}), ErrConcurrentTransactions)
}

func TestTxnEndTxnRetries(t *testing.T) {
	x := begun(t)
	wantErr(t, NewTxn("tx").EndTxn(t0, 7, 0, true), ErrInvalidProducerIDMapping)
	out := x.EndTxn(t0, 7, 0, true)
	wantErr(t, x.EndTxn(t0, 7, 0, true), ErrConcurrentTransactions)
	if eff := stored(t, x, out); !eff.Markers {
		t.Fatal("no markers after PrepareCommit")
	}
	wantErr(t, x.EndTxn(t0, 7, 0, true), ErrConcurrentTransactions)
	wantErr(t, x.EndTxn(t0, 7, 0, false), ErrInvalidTxnState)
	stored(t, x, x.MarkersWritten(t0))
	wantErr(t, x.EndTxn(t0, 7, 0, true), nil)
	wantErr(t, x.EndTxn(t0, 7, 0, false), ErrInvalidTxnState)
	stored(t, x, x.InitProducerID(t0, InitRequest{Timeout: time.Minute, ProducerID: NoProducerID, NewProducerID: NoProducerID}))
	wantErr(t, x.EndTxn(t0, 7, 1, false), ErrInvalidTxnState)
}

func TestTxnWriteFailureKeepsState(t *testing.T) {
	x := begun(t)
	before := x.Metadata()
	x.EndTxn(t0, 7, 0, true)
	if eff := x.Stored(errors.New("disk")); eff.Err == nil || eff.Markers {
		t.Fatalf("failed write: %+v", eff)
	}
	if !reflect.DeepEqual(x.Metadata(), before) || x.Pending() {
		t.Fatalf("a failed write changed the state: %+v", x.Metadata())
	}
}

func TestTxnTimeoutFences(t *testing.T) {
	x := begun(t)
	start := x.Metadata().Start
	wantErr(t, x.Timeout(start.Add(time.Minute-time.Millisecond)), nil)
	out := x.Timeout(start.Add(time.Minute))
	if out.Record == nil || out.Record.State != PrepareAbort || out.Record.ProducerEpoch != 1 {
		t.Fatalf("timeout record %+v", out.Record)
	}
	x.Stored(nil)
	wantErr(t, x.EndTxn(t0, 7, 0, false), ErrProducerFenced)
}

func TestTxnExpire(t *testing.T) {
	x := begun(t)
	wantErr(t, x.Expire(t0.Add(30*24*time.Hour), time.Hour), nil)
	stored(t, x, x.EndTxn(t0.Add(time.Minute), 7, 0, false))
	stored(t, x, x.MarkersWritten(t0.Add(time.Minute)))
	wantErr(t, x.Expire(t0.Add(time.Hour), time.Hour), nil)
	out := x.Expire(t0.Add(time.Minute+time.Hour), time.Hour)
	if out.Record == nil || out.Record.State != Dead || encodeValue(*out.Record) != nil {
		t.Fatalf("expiry record %+v", out.Record)
	}
	if x.State() != Dead {
		t.Fatalf("state while expiring %v", x.State())
	}
	if eff := x.Stored(nil); !eff.Removed || x.Exists() {
		t.Fatalf("after the tombstone: %+v", eff)
	}
}

func TestTxnValidTransitions(t *testing.T) {
	for _, c := range []struct {
		from, to State
		ok       bool
	}{
		{Empty, Ongoing, true}, {CompleteAbort, Ongoing, true}, {Ongoing, PrepareCommit, true},
		{PrepareEpochFence, PrepareAbort, true}, {Empty, PrepareAbort, true}, {Empty, PrepareCommit, false}, {PrepareCommit, CompleteAbort, false},
		{Ongoing, Dead, false}, {CompleteCommit, Dead, true}, {Ongoing, Empty, false},
	} {
		if got := ValidTransition(c.from, c.to); got != c.ok {
			t.Errorf("%v -> %v: %v, want %v", c.from, c.to, got, c.ok)
		}
	}
}

// sim drives a few ids with random requests, timeouts, write outcomes and coordinator moves, keeping
// the committed records as the log does, and checks the machine's promises after every step.
type sim struct {
	t    *testing.T
	r    *rand.Rand
	now  time.Time
	txns map[string]*Txn
	// log is every committed record, in order, as its encoded key and value.
	log [][2][]byte
	// pending is each id's record being written and what to do once stored.
	pending map[string]pendingRec
	// client is each id's producer as the client knows it; stale a zombie's.
	client, stale map[string]ProducerIDEpoch
	// markers holds the ids whose markers were asked for, with the Prepare* they were asked for.
	markers map[string]Metadata
	// epochs is the highest epoch committed per producer id.
	epochs  map[int64]int16
	nextPID int64
	// seen counts the committed records by state, and fences, so the test can tell that the walk
	// reached every part of the machine.
	seen map[string]int
}

type pendingRec struct {
	rec  Metadata
	then func(Effect)
}

func newSim(t *testing.T, seed uint64) *sim {
	return &sim{
		t: t, r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), now: t0, txns: map[string]*Txn{},
		pending: map[string]pendingRec{}, client: map[string]ProducerIDEpoch{}, stale: map[string]ProducerIDEpoch{},
		markers: map[string]Metadata{}, epochs: map[int64]int16{}, nextPID: 1000, seen: map[string]int{},
	}
}

func (s *sim) txn(id string) *Txn {
	if s.txns[id] == nil {
		s.txns[id] = NewTxn(id)
	}
	return s.txns[id]
}

// out records out's record as pending, checking that it is a valid next record of the id.
func (s *sim) out(id string, out Output, then func(Effect)) {
	s.t.Helper()
	if out.Record == nil {
		return
	}
	if _, dup := s.pending[id]; dup {
		s.t.Fatalf("%s: a second record while one is pending", id)
	}
	x := s.txns[id]
	if x.Exists() && !ValidTransition(x.Metadata().State, out.Record.State) {
		s.t.Fatalf("%s: record %v after durable %v", id, out.Record.State, x.Metadata().State)
	}
	if _, asked := s.markers[id]; (out.Record.State == CompleteCommit || out.Record.State == CompleteAbort) && !asked {
		s.t.Fatalf("%s: %v written with no markers written", id, out.Record.State)
	}
	if out.Record.State == PrepareCommit && out.Record.ProducerEpoch < s.epochs[out.Record.ProducerID] {
		s.t.Fatalf("%s: a commit at fenced epoch %d (latest %d)", id, out.Record.ProducerEpoch, s.epochs[out.Record.ProducerID])
	}
	s.pending[id] = pendingRec{rec: *out.Record, then: then}
}

// complete finishes id's pending write, committed or failed.
func (s *sim) complete(id string, ok bool) {
	s.t.Helper()
	p, found := s.pending[id]
	if !found {
		return
	}
	delete(s.pending, id)
	var err error
	if !ok {
		err = errors.New("write failed")
	} else {
		s.log = append(s.log, [2][]byte{encodeKey(id), encodeValue(p.rec)})
		s.seen[p.rec.State.String()]++
		if x := s.txns[id]; p.rec.State == PrepareAbort && p.rec.ProducerEpoch > x.Metadata().ProducerEpoch && x.pendingBump < 0 {
			s.seen["fence"]++
		}
		if p.rec.State != Dead {
			if e := s.epochs[p.rec.ProducerID]; p.rec.ProducerEpoch < e {
				s.t.Fatalf("%s: epoch went back from %d to %d", id, e, p.rec.ProducerEpoch)
			}
			s.epochs[p.rec.ProducerID] = p.rec.ProducerEpoch
		}
	}
	x := s.txns[id]
	eff := x.Stored(err)
	if eff.Markers {
		if st := x.Metadata().State; st != PrepareCommit && st != PrepareAbort {
			s.t.Fatalf("%s: markers asked in %v", id, st)
		}
		s.markers[id] = x.Metadata()
	}
	if eff.Removed {
		delete(s.txns, id)
	}
	if p.then != nil {
		p.then(eff)
	}
}

// move reloads every id from the committed records, as a new coordinator would: each pending write
// either committed before the move or is lost.
func (s *sim) move() {
	s.t.Helper()
	for id := range s.pending {
		s.complete(id, s.r.IntN(2) == 0)
	}
	l := newLoaded()
	for _, kv := range s.log {
		id, m, ok, err := decodeRecord(kv[0], kv[1])
		if err != nil {
			s.t.Fatalf("a written record does not decode: %v", err)
		}
		if ok {
			l.txns[id] = m
		} else {
			delete(l.txns, id)
		}
	}
	for id, x := range s.txns {
		if !x.Exists() {
			continue
		}
		if got := l.txns[id]; !reflect.DeepEqual(got, x.Metadata()) {
			s.t.Fatalf("%s: reloaded %+v, was %+v", id, got, x.Metadata())
		}
	}
	if len(l.txns) != s.existing() {
		s.t.Fatalf("reloaded %d ids, had %d", len(l.txns), s.existing())
	}
	s.txns = map[string]*Txn{}
	s.markers = map[string]Metadata{}
	for id, m := range l.txns {
		s.txns[id] = RestoreTxn(m)
		if m.State == PrepareCommit || m.State == PrepareAbort {
			s.markers[id] = m
			s.seen["reloaded in Prepare"]++
		}
	}
}

func (s *sim) existing() int {
	n := 0
	for _, x := range s.txns {
		if x.Exists() {
			n++
		}
	}
	return n
}

func (s *sim) step(ids []string) {
	s.t.Helper()
	id := ids[s.r.IntN(len(ids))]
	x := s.txn(id)
	who := s.client[id]
	if s.r.IntN(5) == 0 {
		if z, ok := s.stale[id]; ok {
			who = z
		}
	}
	parts := []TopicPartition{{Topic: "t", Partition: int32(s.r.IntN(3))}}
	switch op := s.r.IntN(12); op {
	case 0:
		s.nextPID++
		req := InitRequest{Timeout: time.Duration(1+s.r.IntN(60)) * time.Second, ProducerID: NoProducerID, NewProducerID: s.nextPID}
		if s.r.IntN(3) == 0 {
			req.ProducerID, req.ProducerEpoch = who.ProducerID, who.ProducerEpoch
		}
		out := x.InitProducerID(s.now, req)
		s.out(id, out, func(eff Effect) {
			if eff.Err == nil && out.Err == nil {
				s.stale[id] = s.client[id]
				m := s.txns[id].Metadata()
				s.client[id] = ProducerIDEpoch{m.ProducerID, m.ProducerEpoch}
			}
		})
	case 1, 2:
		s.out(id, x.AddPartitions(s.now, who.ProducerID, who.ProducerEpoch, parts), nil)
	case 3:
		commit := s.r.IntN(2) == 0
		if commit && x.Exists() && who.ProducerEpoch < s.epochs[who.ProducerID] {
			if out := x.EndTxn(s.now, who.ProducerID, who.ProducerEpoch, true); out.Err == nil {
				s.t.Fatalf("%s: a fenced epoch %d ends its transaction with commit", id, who.ProducerEpoch)
			}
			return
		}
		s.out(id, x.EndTxn(s.now, who.ProducerID, who.ProducerEpoch, commit), nil)
	case 4:
		if m, ok := s.markers[id]; ok && !x.Pending() && x.Metadata().State == m.State {
			s.out(id, x.MarkersWritten(s.now), func(eff Effect) {
				if eff.Err == nil {
					delete(s.markers, id)
				}
			})
		}
	case 5:
		s.now = s.now.Add(time.Duration(s.r.IntN(40)) * time.Second)
		for id, x := range s.txns {
			s.out(id, x.Timeout(s.now), nil)
		}
	case 6:
		for id, x := range s.txns {
			s.out(id, x.Expire(s.now, 90*time.Second), nil)
		}
	case 7, 8:
		s.complete(id, s.r.IntN(8) != 0)
	case 9:
		if s.r.IntN(4) == 0 {
			s.move()
		}
	case 10:
		s.out(id, x.AddPartitionsAs(s.now, who.ProducerID, who.ProducerEpoch, parts, TV2), nil)
	case 11:
		// TV2's end: the client takes the bumped epoch; its earlier epoch (now stale) retries it.
		commit := s.r.IntN(2) == 0
		s.nextPID++
		out := x.EndTxnV2(s.now, who.ProducerID, who.ProducerEpoch, commit, s.nextPID)
		if out.Record != nil && who != s.client[id] {
			s.t.Fatalf("%s: the stale producer %+v ended a transaction (%v)", id, who, out.Record.State)
		}
		s.out(id, out, func(eff Effect) {
			if eff.Err == nil {
				s.seen["TV2 end"]++
				s.stale[id] = s.client[id]
				pid, epoch := s.txns[id].Metadata().ProducerAfterEnd()
				s.client[id] = ProducerIDEpoch{pid, epoch}
			}
		})
		if out.Record == nil && out.Err == nil {
			s.seen["TV2 retry answered"]++
		}
	}
	for id, x := range s.txns {
		if !x.Exists() && !x.Pending() {
			delete(s.txns, id)
		}
	}
}

func TestTxnProperties(t *testing.T) {
	ids := []string{"a", "b", "c"}
	seen := map[string]int{}
	for seed := range uint64(200) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s := newSim(t, seed)
			for range 400 {
				s.step(ids)
			}
			s.move()
			for k, n := range s.seen {
				seen[k] += n
			}
		})
	}
	for _, k := range []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "fence", "reloaded in Prepare", "TV2 end", "TV2 retry answered"} {
		if seen[k] == 0 {
			t.Errorf("the random walks never reached %s (%v)", k, seen)
		}
	}
	t.Logf("reached %v", seen)
}
