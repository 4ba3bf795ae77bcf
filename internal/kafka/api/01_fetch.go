package api

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

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
	out      *kmsg.FetchResponseTopicPartition
	replica  *partition.Replica
	offset   int64
	maxBytes int32
	// toLogEnd is set for a follower's fetch: it reads up to the log end, not the high watermark.
	toLogEnd bool
}

// fetch answers Fetch (key 1). Partitions that cannot be read (unknown, not led here, fenced epoch,
// diverging) are answered in Handle; the Reply reads the others and, while fewer than MinBytes are
// readable, parks until a replica moves (Replica.Watch) or MaxWaitMillis passes. A fetch with a
// ReplicaID is a follower's (docs/replication.md): the leader records its fetch offset as its log end
// and serves up to the log end. Fetch sessions are declined: the response's SessionID is always 0.
func (b *Broker) fetch(req *kmsg.FetchRequest) wire.Reply {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if req.Version >= 7 && req.SessionID != 0 {
		resp.ErrorCode = errorCode(errFetchSessionNotFound)
		return ready(resp)
	}
	img := b.meta.Image()
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
			parts = append(parts, fetchPartition{out: sp, replica: r, offset: rp.FetchOffset,
				maxBytes: rp.PartitionMaxBytes, toLogEnd: req.ReplicaID >= 0})
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
	}
	return func(ctx context.Context) kmsg.Response {
		f.run(ctx, deadline, b.draining)
		addReplyTime(ctx, f.reading)
		return resp
	}
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
}

// run fills the response: it reads once, and while fewer than minBytes are readable it waits for a
// watched high watermark to move, then reads again, until the deadline passes, the broker drains or
// ctx ends.
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
		select {
		case <-wake:
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
	for _, p := range f.parts {
		sp := p.out
		sp.RecordBatches = noRecords
		sp.ErrorCode = 0
		// read_committed lists the aborted transactions of what it returns: none is an empty list, as
		// Kafka answers; read_uncommitted gives null.
		sp.AbortedTransactions = nil
		if f.committedOnly {
			sp.AbortedTransactions = abortedTransactions(nil)
		}
		room := min(int(p.maxBytes), f.maxBytes-total)
		if p.maxBytes <= 0 || (total > 0 && room <= 0) {
			r := p.replica
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = r.HighWatermark(), r.LastStableOffset(), r.LogStartOffset()
			continue
		}
		var res partition.ReadResult
		var err error
		if p.toLogEnd {
			res, err = p.replica.ReadReplica(p.offset, max(room, 1))
		} else {
			res, err = p.replica.Read(p.offset, max(room, 1), f.committedOnly)
		}
		sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = res.HighWatermark, res.LastStableOffset, res.LogStartOffset
		if err != nil {
			sp.ErrorCode = errorCode(err)
			if !errors.Is(err, storage.ErrOffsetOutOfRange) {
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			}
			continue
		}
		if total > 0 && len(res.Records) > room {
			continue
		}
		if len(res.Records) > 0 {
			sp.RecordBatches = res.Records
			if f.committedOnly {
				sp.AbortedTransactions = abortedTransactions(res.Aborted)
			}
		}
		total += len(res.Records)
	}
	return total
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
