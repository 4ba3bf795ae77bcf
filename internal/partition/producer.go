package partition

import (
	"fmt"
	"math"

	"github.com/weir-mq/weir/internal/record"
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
	// once the log start moves past it, which keeps the live state equal to what a rebuild finds.
	lastOffset int64
	// txnFirstOffset is the first offset of the producer's open transaction, -1 when none. Kept for
	// the last stable offset once transactions arrive.
	txnFirstOffset int64
}

// producers is the producer state of one partition: for each producer id, its epoch and its latest
// batches. It is owned by the Replica and guarded by Replica.mu.
type producers struct {
	m map[int64]*producerEntry
}

func newProducers() *producers { return &producers{m: map[int64]*producerEntry{}} }

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
// error wrapping ErrInvalidProducerEpoch or ErrOutOfOrderSequence.
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

// update records an appended batch whose header carries its stamped base offset. It is used both
// after a checked append and, unchecked, when rebuilding from the log.
func (p *producers) update(h record.Header) {
	if h.ProducerID < 0 {
		return
	}
	e, ok := p.m[h.ProducerID]
	if !ok || e.epoch != h.ProducerEpoch {
		e = &producerEntry{epoch: h.ProducerEpoch, txnFirstOffset: -1}
		p.m[h.ProducerID] = e
	}
	e.lastOffset = h.LastOffset()
	if h.Control() {
		e.txnFirstOffset = -1
		return
	}
	if h.Transactional() && e.txnFirstOffset < 0 {
		e.txnFirstOffset = h.BaseOffset
	}
	if h.BaseSequence < 0 {
		// A coordinator's batch (a transaction's offsets) has no sequence to deduplicate against.
		return
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
}

// evictBefore drops the producers whose latest batch lies wholly below start.
func (p *producers) evictBefore(start int64) {
	for id, e := range p.m {
		if e.lastOffset < start {
			delete(p.m, id)
		}
	}
}
