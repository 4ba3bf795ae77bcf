package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/storage"
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
	st := s.Partition
	r.mu.Lock()
	if r.closed || st.LeaderEpoch < r.epoch {
		r.mu.Unlock()
		return false
	}
	next := roleFollower
	switch st.Leader {
	case r.self:
		next = roleLeader
	case controller.NoLeader:
		next = roleNone
	}
	first := !r.stated
	changed := first || st.LeaderEpoch != r.epoch || next != r.role || st.Leader != r.leader
	r.stated = true
	r.replicas = slices.Clone(st.Replicas)
	r.minISR = int(max(s.MinISR, 1))
	r.live = map[int32]bool{}
	for _, id := range st.Replicas {
		r.live[id] = s.Live == nil || s.Live(id)
	}
	if changed {
		r.gen++
		// a replica's first role, as it is opened, is at Debug: the Manager logs how many it opened, and a
		// topic of 10,000 partitions is not 10,000 lines
		level := slog.LevelInfo
		if first {
			level = slog.LevelDebug
		}
		r.logger.Log(context.Background(), level, "replica role", "role", next.String(), "leader", st.Leader,
			"leader_epoch", st.LeaderEpoch, "log_end", r.log.EndOffset(), "high_watermark", r.hw.Load())
		r.role, r.epoch, r.leader = next, st.LeaderEpoch, st.Leader
		r.epochA.Store(st.LeaderEpoch)
		r.leading.Store(next == roleLeader)
		r.followers = map[int32]*followerProgress{}
		r.pendingAdd = controller.NoLeader
		r.needTruncate = next == roleFollower
		r.partitionEpoch = -1
		if next == roleLeader {
			now := r.clock.Now()
			for _, id := range st.Replicas {
				if id != r.self {
					r.followers[id] = &followerProgress{leo: -1, lastCaughtUp: now, prevLeaderLEO: -1}
				}
			}
			r.epochStart = r.log.EndOffset()
			r.startAdvanceLocked()
		}
	}
	if next == roleLeader && st.PartitionEpoch > r.partitionEpoch {
		r.isr = slices.Clone(st.ISR)
		r.partitionEpoch = st.PartitionEpoch
		if slices.Contains(r.isr, r.pendingAdd) {
			r.pendingAdd = controller.NoLeader
		}
	}
	if next != roleLeader {
		r.isr = slices.Clone(st.ISR)
	}
	truncate := changed && next == roleFollower
	r.mu.Unlock()
	if changed {
		r.notify()
	}
	r.updateHW()
	return truncate
}

// hwCandidateLocked is min(the leader's durable LEO, the LEO of every other member of the effective
// ISR: the ISR plus a member being added). Callers hold mu.
func (r *Replica) hwCandidateLocked() int64 {
	hw := r.durable.Load()
	for _, id := range r.effectiveISRLocked() {
		if id == r.self {
			continue
		}
		f, ok := r.followers[id]
		if !ok {
			return -1
		}
		hw = min(hw, f.leo)
	}
	return hw
}

func (r *Replica) effectiveISRLocked() []int32 {
	if r.pendingAdd == controller.NoLeader || slices.Contains(r.isr, r.pendingAdd) {
		return r.isr
	}
	return append(slices.Clone(r.isr), r.pendingAdd)
}

// FollowerFetch is the leader's side of a follower's Fetch (docs/replication.md, "Follower fetch"):
// it checks the follower's leader epoch and, when lastFetchedEpoch is set (>= 0), whether the
// follower's log diverged; then it records fetchOffset as the follower's durable LEO, moves the high
// watermark, and proposes the follower for the ISR once it has caught up. A diverging follower gets
// the epoch and end offset to truncate to (ok false) and nothing is recorded.
func (r *Replica) FollowerFetch(follower int32, fetchOffset int64, currentEpoch, lastFetchedEpoch int32) (diverging EpochEnd, ok bool, err error) {
	r.mu.Lock()
	if err := r.checkLeaderLocked(currentEpoch); err != nil {
		r.mu.Unlock()
		return EpochEnd{}, false, err
	}
	f, known := r.followers[follower]
	if !known {
		r.mu.Unlock()
		return EpochEnd{}, false, fmt.Errorf("%w: broker %d is not a follower of %s-%d", ErrNotLeader, follower, r.topic, r.part)
	}
	if d, div := r.divergenceLocked(fetchOffset, lastFetchedEpoch); div {
		r.mu.Unlock()
		return d, false, nil
	}
	leo := r.log.EndOffset()
	if fetchOffset > leo || fetchOffset < r.log.StartOffset() {
		start := r.log.StartOffset()
		r.mu.Unlock()
		return EpochEnd{}, false, fmt.Errorf("partition: %s-%d: follower %d fetch offset %d outside [%d, %d]: %w",
			r.topic, r.part, follower, fetchOffset, start, leo, storage.ErrOffsetOutOfRange)
	}
	now := r.clock.Now()
	switch {
	case fetchOffset >= leo:
		f.lastCaughtUp = now
	case f.prevLeaderLEO >= 0 && fetchOffset >= f.prevLeaderLEO:
		if f.lastFetch.After(f.lastCaughtUp) {
			f.lastCaughtUp = f.lastFetch
		}
	}
	f.leo, f.lastFetch, f.prevLeaderLEO = fetchOffset, now, leo
	r.maybeExpandLocked(follower, f)
	hw := r.hwCandidateLocked()
	r.mu.Unlock()
	r.raiseHW(hw)
	return EpochEnd{}, true, nil
}

// EpochEnd is an epoch and the offset where it ends in some log.
type EpochEnd struct {
	Epoch     int32
	EndOffset int64
}

// CheckDivergence tells a consumer that sent its last fetched epoch (Fetch v12) whether its position
// lies past the end of that epoch in this log (KIP-320); ok is false when it diverged.
func (r *Replica) CheckDivergence(fetchOffset int64, lastFetchedEpoch int32) (EpochEnd, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, div := r.divergenceLocked(fetchOffset, lastFetchedEpoch)
	return d, !div
}

func (r *Replica) divergenceLocked(fetchOffset int64, lastFetchedEpoch int32) (EpochEnd, bool) {
	if lastFetchedEpoch < 0 {
		return EpochEnd{}, false
	}
	e, end := r.endOffsetForEpochLocked(lastFetchedEpoch)
	if e == lastFetchedEpoch && end >= fetchOffset {
		return EpochEnd{}, false
	}
	return EpochEnd{Epoch: e, EndOffset: end}, true
}

// ReadReplica reads for a follower: whole batches from offset up to the log end (not the high
// watermark), with the high watermark reported.
func (r *Replica) ReadReplica(offset int64, maxBytes int) (ReadResult, error) {
	return r.readBelow(offset, maxBytes, r.log.EndOffset(), r.hw.Load())
}

// maybeExpandLocked proposes follower f for the ISR when it is outside it, live, caught up to the
// high watermark and to the start of this epoch, and no ISR change is in flight. Callers hold mu.
func (r *Replica) maybeExpandLocked(id int32, f *followerProgress) {
	if r.isrCh == nil || r.altering || slices.Contains(r.isr, id) || !r.live[id] {
		return
	}
	if f.leo < r.hw.Load() || f.leo < r.epochStart {
		return
	}
	r.pendingAdd = id
	r.proposeLocked(append(slices.Clone(r.isr), id))
}

// CheckISR drops from the ISR the followers that have not caught up within replica.lag.time.max.ms,
// never below min.insync.replicas (docs/replication.md, "ISR shrink"). The Manager calls it
// periodically.
func (r *Replica) CheckISR() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.role != roleLeader || r.isrCh == nil || r.altering {
		return
	}
	isr := shrinkISR(r.isr, r.self, r.minISR, func(id int32) bool {
		f, ok := r.followers[id]
		return !ok || r.clock.Now().Sub(f.lastCaughtUp) > r.lagMax
	})
	if len(isr) < len(r.isr) {
		r.logger.Warn("shrinking ISR", "isr", r.isr, "new_isr", isr)
		r.proposeLocked(isr)
	}
}

// shrinkISR returns isr without the members lagging says are out of sync (never the leader), keeping
// at least minISR members: the ones dropped first are the later ones in isr order.
func shrinkISR(isr []int32, leader int32, minISR int, lagging func(int32) bool) []int32 {
	out := slices.Clone(isr)
	for i := len(out) - 1; i >= 0 && len(out) > minISR; i-- {
		if out[i] != leader && lagging(out[i]) {
			out = slices.Delete(out, i, i+1)
		}
	}
	return out
}

// proposeLocked sends an AlterPartition for isr from a goroutine and applies the committed state
// when it returns. Callers hold mu.
func (r *Replica) proposeLocked(isr []int32) {
	req := controller.AlterPartition{
		Topic: r.topic, Partition: r.part, Leader: r.self,
		LeaderEpoch: r.epoch, PartitionEpoch: r.partitionEpoch, ISR: isr,
	}
	r.altering = true
	r.workers.Add(1)
	go func() {
		defer r.workers.Done()
		ctx, cancel := context.WithTimeout(r.ctx, alterTimeout)
		st, err := r.isrCh.AlterPartition(ctx, req)
		cancel()
		r.mu.Lock()
		r.altering = false
		if err != nil {
			r.pendingAdd = controller.NoLeader
			r.mu.Unlock()
			if !errors.Is(err, context.Canceled) {
				r.logger.Warn("ISR change refused", "isr", isr, "err", err)
			}
			r.updateHW()
			return
		}
		if r.role == roleLeader && r.epoch == st.LeaderEpoch && st.PartitionEpoch > r.partitionEpoch {
			r.isr = slices.Clone(st.ISR)
			r.partitionEpoch = st.PartitionEpoch
		}
		r.pendingAdd = controller.NoLeader
		r.mu.Unlock()
		r.logger.Info("ISR changed", "isr", st.ISR, "partition_epoch", st.PartitionEpoch)
		r.notify()
		r.updateHW()
	}()
}

// LeaderEndOffsetForEpoch answers OffsetForLeaderEpoch on the leader: the client's (or follower's)
// current epoch is checked as CheckLeader does, then the end of epoch is looked up as
// EndOffsetForEpoch does, under one lock so that the answer belongs to the checked epoch.
func (r *Replica) LeaderEndOffsetForEpoch(currentEpoch, epoch int32) (EpochEnd, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.checkLeaderLocked(currentEpoch); err != nil {
		return EpochEnd{}, err
	}
	e, end := r.endOffsetForEpochLocked(epoch)
	return EpochEnd{Epoch: e, EndOffset: end}, nil
}
