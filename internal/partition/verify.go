package partition

import (
	"context"
	"fmt"

	"github.com/weir-mq/weir/internal/record"
)

// verification is a leader's check, with the producer's transaction coordinator, that this partition is
// in the producer's transaction before the transaction's first batch is appended here (KIP-890 part 1),
// or its add of the partition (part 2). guard names the check: a marker that ends the producer's
// transaction meanwhile drops the entry (markerWritten), so a batch verified against a transaction
// that has since ended is refused instead of opening a new one that no coordinator knows (a hanging
// transaction).
type verification struct {
	epoch    int16
	guard    uint64
	verified bool
}

// verificationFor tells a leader what a transactional batch of producer pid at epoch needs before it
// is appended: nothing (ask false, guard 0) while the producer's transaction at that epoch is open
// here, or once a check of the transaction succeeded (ask false, the check's guard); else ask is set
// and the caller asks the coordinator, then appends with guard.
func (p *producers) verificationFor(pid int64, epoch int16) (guard uint64, ask bool) {
	if e, ok := p.m[pid]; ok && e.txnFirstOffset >= 0 && e.epoch == epoch {
		return 0, false
	}
	if v, ok := p.verifying[pid]; ok && v.epoch == epoch {
		return v.guard, !v.verified
	}
	p.guards++
	p.verifying[pid] = &verification{epoch: epoch, guard: p.guards}
	return p.guards, true
}

// verified records that the coordinator answered the check guard of producer pid: the partition is in
// the transaction. Later batches of the transaction need no check.
func (p *producers) verified(pid int64, guard uint64) {
	if v, ok := p.verifying[pid]; ok && v.guard == guard {
		v.verified = true
	}
}

// markerWritten drops the check of producer pid that a marker at epoch, ending a transaction of
// version tv, ends: a check of that epoch or an older one for a TV1 marker; of an older one for a TV2
// marker, whose transaction ran at the epoch before the marker's. A TV2 marker at the check's own
// epoch ends the transaction before the one checked: a TV2 client begins its next transaction as soon
// as EndTxn answers, before the markers are written, and its coordinator adds the partition only once
// they are.
func (p *producers) markerWritten(pid int64, epoch int16, tv int8) {
	if v, ok := p.verifying[pid]; ok && (v.epoch < epoch || v.epoch == epoch && tv < 2) {
		delete(p.verifying, pid)
	}
}

// dropVerification forgets the check guard of producer pid, which failed.
func (p *producers) dropVerification(pid int64, guard uint64) {
	if v, ok := p.verifying[pid]; ok && v.guard == guard {
		delete(p.verifying, pid)
	}
}

// checkVerified decides whether a transactional batch with guard (from verificationFor) may still be
// appended: its producer's transaction at the batch's epoch is open here, or the check guard succeeded
// and no marker ended the transaction since. Otherwise the error wraps ErrInvalidTxnState.
func (p *producers) checkVerified(h record.Header, guard uint64) error {
	if e, ok := p.m[h.ProducerID]; ok && e.txnFirstOffset >= 0 && e.epoch == h.ProducerEpoch {
		return nil
	}
	if v, ok := p.verifying[h.ProducerID]; ok && guard != 0 && v.guard == guard && v.verified && v.epoch == h.ProducerEpoch {
		return nil
	}
	return fmt.Errorf("%w: producer %d epoch %d: the partition is not verified to be in its transaction (or the transaction ended since)",
		ErrInvalidTxnState, h.ProducerID, h.ProducerEpoch)
}

// VerifyFunc asks the producer's transaction coordinator whether this partition is in the producer's
// transaction, or (KIP-890 part 2) adds it: nil when it is.
type VerifyFunc func(ctx context.Context) error

// AppendTxn appends a batch as AppendAcks does, checking first, for a transactional batch that would
// start its producer's transaction in this partition, that the partition is in that transaction
// (KIP-890 part 1): verify is called, outside the replica's owner, and the batch is appended only when
// it succeeds and no marker ended the producer's transaction meanwhile (ErrInvalidTxnState otherwise;
// verify's error is returned as is). A success is kept in the producer state, so the transaction's
// later batches here are appended without asking, as are those of a transaction already open here.
func (r *Replica) AppendTxn(ctx context.Context, batch record.Checked, acks Acks, verify VerifyFunc) (Appended, func(ctx context.Context) error, error) {
	h := batch.Header
	if !h.Transactional() {
		return r.AppendAcks(batch, acks)
	}
	if err := r.leaseHeld(); err != nil {
		return Appended{}, nil, err
	}
	var (
		a     Appended
		wait  func(ctx context.Context) error
		err   error
		guard uint64
		ask   bool
	)
	if derr := r.do(func() {
		if _, err = r.c.admit(record.Header{ProducerID: -1}, acks); err != nil {
			err = r.errorf("%w", err)
			return
		}
		if guard, ask = r.c.producers.verificationFor(h.ProducerID, h.ProducerEpoch); !ask {
			a, wait, err = r.appendGuarded(batch, acks, guard)
		}
	}); derr != nil {
		return Appended{}, nil, derr
	}
	if !ask || err != nil {
		return a, wait, err
	}
	verr := verify(ctx)
	if derr := r.do(func() {
		if verr != nil {
			r.c.producers.dropVerification(h.ProducerID, guard)
			return
		}
		r.c.producers.verified(h.ProducerID, guard)
		a, wait, err = r.appendGuarded(batch, acks, guard)
	}); derr != nil {
		return Appended{}, nil, derr
	}
	if verr != nil {
		return Appended{}, nil, verr
	}
	return a, wait, err
}

// appendGuarded is appendOwned for a transactional batch whose verification is guard.
func (r *Replica) appendGuarded(batch record.Checked, acks Acks, guard uint64) (Appended, func(ctx context.Context) error, error) {
	if err := r.c.producers.checkVerified(batch.Header, guard); err != nil {
		return Appended{}, nil, r.errorf("%w", err)
	}
	return r.appendOwned(batch, acks, true)
}
