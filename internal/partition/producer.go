package partition

import (
	"fmt"
	"math"
	"slices"

	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/storage"
)

// producerBatchesMax is how many recent batches a producer's entry remembers for duplicate detection;
// Kafka clients keep at most five requests in flight per partition when idempotent.
const producerBatchesMax = 5

// batchMeta is what the producer state keeps of one appended batch.
type batchMeta struct {
	firstSeq    int32
	lastSeq     int32
	firstOffset int64
	lastOffset  int64
}

// producerEntry is the state of one producer id in one partition.
type producerEntry struct {
	epoch int16
	// batches holds the latest appended batches of epoch, oldest first.
	batches []batchMeta
	// lastOffset is the last offset of the producer's latest batch of any kind; the entry is dropped
	// once the log start moves past it (unless a transaction is open), which keeps the live state equal
	// to what a rebuild finds.
	lastOffset int64
	// lastTimestamp is the max timestamp of the producer's latest batch.
	lastTimestamp int64
	// coordinatorEpoch is the coordinator epoch of the producer's latest marker, -1 before any.
	coordinatorEpoch int32
	// txnFirstOffset is the first offset of the producer's open transaction, -1 when none;
	// txnFirstTimestamp the base timestamp of its first batch.
	txnFirstOffset    int64
	txnFirstTimestamp int64
}

// abortedRange is one entry of a partition's aborted index: producer's transaction from first to its
// ABORT marker at last. lso is the partition's last stable offset just after the marker as the log alone
// says it (the first offset of the oldest transaction still open, else last+1): no transaction aborted
// later began below it, which lets a search stop (Kafka's .txnindex keeps it for the same reason).
type abortedRange struct {
	producerID int64
	first      int64
	last       int64
	lso        int64
}

// entry is a as the log's transaction index keeps it.
func (a abortedRange) entry() storage.TxnIndexEntry {
	return storage.TxnIndexEntry{ProducerID: a.producerID, FirstOffset: a.first, LastOffset: a.last, LastStableOffset: a.lso}
}

// producers is the producer state of one partition: for each producer id, its epoch, its latest
// batches and its open transaction; and the partition's aborted transactions. It is owned by the
// Replica's owner; aborted is shared with readers, who hold a prefix of it (it is only appended to in
// place, and replaced when entries are dropped).
type producers struct {
	m map[int64]*producerEntry
	// open holds the ids of the producers with an open transaction.
	open map[int64]struct{}
	// aborted is the aborted index, in marker offset order.
	aborted []abortedRange
	// unstable are the transactions whose marker is not yet below the high watermark, in marker order:
	// they still hold the last stable offset back, as in Kafka, so that no read_committed consumer reads
	// a transaction whose outcome a failover could still take back.
	unstable []closedTxn
	// verifying holds the leader's checks of producers' transactions with their coordinators, by
	// producer id (verify.go); guards numbers them. They are the leader's alone: followers and a
	// rebuild start with none.
	verifying map[int64]*verification
	guards    uint64
}

// closedTxn is a transaction a marker closed: its first offset and its marker's.
type closedTxn struct {
	first  int64
	marker int64
}

func newProducers() *producers {
	return &producers{m: map[int64]*producerEntry{}, open: map[int64]struct{}{}, verifying: map[int64]*verification{}}
}

// lastSeq is the sequence of the batch's last record; sequences wrap from MaxInt32 to 0.
func lastSeq(h record.Header) int32 {
	return int32((int64(h.BaseSequence) + int64(h.LastOffsetDelta)) % (math.MaxInt32 + 1))
}

// inSequence reports whether next follows last.
func inSequence(last, next int32) bool {
	return next == last+1 || (last == math.MaxInt32 && next == 0)
}

// check decides whether a data batch of an idempotent producer (ProducerID >= 0) may be appended. It
// returns the batch's earlier append when the batch is a retry of one of the latest batches, or an
// error wrapping ErrInvalidProducerEpoch, ErrInvalidTxnState (a non-transactional batch while the
// producer's transaction is open) or ErrOutOfOrderSequence.
func (p *producers) check(h record.Header) (*batchMeta, error) {
	if h.ProducerEpoch < 0 {
		return nil, fmt.Errorf("%w: producer %d epoch %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch)
	}
	if h.BaseSequence < 0 {
		return nil, fmt.Errorf("%w: producer %d sequence %d", ErrOutOfOrderSequence, h.ProducerID, h.BaseSequence)
	}
	e, ok := p.m[h.ProducerID]
	if !ok {
		// Unknown producer (new, or its batches were removed by retention): any sequence starts it
		// (KIP-360).
		return nil, nil
	}
	switch {
	case h.ProducerEpoch < e.epoch:
		return nil, fmt.Errorf("%w: producer %d epoch %d is older than %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
	case !h.Transactional() && e.txnFirstOffset >= 0:
		return nil, fmt.Errorf("%w: producer %d sent a non-transactional batch while its transaction from offset %d is open", ErrInvalidTxnState, h.ProducerID, e.txnFirstOffset)
	case h.ProducerEpoch > e.epoch:
		if h.BaseSequence != 0 {
			return nil, fmt.Errorf("%w: producer %d new epoch %d starts at sequence %d, not 0", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
		}
		return nil, nil
	}
	last := lastSeq(h)
	for i := range e.batches {
		if b := &e.batches[i]; b.firstSeq == h.BaseSequence && b.lastSeq == last {
			dup := *b
			return &dup, nil
		}
	}
	expected := int32(-1)
	if n := len(e.batches); n > 0 {
		expected = e.batches[n-1].lastSeq
	}
	if !inSequence(expected, h.BaseSequence) {
		return nil, fmt.Errorf("%w: producer %d epoch %d sequence %d after %d", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, h.BaseSequence, expected)
	}
	return nil, nil
}

// checkEpoch refuses a batch of a producer (ProducerID >= 0) whose epoch is older than the partition's
// for that producer, with an error wrapping ErrInvalidProducerEpoch.
func (p *producers) checkEpoch(h record.Header) error {
	if e, ok := p.m[h.ProducerID]; ok && h.ProducerEpoch < e.epoch {
		return fmt.Errorf("%w: producer %d epoch %d is older than %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
	}
	return nil
}

// checkMarker decides whether a transaction marker of a producer, ending a transaction of version tv,
// may be appended: its epoch must not be older than the producer's (ErrInvalidProducerEpoch), nor its
// coordinator epoch older than that of the producer's latest marker (ErrTransactionCoordinatorFenced).
// A TV2 marker (tv 2) must also be newer than the epoch of the producer's open transaction (KIP-1228):
// its coordinator bumped the epoch before writing it, so a TV2 marker at the epoch of an open
// transaction is a late one of the transaction before, which must not end the next. A marker for a
// producer with no open transaction is taken: a coordinator that retries sends its markers again.
func (p *producers) checkMarker(h record.Header, m record.Marker, tv int8) error {
	e, ok := p.m[h.ProducerID]
	if !ok {
		return nil
	}
	if h.ProducerEpoch < e.epoch {
		return fmt.Errorf("%w: marker of producer %d epoch %d is older than %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
	}
	if tv >= 2 && h.ProducerEpoch == e.epoch && e.txnFirstOffset >= 0 {
		return fmt.Errorf("%w: TV2 marker of producer %d at epoch %d, the epoch of its open transaction", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch)
	}
	if m.CoordinatorEpoch < e.coordinatorEpoch {
		return fmt.Errorf("%w: marker of producer %d from coordinator epoch %d, older than %d", ErrTransactionCoordinatorFenced, h.ProducerID, m.CoordinatorEpoch, e.coordinatorEpoch)
	}
	return nil
}

// update records an appended batch whose header carries its stamped base offset; m is the marker of a
// control batch (nil for other batches, and for a control batch that holds no marker). It is used both
// after a checked append and, unchecked, when rebuilding from the log or following a leader. A marker closes the producer's open transaction (of
// any older epoch too) and takes its epoch; an ABORT marker that closes one adds it to the aborted
// index, which update then returns (ok false otherwise).
func (p *producers) update(h record.Header, m *record.Marker) (abortedRange, bool) {
	if h.ProducerID < 0 {
		return abortedRange{}, false
	}
	e, ok := p.m[h.ProducerID]
	switch {
	case !ok:
		e = &producerEntry{epoch: h.ProducerEpoch, coordinatorEpoch: -1, txnFirstOffset: -1}
		p.m[h.ProducerID] = e
	case e.epoch != h.ProducerEpoch:
		// A new epoch restarts the sequences; an open transaction stays open until its marker.
		e.epoch, e.batches = h.ProducerEpoch, nil
	}
	e.lastOffset, e.lastTimestamp = h.LastOffset(), h.MaxTimestamp
	if h.Control() {
		if m == nil {
			return abortedRange{}, false
		}
		return p.endTxn(h, e, *m)
	}
	if h.Transactional() && e.txnFirstOffset < 0 {
		e.txnFirstOffset, e.txnFirstTimestamp = h.BaseOffset, h.BaseTimestamp
		p.open[h.ProducerID] = struct{}{}
		delete(p.verifying, h.ProducerID)
	}
	if h.BaseSequence < 0 {
		// A coordinator's batch (a transaction's offsets) has no sequence to deduplicate against.
		return abortedRange{}, false
	}
	if len(e.batches) == producerBatchesMax {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:producerBatchesMax-1]
	}
	e.batches = append(e.batches, batchMeta{
		firstSeq:    h.BaseSequence,
		lastSeq:     lastSeq(h),
		firstOffset: h.BaseOffset,
		lastOffset:  h.LastOffset(),
	})
	return abortedRange{}, false
}

// endTxn applies marker m, at h, to the producer's entry e.
func (p *producers) endTxn(h record.Header, e *producerEntry, m record.Marker) (abortedRange, bool) {
	e.coordinatorEpoch = max(e.coordinatorEpoch, m.CoordinatorEpoch)
	first := e.txnFirstOffset
	if first < 0 {
		return abortedRange{}, false
	}
	e.txnFirstOffset = -1
	delete(p.open, h.ProducerID)
	p.unstable = append(p.unstable, closedTxn{first: first, marker: h.BaseOffset})
	if m.Commit {
		return abortedRange{}, false
	}
	a := abortedRange{producerID: h.ProducerID, first: first, last: h.BaseOffset, lso: h.BaseOffset + 1}
	if _, oldest, ok := p.oldestOpen(); ok {
		a.lso = oldest
	}
	p.aborted = append(p.aborted, a)
	return a, true
}

// settle forgets the closed transactions whose marker lies below hw.
func (p *producers) settle(hw int64) {
	i := 0
	for i < len(p.unstable) && p.unstable[i].marker < hw {
		i++
	}
	if i > 0 {
		p.unstable = slices.Delete(p.unstable, 0, i)
	}
}

// firstUnstable returns the first offset of the oldest transaction that is open or whose marker is not
// yet known to be below the high watermark (settle); ok is false when there is none.
func (p *producers) firstUnstable() (int64, bool) {
	_, first, ok := p.oldestOpen()
	for _, t := range p.unstable {
		if !ok || t.first < first {
			first, ok = t.first, true
		}
	}
	return first, ok
}

// oldestOpen returns the producer whose open transaction began first, and where.
func (p *producers) oldestOpen() (id, first int64, ok bool) {
	for pid := range p.open {
		if f := p.m[pid].txnFirstOffset; !ok || f < first || (f == first && pid < id) {
			id, first, ok = pid, f, true
		}
	}
	return id, first, ok
}

// evictBefore drops the producers whose latest batch lies wholly below start and that have no open
// transaction, and the aborted transactions whose marker does.
func (p *producers) evictBefore(start int64) {
	for id, e := range p.m {
		if e.lastOffset < start && e.txnFirstOffset < 0 {
			delete(p.m, id)
		}
	}
	i := 0
	for i < len(p.aborted) && p.aborted[i].last < start {
		i++
	}
	if i > 0 {
		p.aborted = slices.Clone(p.aborted[i:])
	}
}
