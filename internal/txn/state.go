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

// validPrevious is Kafka's table of the states each state may be entered from (TV1).
var validPrevious = map[State][]State{
	Empty:             {Empty, CompleteCommit, CompleteAbort},
	Ongoing:           {Ongoing, Empty, CompleteCommit, CompleteAbort},
	PrepareCommit:     {Ongoing},
	PrepareAbort:      {Ongoing, PrepareEpochFence},
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

// Metadata is the durable state of one transactional id: what one TransactionLogValue record holds.
// Times are whole milliseconds, as the record keeps them.
type Metadata struct {
	ID            string
	ProducerID    int64
	ProducerEpoch int16
	// PreviousProducerID is the producer id the id had before its epoch was exhausted (NoProducerID
	// when none): InitProducerId v3+ retried with it gets the current one back.
	PreviousProducerID int64
	Timeout            time.Duration
	State              State
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
}

// NewTxn returns the state machine of an id that has no record yet.
func NewTxn(id string) *Txn {
	return &Txn{cur: Metadata{ID: id, ProducerID: NoProducerID, ProducerEpoch: -1, PreviousProducerID: NoProducerID}}
}

// RestoreTxn returns the state machine of an id loaded from its last record.
func RestoreTxn(m Metadata) *Txn {
	return &Txn{cur: m, exists: true}
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
			Timeout: req.Timeout, State: Empty, LastUpdate: ms(now),
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
// partitions already in the transaction add nothing.
func (t *Txn) AddPartitions(now time.Time, pid int64, epoch int16, parts []TopicPartition) Output {
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

// EndTxn handles EndTxn: Ongoing becomes PrepareCommit or PrepareAbort, answered once it is stored,
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
	next.LastUpdate = ms(now)
	return t.write(next)
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
	if err != nil {
		return Effect{Err: err}
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
