package partition

import (
	"context"
	"fmt"

	"github.com/weir-mq/weir/internal/record"
)

// position is what a fetcher needs to fetch one partition.
type position struct {
	leader   int32
	epoch    int32
	truncate bool
	// offset is the fetch offset (the log end, or the leader's log start after a reset);
	// lastEpoch the log's latest epoch.
	offset    int64
	lastEpoch int32
}

// following returns the replica's fetch position; ok is false unless it is an open follower.
func (r *Replica) following() (position, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.role != roleFollower {
		return position{}, false
	}
	p := position{leader: r.leader, epoch: r.epoch, truncate: r.needTruncate,
		offset: r.log.EndOffset(), lastEpoch: r.log.LatestEpoch()}
	if r.fetchFrom > p.offset {
		p.offset = r.fetchFrom
	}
	return p, true
}

// waitDurableEnd waits until the log is durable up to its end, so the next fetch offset reports a
// durable LEO.
func (r *Replica) waitDurableEnd(ctx context.Context) error {
	end := r.log.EndOffset()
	if err := r.log.WaitDurable(ctx, end); err != nil {
		return fmt.Errorf("partition: %s-%d: %w", r.topic, r.part, err)
	}
	r.setDurable(end)
	return nil
}

// truncationPoint is where a follower cuts its log given the leader's answer about an epoch
// (OffsetForLeaderEpoch, or a fetch's diverging epoch): the leader's end of that epoch, or this log's
// end of it if that is lower (the largest local epoch at or below it ends there). An undefined answer
// cuts to the log start. It never looks at the high watermark (KIP-101).
func truncationPoint(leader EpochEnd, localEndFor func(int32) (int32, int64), logStart, leo int64) int64 {
	if leader.Epoch < 0 || leader.EndOffset < 0 {
		return logStart
	}
	point := min(leader.EndOffset, leo)
	if le, end := localEndFor(leader.Epoch); le >= 0 && end >= 0 {
		point = min(point, end)
	}
	return max(point, logStart)
}

// truncateTo cuts the follower's log after the leader's answer about an epoch, if it still follows
// at epoch. It clears the pending truncation of the epoch.
func (r *Replica) truncateTo(epoch int32, answer EpochEnd) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.role != roleFollower || r.epoch != epoch {
		return nil
	}
	point := truncationPoint(answer, r.log.EndOffsetForEpoch, r.log.StartOffset(), r.log.EndOffset())
	if err := r.cutLocked(point); err != nil {
		return err
	}
	r.needTruncate = false
	return nil
}

// cutLocked truncates the log at point (when below its end), rebuilds the producer state and caps
// the durable end and high watermark. Callers hold mu: a truncation is rare and short (one fsync).
func (r *Replica) cutLocked(point int64) error {
	leo := r.log.EndOffset()
	if point >= leo {
		return nil
	}
	r.logger.Warn("truncating follower log", "from", leo, "to", point, "high_watermark", r.hw.Load(), "leader_epoch", r.epoch)
	if err := r.log.Truncate(point); err != nil {
		return fmt.Errorf("partition: %s-%d: truncate to %d: %w", r.topic, r.part, point, err)
	}
	end := r.log.EndOffset()
	if hw := r.hw.Load(); hw > end {
		r.logger.Error("truncation below the high watermark (an unclean election?)", "high_watermark", hw, "log_end", end)
		r.hw.Store(end)
	}
	if r.durable.Load() > end {
		r.durable.Store(end)
	}
	return r.rebuildProducers()
}

// resetTo empties the log so that fetching restarts at the leader's log start, which is past this
// log's end (the leader's retention removed what this follower lacks).
func (r *Replica) resetTo(epoch int32, leaderStart int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.role != roleFollower || r.epoch != epoch || leaderStart <= r.log.EndOffset() {
		return nil
	}
	if err := r.log.Truncate(r.log.StartOffset()); err != nil {
		return fmt.Errorf("partition: %s-%d: reset: %w", r.topic, r.part, err)
	}
	r.fetchFrom = leaderStart
	r.durable.Store(min(r.durable.Load(), r.log.EndOffset()))
	r.hw.Store(min(r.hw.Load(), r.log.EndOffset()))
	return r.rebuildProducers()
}

// fetched is a leader's answer for one partition, as the fetcher hands it to the replica.
type fetched struct {
	records        []byte
	highWatermark  int64
	logStartOffset int64
}

// appendFetched appends what the leader sent at epoch (keeping the leader's offsets and epochs),
// updates the producer state from the batch headers, follows the leader's log start and learns the
// high watermark. A replica that stopped following at epoch ignores it.
func (r *Replica) appendFetched(epoch int32, f fetched) error {
	r.mu.Lock()
	if r.closed || r.role != roleFollower || r.epoch != epoch || r.needTruncate {
		r.mu.Unlock()
		return nil
	}
	if len(f.records) > 0 {
		if _, err := r.log.AppendAsFollower(f.records); err != nil {
			r.mu.Unlock()
			return fmt.Errorf("partition: %s-%d: append from leader: %w", r.topic, r.part, err)
		}
		for b := f.records; len(b) > 0; {
			h, err := record.ParseHeader(b)
			if err != nil || h.Size() > len(b) {
				break
			}
			r.producers.update(h)
			b = b[h.Size():]
		}
		r.fetchFrom = -1
	}
	leo := r.log.EndOffset()
	if f.logStartOffset > r.log.StartOffset() && f.logStartOffset <= leo {
		if err := r.log.AdvanceStart(f.logStartOffset); err != nil {
			r.mu.Unlock()
			return fmt.Errorf("partition: %s-%d: follow log start: %w", r.topic, r.part, err)
		}
		r.producers.evictBefore(r.log.StartOffset())
	}
	r.mu.Unlock()
	r.raiseHW(min(f.highWatermark, leo))
	return nil
}

// truncateDiverging cuts the log after the leader answered a fetch with a diverging epoch.
func (r *Replica) truncateDiverging(epoch int32, d EpochEnd) error {
	return r.truncateTo(epoch, d)
}

// retruncate makes the follower ask the leader about its epoch again before the next fetch (its fetch
// offset was past the leader's log end).
func (r *Replica) retruncate(epoch int32) {
	r.mu.Lock()
	if r.role == roleFollower && r.epoch == epoch {
		r.needTruncate = true
	}
	r.mu.Unlock()
}
