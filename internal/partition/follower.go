package partition

import (
	"context"
)

// following returns the replica's fetch position; ok is false unless it is an open follower.
func (r *Replica) following() (position, bool) {
	v := r.view.Load()
	if v.closed || v.role != roleFollower {
		return position{}, false
	}
	return position{leader: v.leader, epoch: v.epoch, truncate: v.needTruncate,
		offset: max(r.log.EndOffset(), v.fetchFrom), lastEpoch: r.log.LatestEpoch()}, true
}

// durableToEnd reports whether the log is durable up to its end.
func (r *Replica) durableToEnd() bool { return r.log.DurableEndOffset() >= r.log.EndOffset() }

// waitDurableEnd waits until the log is durable up to its end, so the next fetch offset reports a
// durable LEO.
func (r *Replica) waitDurableEnd(ctx context.Context) error {
	if err := r.log.WaitDurable(ctx, r.log.EndOffset()); err != nil {
		return r.errorf("%w", err)
	}
	return nil
}

// truncateTo cuts the follower's log after the leader's answer about an epoch, if it still follows
// at epoch. It clears the pending truncation of the epoch.
func (r *Replica) truncateTo(epoch int32, answer EpochEnd) error {
	var err error
	if derr := r.do(func() {
		point, ok := r.c.truncation(epoch, answer)
		if ok {
			err = r.cut(point, true)
		}
	}); derr != nil {
		return nil
	}
	return err
}

// cut truncates the log at point (when below its end), on the owner, and gives the core the producer
// state rebuilt from what remains; done clears the pending truncation.
func (r *Replica) cut(point int64, done bool) error {
	leo := r.log.EndOffset()
	if point >= leo {
		r.c.truncated(nil, done)
		return nil
	}
	r.logger.Warn("truncating follower log", "from", leo, "to", point, "high_watermark", r.c.hw, "leader_epoch", r.c.epoch)
	if err := r.log.Truncate(point); err != nil {
		return r.errorf("truncate to %d: %w", point, err)
	}
	p, _, err := r.rebuildProducers(r.c.hw)
	if err != nil {
		return err
	}
	r.c.truncated(p, done)
	r.hw.Store(r.c.hw)
	return nil
}

// resetTo empties the log so that fetching restarts at the leader's log start, which is past this
// log's end (the leader's retention removed what this follower lacks).
func (r *Replica) resetTo(epoch int32, leaderStart int64) error {
	var err error
	if derr := r.do(func() {
		if !r.c.following(epoch) || leaderStart <= r.log.EndOffset() {
			return
		}
		if terr := r.log.Truncate(r.log.StartOffset()); terr != nil {
			err = r.errorf("reset: %w", terr)
			return
		}
		p, _, perr := r.rebuildProducers(r.c.hw)
		if perr != nil {
			err = perr
			return
		}
		r.c.resetTo(leaderStart, p)
		r.hw.Store(r.c.hw)
	}); derr != nil {
		return nil
	}
	return err
}

// fetched is a leader's answer for one partition, as the fetcher hands it to the replica.
type fetched struct {
	records        []byte
	highWatermark  int64
	logStartOffset int64
}

// appendFetched appends what the leader sent at epoch (keeping the leader's offsets and epochs),
// updates the producer state from the batch headers, follows the leader's log start and learns the
// high watermark. A replica that stopped following at epoch ignores it. An answer with nothing new
// changes nothing and is not handed to the owner.
func (r *Replica) appendFetched(epoch int32, f fetched) error {
	if len(f.records) == 0 && min(f.highWatermark, r.log.EndOffset()) <= r.hw.Load() && f.logStartOffset <= r.log.StartOffset() {
		return nil
	}
	var err error
	if derr := r.do(func() {
		if !r.c.following(epoch) || r.c.needTruncate {
			return
		}
		if len(f.records) > 0 {
			if _, aerr := r.log.AppendAsFollower(f.records); aerr != nil {
				err = r.errorf("append from leader: %w", aerr)
				return
			}
		}
		for _, a := range r.c.fetchedAppended(f.records, f.highWatermark) {
			if aerr := r.log.AddAborted(a.entry()); aerr != nil {
				err = r.errorf("transaction index: %w", aerr)
				return
			}
		}
		if f.logStartOffset > r.log.StartOffset() && f.logStartOffset <= r.log.EndOffset() {
			if aerr := r.log.AdvanceStart(f.logStartOffset); aerr != nil {
				err = r.errorf("follow log start: %w", aerr)
				return
			}
			r.c.startMoved()
		}
	}); derr != nil {
		return nil
	}
	return err
}

// retruncate makes the follower ask the leader about its epoch again before the next fetch (its fetch
// offset was past the leader's log end).
func (r *Replica) retruncate(epoch int32) {
	_ = r.do(func() { r.c.retruncate(epoch) })
}
