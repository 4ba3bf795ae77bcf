package partition

import (
	"context"

	"github.com/weir-mq/weir/internal/controller"
)

// State is the part of the controller image a replica follows: its partition's state, the topic's
// min.insync.replicas, and which of its replicas are live (unfenced) brokers.
type State struct {
	Partition *controller.PartitionState
	MinISR    int32
	// Live reports whether a broker is registered and unfenced; nil means every broker is.
	Live func(id int32) bool
}

// SetState applies the image's view of the partition (docs/replication.md): a new leader epoch or
// leader makes the replica leader or follower (failing the acks=all waits of the old epoch); at the
// same epoch the leader takes the image's ISR when its partition epoch is newer. An image older than
// the replica's epoch is ignored: a broker never acts on a leader epoch older than one it has seen.
// It reports whether the replica became a follower that must truncate before fetching.
func (r *Replica) SetState(s State) bool {
	truncate := false
	_ = r.do(func() {
		truncate = r.c.setState(s, r.clock.Now())
		if r.c.role == roleLeader {
			// A follower does not report its durable points to the core: a new leader starts from the
			// log's.
			r.c.durableAt(r.log.DurableEndOffset())
			r.trackDurability()
		}
	})
	return truncate
}

// FollowerFetch is the leader's side of a follower's Fetch (docs/replication.md, "Follower fetch"):
// it checks the follower's leader epoch and, when lastFetchedEpoch is set (>= 0), whether the
// follower's log diverged; then it records fetchOffset as the follower's durable LEO, moves the high
// watermark, and proposes the follower for the ISR once it has caught up. A diverging follower gets
// the epoch and end offset to truncate to (ok false) and nothing is recorded.
func (r *Replica) FollowerFetch(follower int32, fetchOffset int64, currentEpoch, lastFetchedEpoch int32) (diverging EpochEnd, ok bool, err error) {
	if err := r.leaseHeld(); err != nil {
		return EpochEnd{}, false, err
	}
	if derr := r.do(func() {
		diverging, ok, err = r.c.followerFetch(follower, fetchOffset, currentEpoch, lastFetchedEpoch, r.clock.Now())
	}); derr != nil {
		return EpochEnd{}, false, derr
	}
	if err != nil {
		err = r.errorf("%w", err)
	}
	return diverging, ok, err
}

// EpochEnd is an epoch and the offset where it ends in some log.
type EpochEnd struct {
	Epoch     int32
	EndOffset int64
}

// CheckDivergence tells a consumer that sent its last fetched epoch (Fetch v12) whether its position
// lies past the end of that epoch in this log (KIP-320); ok is false when it diverged.
func (r *Replica) CheckDivergence(fetchOffset int64, lastFetchedEpoch int32) (EpochEnd, bool) {
	v := r.view.Load()
	d, div := divergence(v.role, v.epoch, r.log, fetchOffset, lastFetchedEpoch)
	return d, !div
}

// ReadReplica reads for a follower: whole batches from offset up to the log end (not the high
// watermark), with the high watermark reported.
func (r *Replica) ReadReplica(offset int64, maxBytes int) (ReadResult, error) {
	hw := r.hw.Load()
	return r.readBelow(offset, maxBytes, r.log.EndOffset(), hw, min(r.txn.Load().lso, hw), false)
}

// ReadReplicaSection is ReadReplica with the batches left in the log's file, as ReadSection.
func (r *Replica) ReadReplicaSection(offset int64, maxBytes int) (ReadResult, error) {
	hw := r.hw.Load()
	return r.readBelow(offset, maxBytes, r.log.EndOffset(), hw, min(r.txn.Load().lso, hw), true)
}

// CheckISR drops from the ISR the followers that have not caught up within replica.lag.time.max.ms,
// never below min.insync.replicas (docs/replication.md, "ISR shrink"). The Manager calls it
// periodically; a replica that does not lead returns at once.
func (r *Replica) CheckISR() {
	if v := r.view.Load(); v.closed || v.role != roleLeader || r.isrCh == nil {
		return
	}
	_ = r.do(func() { r.c.tick(r.clock.Now()) })
}

// proposeISR sends, on the owner, the core's AlterPartition from a goroutine and hands the outcome
// back to the core.
func (r *Replica) proposeISR(req controller.AlterPartition) {
	req.Topic, req.Partition = r.topic, r.part
	r.workers.Add(1)
	go func() {
		defer r.workers.Done()
		ctx, cancel := context.WithTimeout(r.ctx, alterTimeout)
		st, err := r.isrCh.AlterPartition(ctx, req)
		cancel()
		r.post(func() { r.c.altered(req.ISR, st, err) })
	}()
}

// LeaderEndOffsetForEpoch answers OffsetForLeaderEpoch on the leader: the client's (or follower's)
// current epoch is checked as CheckLeader does, then the end of epoch is looked up as
// EndOffsetForEpoch does, both against one view of the replica so that the answer belongs to the
// checked epoch.
func (r *Replica) LeaderEndOffsetForEpoch(currentEpoch, epoch int32) (EpochEnd, error) {
	v := r.view.Load()
	if err := checkLeader(v.closed, v.role, v.epoch, currentEpoch); err != nil {
		return EpochEnd{}, r.errorf("%w", err)
	}
	if err := r.leaseHeld(); err != nil {
		return EpochEnd{}, err
	}
	e, end := endOffsetForEpoch(v.role, v.epoch, r.log, epoch)
	return EpochEnd{Epoch: e, EndOffset: end}, nil
}
