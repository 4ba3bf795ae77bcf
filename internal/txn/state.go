package txn

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// State is the state of one transactional id, numbered as Kafka numbers it in TransactionLogValue.
//
//	              AddPartitions / AddOffsets
//	+-------+ --------------------------------> +---------+  EndTxn(commit)  +---------------+
//	| Empty |                                   | Ongoing | ---------------> | PrepareCommit |
//	+-------+ <-- InitProducerId (epoch bump)   +---------+                  +---------------+
//	  ^  |                          ^             |    |                             | markers written
//	  |  | expiry      AddPartitions|             |    | EndTxn(abort)               v
//	  |  v                          |             |    v                     +----------------+
//	+------+            +---------------+         |  +--------------+        | CompleteCommit |
//	| Dead |            | CompleteAbort | <-------|--| PrepareAbort |        +----------------+
//	+------+            +---------------+ markers |  +--------------+
//	                                              |         ^ written with the bumped epoch
//	InitProducerId on Ongoing, or the timeout:    v         |
//	                                  +-------------------+
//	                                  | PrepareEpochFence |
//	                                  +-------------------+
//
// Complete* go to Empty (InitProducerId), to Ongoing (a new transaction's first add) or to Dead
// (expiry), as Empty does. PrepareEpochFence and Dead are never written: PrepareEpochFence is the state
// of an id whose PrepareAbort record (at the bumped epoch) is being written, Dead that of an id whose
// tombstone is.
type State int8

// The states, with Kafka's ids.
const (
	Empty             State = 0
	Ongoing           State = 1
	PrepareCommit     State = 2
	PrepareAbort      State = 3
	CompleteCommit    State = 4
	CompleteAbort     State = 5
	Dead              State = 6
	PrepareEpochFence State = 7
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

// String is the state's name as Kafka's tools print it.
func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

// validPrevious is Kafka's table of the states each state may be entered from. PrepareAbort from Empty
// and Complete* is TV2's alone: a TV2 client that does not know whether its transaction began ends it
// with an abort, which bumps the epoch all the same.
var validPrevious = map[State][]State{
	Empty:             {Empty, CompleteCommit, CompleteAbort},
	Ongoing:           {Ongoing, Empty, CompleteCommit, CompleteAbort},
	PrepareCommit:     {Ongoing},
	PrepareAbort:      {Ongoing, PrepareEpochFence, Empty, CompleteCommit, CompleteAbort},
	CompleteCommit:    {PrepareCommit},
	CompleteAbort:     {PrepareAbort},
	Dead:              {Empty, CompleteCommit, CompleteAbort},
	PrepareEpochFence: {Ongoing},
}

// ValidTransition reports whether Kafka allows an id to move from one state to another.
func ValidTransition(from, to State) bool {
	return slices.Contains(validPrevious[to], from)
}

// epochExhausted is the epoch from which InitProducerId gives the id a new producer id instead of a
// bump (Kafka's Short.MaxValue - 1): a fence may still bump it once, to math.MaxInt16.
const epochExhausted = math.MaxInt16 - 1

// NoProducerID is the producer id of a field that names none (-1).
const NoProducerID = -1

// Transaction versions of a transaction, as its client ran it (Kafka's transaction.version).
const (
	// TV1 is the classic protocol (KIP-98, KIP-447): explicit AddPartitionsToTxn and AddOffsetsToTxn,
	// an epoch that changes only with InitProducerId or a fence.
	TV1 int16 = 1
	// TV2 is KIP-890 part 2: partition leaders and the group coordinator add the partitions, and every
	// EndTxn bumps the epoch (a new producer id once it is exhausted).
	TV2 int16 = 2
)

// Metadata is the durable state of one transactional id: what one TransactionLogValue record holds.
// Times are whole milliseconds, as the record keeps them.
type Metadata struct {
	ID            string
	ProducerID    int64
	ProducerEpoch int16
	// PreviousProducerID is the producer id the id had before its epoch was exhausted (NoProducerID
	// when none): InitProducerId v3+ retried with it gets the current one back.
	PreviousProducerID int64
	// NextProducerID is the producer id a TV2 transaction's end gave the id when it exhausted the
	// epoch: written with Prepare*, it becomes ProducerID (at epoch 0) with Complete*. NoProducerID
	// when none.
	NextProducerID int64
	// ClientTransactionVersion is the transaction version of the id's latest transaction: TV2 once a
	// TV2 request began or ended it, else TV1 (0 for an id that never had one).
	ClientTransactionVersion int16
	Timeout                  time.Duration
	State                    State
	// Partitions are the partitions of the open (or ending) transaction, sorted; none in Empty and
	// Complete*.
	Partitions []TopicPartition
	LastUpdate time.Time
	// Start is when the transaction's first partition was added (its timeout counts from there); zero
	// outside a transaction.
	Start time.Time
}

// ms truncates t to whole milliseconds, as records keep time.
func ms(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()) }

// inTransaction reports whether s is a state in which a transaction is open or ending.
func (s State) inTransaction() bool {
	switch s {
	case Ongoing, PrepareCommit, PrepareAbort, PrepareEpochFence:
		return true
	case Empty, CompleteCommit, CompleteAbort, Dead:
		return false
	}
	return false
}

// Txn is the state machine of one transactional id. It does no I/O, starts no goroutine and reads no
// clock: each call takes the time and returns an Output, whose record the caller writes to
// __transaction_state; Stored then applies it once it is committed (or drops it when the write
// failed). While a record is being written the id answers ErrConcurrentTransactions.
type Txn struct {
	cur     Metadata
	exists  bool
	pending *Metadata
	// fencing is set while the pending record is the PrepareAbort of a fence.
	fencing bool
	// bumpedFrom is the epoch of the TV2 EndTxn whose Prepare* (and then Complete*) is the id's state,
	// -1 otherwise: an EndTxn at that epoch is a retry of it. pendingBump is the same for the pending
	// record.
	bumpedFrom, pendingBump int16
}

// NewTxn returns the state machine of an id that has no record yet.
func NewTxn(id string) *Txn {
	return &Txn{
		cur:        Metadata{ID: id, ProducerID: NoProducerID, ProducerEpoch: -1, PreviousProducerID: NoProducerID, NextProducerID: NoProducerID},
		bumpedFrom: -1, pendingBump: -1,
	}
}

// RestoreTxn returns the state machine of an id loaded from its last record. A TV2 Prepare* or
// Complete* is taken for the end of an EndTxn at the epoch before it (at the exhausted epoch for a
// Complete* that took a new producer id), so that the client's retry is answered: the record does not
// tell it apart from a fence's.
func RestoreTxn(m Metadata) *Txn {
	t := &Txn{cur: m, exists: true, bumpedFrom: -1, pendingBump: -1}
	if m.ClientTransactionVersion < TV2 {
		return t
	}
	switch m.State {
	case PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort:
		switch {
		case m.ProducerEpoch > 0:
			t.bumpedFrom = m.ProducerEpoch - 1
		case m.PreviousProducerID != NoProducerID:
			t.bumpedFrom = epochExhausted
		}
	case Empty, Ongoing, Dead, PrepareEpochFence:
	}
	return t
}

// Metadata returns the id's durable state.
func (t *Txn) Metadata() Metadata { return t.cur }

// Exists reports whether the id has a durable record.
func (t *Txn) Exists() bool { return t.exists }

// Pending reports whether a record of the id is being written.
func (t *Txn) Pending() bool { return t.pending != nil }

// State is the id's state as Kafka's tools show it: PrepareEpochFence while a fence's record is being
// written, Dead while its tombstone is, else the durable state.
func (t *Txn) State() State {
	switch {
	case t.fencing:
		return PrepareEpochFence
	case t.pending != nil && t.pending.State == Dead:
		return Dead
	}
	return t.cur.State
}

// Output is what a call asks of the caller.
type Output struct {
	// Record is the next state to write to __transaction_state (a tombstone when its State is Dead);
	// nil when there is nothing to write. The caller calls Stored with the write's outcome.
	Record *Metadata
	// Err is the answer when there is no record to wait for (nil: success); when there is a record, an
	// error here is the answer to give at once, the record's outcome notwithstanding (a fence's
	// ErrConcurrentTransactions).
	Err error
}

// Effect is what the caller does once a record is stored.
type Effect struct {
	// Err is the write's failure, nil when the record is committed and applied.
	Err error
	// Markers is set when the record stored is a Prepare*: the caller writes the markers of cur's
	// partitions, then calls MarkersWritten.
	Markers bool
	// Removed is set when the record stored was the id's tombstone.
	Removed bool
}

func (t *Txn) write(next Metadata) Output {
	if !ValidTransition(t.cur.State, next.State) {
		panic(fmt.Sprintf("txn: %q: invalid transition %v -> %v", t.cur.ID, t.cur.State, next.State))
	}
	t.pending = &next
	return Output{Record: &next}
}

// InitRequest is an InitProducerId with a transactional id.
type InitRequest struct {
	Timeout time.Duration
	// ProducerID and ProducerEpoch are the producer's current ones (InitProducerId v3+, KIP-360), or
	// NoProducerID and -1.
	ProducerID    int64
	ProducerEpoch int16
	// NewProducerID is a fresh producer id for the id to take, or NoProducerID: when the id needs one
	// and none is given, InitProducerID answers ErrProducerIDNeeded and the caller calls again with one.
	NewProducerID int64
}

// InitProducerID handles InitProducerId: a new id gets NewProducerID at epoch 0; an existing one gets
// its epoch bumped (a new producer id once the epoch is exhausted). An Ongoing transaction is first
// fenced: its PrepareAbort is written at the bumped epoch and the answer is ErrConcurrentTransactions,
// which the client retries. Once the record is stored, the id's producer id and epoch are the answer.
func (t *Txn) InitProducerID(now time.Time, req InitRequest) Output {
	if t.pending != nil {
		return Output{Err: ErrConcurrentTransactions}
	}
	if !t.exists {
		if req.NewProducerID == NoProducerID {
			return Output{Err: ErrProducerIDNeeded}
		}
		return t.write(Metadata{
			ID: t.cur.ID, ProducerID: req.NewProducerID, ProducerEpoch: 0, PreviousProducerID: NoProducerID,
			NextProducerID: NoProducerID, Timeout: req.Timeout, State: Empty, LastUpdate: ms(now),
		})
	}
	cur := t.cur
	if req.ProducerID != NoProducerID {
		switch {
		case req.ProducerID == cur.ProducerID && req.ProducerEpoch == cur.ProducerEpoch:
		case req.ProducerID == cur.ProducerID && req.ProducerEpoch == cur.ProducerEpoch-1 && cur.State == Empty:
			// A retry of the bump that gave the current epoch: answer it again.
			return Output{}
		case req.ProducerID == cur.PreviousProducerID && cur.ProducerEpoch == 0 && cur.State == Empty:
			// A retry of the bump that gave a new producer id.
			return Output{}
		default:
			return Output{Err: ErrProducerFenced}
		}
	}
	switch cur.State {
	case PrepareCommit, PrepareAbort:
		return Output{Err: ErrConcurrentTransactions}
	case Ongoing:
		out := t.fence(now)
		out.Err = ErrConcurrentTransactions
		return out
	case Empty, CompleteCommit, CompleteAbort:
	case Dead, PrepareEpochFence:
		return Output{Err: ErrConcurrentTransactions}
	}
	next := Metadata{
		ID: cur.ID, ProducerID: cur.ProducerID, ProducerEpoch: cur.ProducerEpoch + 1, PreviousProducerID: cur.PreviousProducerID,
		NextProducerID: NoProducerID, ClientTransactionVersion: cur.ClientTransactionVersion,
		Timeout: req.Timeout, State: Empty, LastUpdate: ms(now),
	}
	if cur.ProducerEpoch >= epochExhausted {
		if req.NewProducerID == NoProducerID {
			return Output{Err: ErrProducerIDNeeded}
		}
		next.PreviousProducerID, next.ProducerID, next.ProducerEpoch = cur.ProducerID, req.NewProducerID, 0
	}
	return t.write(next)
}

// fence writes the PrepareAbort of the Ongoing transaction at the bumped epoch, so that the producer's
// later requests at its old epoch are fenced.
func (t *Txn) fence(now time.Time) Output {
	next := t.cur
	next.Partitions = slices.Clone(t.cur.Partitions)
	next.ProducerEpoch++
	next.State = PrepareAbort
	next.LastUpdate = ms(now)
	t.fencing = true
	return t.write(next)
}

// check validates a producer's request against the id: ErrInvalidProducerIDMapping for an unknown id
// or another producer id, ErrProducerFenced for another epoch, ErrConcurrentTransactions while a
// record is being written.
func (t *Txn) check(pid int64, epoch int16) error {
	switch {
	case !t.exists || pid != t.cur.ProducerID:
		return ErrInvalidProducerIDMapping
	case epoch != t.cur.ProducerEpoch:
		return ErrProducerFenced
	case t.pending != nil:
		return ErrConcurrentTransactions
	}
	return nil
}

// AddPartitions handles AddPartitionsToTxn and AddOffsetsToTxn (with the group's __consumer_offsets
// partition): Empty and Complete* become Ongoing, the first add starting the transaction's clock;
// partitions already in the transaction add nothing. The transaction is a TV1 one.
func (t *Txn) AddPartitions(now time.Time, pid int64, epoch int16, parts []TopicPartition) Output {
	return t.AddPartitionsAs(now, pid, epoch, parts, TV1)
}

// AddPartitionsAs is AddPartitions for a transaction of version tv: a TV2 transaction is begun by the
// implicit adds of KIP-890 part 2 (a Produce v12's leader, a TxnOffsetCommit v5's group coordinator).
// The first add sets the transaction's version.
func (t *Txn) AddPartitionsAs(now time.Time, pid int64, epoch int16, parts []TopicPartition, tv int16) Output {
	if err := t.check(pid, epoch); err != nil {
		return Output{Err: err}
	}
	cur := t.cur
	switch cur.State {
	case PrepareCommit, PrepareAbort, PrepareEpochFence:
		return Output{Err: ErrConcurrentTransactions}
	case Dead:
		return Output{Err: ErrInvalidProducerIDMapping}
	case Ongoing:
		if containsAll(cur.Partitions, parts) {
			return Output{}
		}
	case Empty, CompleteCommit, CompleteAbort:
	}
	next := cur
	next.State = Ongoing
	next.LastUpdate = ms(now)
	if cur.State != Ongoing {
		next.Start = ms(now)
		next.Partitions = nil
		next.ClientTransactionVersion = tv
		next.NextProducerID = NoProducerID
	}
	next.Partitions = union(next.Partitions, parts)
	return t.write(next)
}

// VerifyPartitions answers a partition leader's AddPartitionsToTxn with VerifyOnly (KIP-890 part 1),
// asked before the leader appends the first batch of the producer's transaction to a partition. It
// writes nothing and reads the durable state only: a partition is in the transaction once the record
// that added it is committed, and it stays there until Complete*, so the markers reach whatever the
// leader appends meanwhile; a transaction that is ending (Prepare*) takes no new first batch. err is ErrInvalidProducerIDMapping for an unknown id or another producer id,
// ErrProducerFenced for another epoch; else each partition's answer is nil when it is in the Ongoing
// transaction and ErrInvalidTxnState when not.
func (t *Txn) VerifyPartitions(pid int64, epoch int16, parts []TopicPartition) (errs []error, err error) {
	switch {
	case !t.exists || pid != t.cur.ProducerID:
		return nil, ErrInvalidProducerIDMapping
	case epoch != t.cur.ProducerEpoch:
		return nil, ErrProducerFenced
	}
	errs = make([]error, len(parts))
	for i, tp := range parts {
		if t.cur.State != Ongoing || !containsAll(t.cur.Partitions, []TopicPartition{tp}) {
			errs[i] = fmt.Errorf("%w: %s-%d is not in the transaction (state %v)", ErrInvalidTxnState, tp.Topic, tp.Partition, t.cur.State)
		}
	}
	return errs, nil
}

// EndTxn handles EndTxn v0-4 (TV1): Ongoing becomes PrepareCommit or PrepareAbort at the same epoch
// (a TV1 end, whatever began the transaction), answered once it is stored,
// after which the caller writes the markers. A retry in the same direction is answered NONE once
// complete (ErrConcurrentTransactions while the markers are written); the other direction, or no
// transaction, is ErrInvalidTxnState.
func (t *Txn) EndTxn(now time.Time, pid int64, epoch int16, commit bool) Output {
	if err := t.check(pid, epoch); err != nil {
		return Output{Err: err}
	}
	cur := t.cur
	want := PrepareAbort
	if commit {
		want = PrepareCommit
	}
	switch cur.State {
	case Ongoing:
	case PrepareCommit, PrepareAbort:
		if cur.State == want {
			return Output{Err: ErrConcurrentTransactions}
		}
		return Output{Err: ErrInvalidTxnState}
	case CompleteCommit:
		if commit {
			return Output{}
		}
		return Output{Err: ErrInvalidTxnState}
	case CompleteAbort:
		if !commit {
			return Output{}
		}
		return Output{Err: ErrInvalidTxnState}
	case Empty, Dead, PrepareEpochFence:
		return Output{Err: ErrInvalidTxnState}
	}
	next := cur
	next.Partitions = slices.Clone(cur.Partitions)
	next.State = want
	next.ClientTransactionVersion = TV1
	next.LastUpdate = ms(now)
	return t.write(next)
}

// EndTxnV2 handles EndTxn v5+ (KIP-890 part 2): Ongoing becomes PrepareCommit or PrepareAbort at the
// bumped epoch (with newPID as NextProducerID when the epoch is exhausted: ErrProducerIDNeeded until
// one is given), and the client takes the producer id and epoch of ProducerAfterEnd for its next
// transaction. An abort from Empty or Complete* (a client unsure whether its transaction began) does
// the same with no partitions. A retry is told by the epoch it carries, the one before the bump: in the
// same direction it is answered NONE once complete (ErrConcurrentTransactions while the markers are
// written), in the other ErrInvalidTxnState. Any other epoch is ErrProducerFenced.
func (t *Txn) EndTxnV2(now time.Time, pid int64, epoch int16, commit bool, newPID int64) Output {
	cur := t.cur
	want := PrepareAbort
	if commit {
		want = PrepareCommit
	}
	if t.pending == nil && t.retriedEnd(pid, epoch) {
		switch cur.State {
		case PrepareCommit, PrepareAbort:
			if cur.State == want {
				return Output{Err: ErrConcurrentTransactions}
			}
		case CompleteCommit, CompleteAbort:
			if (cur.State == CompleteCommit) == commit {
				return Output{}
			}
		case Empty, Ongoing, Dead, PrepareEpochFence:
		}
		return Output{Err: ErrInvalidTxnState}
	}
	if err := t.check(pid, epoch); err != nil {
		return Output{Err: err}
	}
	next := cur
	switch cur.State {
	case Ongoing:
		next.Partitions = slices.Clone(cur.Partitions)
	case Empty, CompleteCommit, CompleteAbort:
		if commit {
			return Output{Err: ErrInvalidTxnState}
		}
		next.Partitions, next.Start = nil, time.Time{}
	case PrepareCommit, PrepareAbort:
		if cur.State == want {
			return Output{Err: ErrConcurrentTransactions}
		}
		return Output{Err: ErrInvalidTxnState}
	case Dead, PrepareEpochFence:
		return Output{Err: ErrInvalidTxnState}
	}
	next.State = want
	next.ClientTransactionVersion = TV2
	next.NextProducerID = NoProducerID
	next.LastUpdate = ms(now)
	if cur.ProducerEpoch < math.MaxInt16 {
		next.ProducerEpoch++
	}
	if cur.ProducerEpoch >= epochExhausted {
		if newPID == NoProducerID {
			return Output{Err: ErrProducerIDNeeded}
		}
		next.NextProducerID = newPID
	}
	out := t.write(next)
	t.pendingBump = epoch
	return out
}

// retriedEnd reports whether an EndTxn v5+ at (pid, epoch) is a retry of the one that ended the id's
// latest TV2 transaction.
func (t *Txn) retriedEnd(pid int64, epoch int16) bool {
	cur := t.cur
	if !t.exists || t.bumpedFrom < 0 || epoch != t.bumpedFrom {
		return false
	}
	switch cur.State {
	case PrepareCommit, PrepareAbort:
		return pid == cur.ProducerID
	case CompleteCommit, CompleteAbort:
		return pid == cur.ProducerID || (pid == cur.PreviousProducerID && cur.ProducerEpoch == 0)
	case Empty, Ongoing, Dead, PrepareEpochFence:
	}
	return false
}

// ProducerAfterEnd is the producer id and epoch a TV2 client takes after its EndTxn: the next producer
// id at epoch 0 when the end exhausted the epoch, else the id's (bumped) ones.
func (m Metadata) ProducerAfterEnd() (int64, int16) {
	if m.NextProducerID != NoProducerID {
		return m.NextProducerID, 0
	}
	return m.ProducerID, m.ProducerEpoch
}

// MarkersWritten moves Prepare* to Complete* once every partition has its marker.
func (t *Txn) MarkersWritten(now time.Time) Output {
	if t.pending != nil {
		return Output{Err: ErrConcurrentTransactions}
	}
	next := t.cur
	switch t.cur.State {
	case PrepareCommit:
		next.State = CompleteCommit
	case PrepareAbort:
		next.State = CompleteAbort
	case Empty, Ongoing, CompleteCommit, CompleteAbort, Dead, PrepareEpochFence:
		return Output{Err: ErrInvalidTxnState}
	}
	next.Partitions = nil
	next.LastUpdate = ms(now)
	if t.cur.NextProducerID != NoProducerID {
		next.PreviousProducerID, next.ProducerID, next.ProducerEpoch = t.cur.ProducerID, t.cur.NextProducerID, 0
		next.NextProducerID = NoProducerID
	}
	return t.write(next)
}

// TimedOut reports whether the id's transaction is Ongoing past its timeout at now.
func (t *Txn) TimedOut(now time.Time) bool {
	return t.pending == nil && t.cur.State == Ongoing && !now.Before(t.cur.Start.Add(t.cur.Timeout))
}

// Timeout aborts an Ongoing transaction past its timeout, fencing its producer (the PrepareAbort is
// written at the bumped epoch); it writes nothing otherwise.
func (t *Txn) Timeout(now time.Time) Output {
	if !t.TimedOut(now) {
		return Output{}
	}
	return t.fence(now)
}

// Expire writes the tombstone of an id idle in Empty or Complete* for expiration or longer.
func (t *Txn) Expire(now time.Time, expiration time.Duration) Output {
	if t.pending != nil || !t.exists || t.cur.State.inTransaction() || now.Sub(t.cur.LastUpdate) < expiration {
		return Output{}
	}
	next := t.cur
	next.State = Dead
	return t.write(next)
}

// Stored applies the pending record once it is committed (err nil), or drops it when its write failed.
func (t *Txn) Stored(err error) Effect {
	next := t.pending
	if next == nil {
		panic(fmt.Sprintf("txn: %q: Stored with no record pending", t.cur.ID))
	}
	t.pending, t.fencing = nil, false
	bump := t.pendingBump
	t.pendingBump = -1
	if err != nil {
		return Effect{Err: err}
	}
	switch {
	case bump >= 0:
		t.bumpedFrom = bump
	case next.State == CompleteCommit || next.State == CompleteAbort:
	default:
		t.bumpedFrom = -1
	}
	if next.State == Dead {
		t.cur.State, t.exists = Dead, false
		return Effect{Removed: true}
	}
	t.cur, t.exists = *next, true
	return Effect{Markers: next.State == PrepareCommit || next.State == PrepareAbort}
}

func compareTP(a, b TopicPartition) int {
	return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

// union is the sorted set of a (sorted) and b.
func union(a, b []TopicPartition) []TopicPartition {
	out := slices.Clone(a)
	for _, tp := range b {
		if i, found := slices.BinarySearchFunc(out, tp, compareTP); !found {
			out = slices.Insert(out, i, tp)
		}
	}
	return out
}

func containsAll(set, parts []TopicPartition) bool {
	for _, tp := range parts {
		if _, found := slices.BinarySearchFunc(set, tp, compareTP); !found {
			return false
		}
	}
	return true
}
