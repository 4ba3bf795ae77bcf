package api

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/storage"
)

// isolationReadCommitted is Fetch's and ListOffsets' IsolationLevel for read_committed.
const isolationReadCommitted = 1

// maxFetchWait bounds a client's MaxWaitMillis, so a parked fetch always ends.
const maxFetchWait = 5 * time.Minute

// noRecords is the empty record set: librdkafka refuses a null one (size -1).
var noRecords = []byte{}

// fetchPartition is one partition a fetch reads: where its result goes and the replica to read.
type fetchPartition struct {
	out *kmsg.FetchResponseTopicPartition
	// topic and partition are out's indexes in the response, where wire.AttachSection places section.
	topic, partition int
	// section holds the records of the latest read when the connection takes Sections; nil otherwise.
	section  *storage.Section
	replica  *partition.Replica
	offset   int64
	maxBytes int32
	// toLogEnd is set for a follower's fetch: it reads up to the log end, not the high watermark.
	toLogEnd bool
	// throttled is set when a follower's copy is sent under leader.replication.throttled.rate
	// (controller.Image.LeaderThrottled).
	throttled bool
}

// fetch answers Fetch (key 1). Partitions that cannot be read (unknown, not led here, fenced epoch,
// diverging) are answered in Handle; the Reply reads the others and, while fewer than MinBytes are
// readable, parks until a replica moves (Replica.Watch) or MaxWaitMillis passes. A fetch with a
// ReplicaID is a follower's (docs/replication.md): the leader records its fetch offset as its log end
// and serves up to the log end, the copies of throttled replicas within the node's leader-side bucket.
// Fetch sessions are declined: the response's SessionID is always 0.
func (b *Broker) fetch(req *kmsg.FetchRequest) wire.Reply {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if req.Version >= 7 && req.SessionID != 0 {
		resp.ErrorCode = errorCode(errFetchSessionNotFound)
		return ready(resp)
	}
	img := b.meta.Image()
	// the leader-side throttle is looked at only for a follower's fetch while its rate is set
	var leaderRate int64
	if req.ReplicaID >= 0 {
		leaderRate = img.LeaderThrottleRate()
	}
	var opening openWait
	var parts []fetchPartition
	resp.Topics = make([]kmsg.FetchResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		*st = kmsg.NewFetchResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.FetchResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := &st.Partitions[j]
			*sp = kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.RecordBatches = noRecords
			lastFetched := int32(-1)
			if req.Version >= 12 {
				lastFetched = rp.LastFetchedEpoch
			}
			r, err := b.replica(img, rt.Topic, rp.Partition, &opening)
			var diverging partition.EpochEnd
			readable := true
			if err == nil && req.ReplicaID >= 0 {
				diverging, readable, err = r.FollowerFetch(req.ReplicaID, rp.FetchOffset, rp.CurrentLeaderEpoch, lastFetched)
			} else if err == nil {
				if err = r.CheckLeader(rp.CurrentLeaderEpoch); err == nil {
					diverging, readable = r.CheckDivergence(rp.FetchOffset, lastFetched)
				}
			}
			switch {
			case errors.Is(err, storage.ErrOffsetOutOfRange):
				sp.ErrorCode = b.errorCode(err)
				sp.HighWatermark, sp.LogStartOffset = r.HighWatermark(), r.LogStartOffset()
				sp.LastStableOffset = r.LastStableOffset()
				continue
			case err != nil:
				sp.ErrorCode = b.errorCode(err)
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
				continue
			case !readable:
				sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset = diverging.Epoch, diverging.EndOffset
				sp.HighWatermark, sp.LogStartOffset = r.HighWatermark(), r.LogStartOffset()
				sp.LastStableOffset = r.LastStableOffset()
				continue
			}
			parts = append(parts, fetchPartition{out: sp, topic: i, partition: j, replica: r, offset: rp.FetchOffset,
				maxBytes: rp.PartitionMaxBytes, toLogEnd: req.ReplicaID >= 0,
				throttled: leaderRate > 0 && b.leaderThrottled(img, rt.Topic, rp.Partition, req.ReplicaID)})
		}
	}
	if len(parts) == 0 {
		return ready(resp)
	}
	wait := min(time.Duration(max(req.MaxWaitMillis, 0))*time.Millisecond, maxFetchWait)
	deadline := b.clock.After(wait)
	f := &fetcher{
		parts:         parts,
		minBytes:      int(req.MinBytes),
		maxBytes:      int(req.MaxBytes),
		committedOnly: req.IsolationLevel == isolationReadCommitted,
		clock:         b.clock,
		throttle:      &b.leaderThrottle,
		throttleRate:  leaderRate,
	}
	return func(ctx context.Context) kmsg.Response {
		f.sections = wire.TakesSections(ctx)
		f.run(ctx, deadline, b.draining)
		addReplyTime(ctx, f.reading)
		for _, p := range f.parts {
			if p.throttled {
				f.throttle.Take(sentBytes(p))
			}
			if p.section != nil {
				wire.AttachSection(ctx, p.topic, p.partition, p.section)
			}
		}
		return resp
	}
}

// leaderThrottled reports whether this node sends follower its copy of topic's partition p under
// leader.replication.throttled.rate, when that is set.
func (b *Broker) leaderThrottled(img *controller.Image, topic string, p, follower int32) bool {
	t, ok := img.Topic(topic)
	return ok && img.LeaderThrottled(t, p, b.nodeID, follower)
}

// sentBytes is the record bytes p's answer carries.
func sentBytes(p fetchPartition) int {
	if p.section != nil {
		return p.section.Len()
	}
	return len(p.out.RecordBatches)
}

// fetcher reads the partitions of one fetch, parked until enough is readable.
type fetcher struct {
	parts         []fetchPartition
	minBytes      int
	maxBytes      int
	committedOnly bool
	clock         Clock
	// reading is the time spent reading, without the waits between reads: the fetch's handler time
	// for its request_percentage quota (quota.go).
	reading time.Duration
	// sections says the records are left in the log's files (storage.Section) for the connection's
	// writer to send from there, rather than copied into the response (docs/storage.md, "Zero-copy reads").
	sections bool
	// throttle is the node's leader-side bucket, refilled at throttleRate, for the throttled
	// partitions: each read sends them at most what it grants, nothing while it is in debt, and
	// the answer takes what they carry.
	throttle     *partition.Bucket
	throttleRate int64
	// heldBack is set when the last read left out a throttled partition for the bucket's debt.
	heldBack bool
}

// run fills the response: it reads once, and while fewer than minBytes are readable it waits for a
// watched high watermark to move (or, with a throttled partition held back, for the bucket to
// refill), then reads again, until the deadline passes, the broker drains or ctx ends.
func (f *fetcher) run(ctx context.Context, deadline <-chan time.Time, draining <-chan struct{}) {
	if f.read() >= f.minBytes {
		return
	}
	wake := make(chan struct{}, 1)
	for _, p := range f.parts {
		stop := p.replica.Watch(wake)
		defer stop()
	}
	for {
		// Data may have arrived between the first read and the watches.
		if f.read() >= f.minBytes {
			return
		}
		var refilled <-chan time.Time
		if f.heldBack {
			refilled = f.clock.After(max(f.throttle.Wait(), time.Millisecond))
		}
		select {
		case <-wake:
		case <-refilled:
		case <-deadline:
			f.read()
			return
		case <-draining:
			f.read()
			return
		case <-ctx.Done():
			return
		}
	}
}

// read reads every partition afresh and returns the record bytes gathered, adding the time it took
// to f.reading.
func (f *fetcher) read() int {
	start := f.clock.Now()
	n := f.readAll()
	f.reading += f.clock.Now().Sub(start)
	return n
}

// readAll reads every partition afresh and returns the record bytes gathered. The first partition
// with data gets at least one whole batch even past the limits (as Kafka does, so that a batch larger
// than the limits can still be consumed); later ones get only what fits in the response's remaining
// room.
func (f *fetcher) readAll() int {
	total := 0
	f.heldBack = false
	for i := range f.parts {
		p := &f.parts[i]
		sp := p.out
		sp.RecordBatches = noRecords
		sp.ErrorCode = 0
		if p.section != nil {
			p.section.Release()
			p.section = nil
		}
		// read_committed lists the aborted transactions of what it returns: none is an empty list, as
		// Kafka answers; read_uncommitted gives null.
		sp.AbortedTransactions = nil
		if f.committedOnly {
			sp.AbortedTransactions = abortedTransactions(nil)
		}
		room := min(int(p.maxBytes), f.maxBytes-total)
		held := false
		if p.throttled {
			grant := f.throttle.Grant(f.clock.Now(), f.throttleRate)
			held = grant <= 0 && f.throttleRate > 0
			f.heldBack = f.heldBack || held
			room = min(room, int(min(max(grant, partition.ThrottleChunkMin), 1<<30)))
		}
		if p.maxBytes <= 0 || (total > 0 && room <= 0) || held {
			r := p.replica
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = r.HighWatermark(), r.LastStableOffset(), r.LogStartOffset()
			continue
		}
		res, err := f.readPartition(p, max(room, 1))
		sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = res.HighWatermark, res.LastStableOffset, res.LogStartOffset
		if err != nil {
			sp.ErrorCode = errorCode(err)
			if !errors.Is(err, storage.ErrOffsetOutOfRange) {
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			}
			continue
		}
		n := len(res.Records)
		if res.Section != nil {
			n = res.Section.Len()
		}
		if total > 0 && n > room {
			if res.Section != nil {
				res.Section.Release()
			}
			continue
		}
		if n > 0 {
			sp.RecordBatches = res.Records
			p.section = res.Section
			if f.committedOnly {
				sp.AbortedTransactions = abortedTransactions(res.Aborted)
			}
		}
		total += n
	}
	return total
}

// readPartition reads p: a follower's fetch up to the log end, a consumer's up to the high watermark
// (or the last stable offset), into a Section when the connection takes them.
func (f *fetcher) readPartition(p *fetchPartition, maxBytes int) (partition.ReadResult, error) {
	switch {
	case p.toLogEnd && f.sections:
		return p.replica.ReadReplicaSection(p.offset, maxBytes)
	case p.toLogEnd:
		return p.replica.ReadReplica(p.offset, maxBytes)
	case f.sections:
		return p.replica.ReadSection(p.offset, maxBytes, f.committedOnly)
	default:
		return p.replica.Read(p.offset, maxBytes, f.committedOnly)
	}
}

// abortedTransactions is a read's aborted transactions as a read_committed Fetch lists them: the
// client drops each producer's batches from FirstOffset up to its ABORT marker.
func abortedTransactions(as []partition.AbortedTxn) []kmsg.FetchResponseTopicPartitionAbortedTransaction {
	out := make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, 0, len(as))
	for _, a := range as {
		t := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		t.ProducerID, t.FirstOffset = a.ProducerID, a.FirstOffset
		out = append(out, t)
	}
	return out
}
