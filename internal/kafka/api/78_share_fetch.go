package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/share"
	"github.com/weir-mq/weir/internal/sharestate"
)

// shareFetchMaxRecords is the records one ShareFetch acquires per request when it names no
// MaxRecords (franz-go's and Java's default).
const shareFetchMaxRecords = 500

// shareAcquireRecordLimit is ShareFetch's ShareAcquireMode record_limit (KIP-1206): MaxRecords is a
// strict limit. The other mode, batch_optimized (0, and the only one before v2), lets a fetch acquire
// past MaxRecords to the end of the last log batch it sends.
const shareAcquireRecordLimit = 1

// shareLimit is how much one ShareFetch acquires: up to records records, then, unless strict, the rest
// of the last log batch it sends, so that a client never decodes records it did not acquire.
type shareLimit struct {
	records int
	strict  bool
}

// shareReadChunk is how many bytes one read of a share fetch asks the log for; a fetch reads on until
// it has every batch its acquired ranges touch.
const shareReadChunk = 1 << 20

// shareFetch answers ShareFetch (key 78) at the leaders of the partitions it names. Handle applies the
// share session epoch (in request order); the Reply applies the acknowledgements riding on the request,
// then acquires records for the member across the session's partitions while their writes go on, and
// returns the batches that hold them with their acquired ranges once the acknowledgements are
// committed, parked while none is available until records arrive or MaxWaitMillis passes. Epoch -1
// closes the session and releases the member's records instead of fetching; so does the close of the
// connection that opened the session (conn's hook), for a client that went away without closing it.
func (b *Broker) shareFetch(req *kmsg.ShareFetchRequest, conn *wire.Session) wire.Reply {
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	if deref(req.GroupID) == "" || deref(req.MemberID) == "" {
		resp.ErrorCode = errorCode(errInvalidRequest)
		return ready(resp)
	}
	m := shareMember{group: *req.GroupID, member: *req.MemberID}
	var add, forget []shareTP
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			add = append(add, shareTP{topic: t.TopicID, partition: p.Partition})
		}
	}
	for _, t := range req.ForgottenTopicsData {
		for _, p := range t.Partitions {
			forget = append(forget, shareTP{topic: t.TopicID, partition: p})
		}
	}
	parts, opened, err := b.shares.session(m, req.ShareSessionEpoch, add, forget, true)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return ready(resp)
	}
	if opened != nil && conn != nil {
		conn.OnClose("share-session\x00"+m.group+"\x00"+m.member, func() { go b.shareConnClosed(m, opened) })
	}
	img := b.meta.Image()
	out := newShareFetchOut(resp)
	lock := b.shares.lockDuration(img, m.group)
	resp.AcquisitionLockTimeoutMillis = int32(lock / time.Millisecond)
	wait := min(time.Duration(max(req.MaxWaitMillis, 0))*time.Millisecond, maxFetchWait)
	deadline := b.clock.After(wait)
	limit := shareLimit{records: int(req.MaxRecords), strict: req.ShareAcquireMode == shareAcquireRecordLimit}
	if limit.records <= 0 {
		limit.records = shareFetchMaxRecords
	}
	return func(ctx context.Context) kmsg.Response {
		ctx, cancel := context.WithTimeout(ctx, shareOpWait)
		defer cancel()
		var acked []shareAcked
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				if len(p.AcknowledgementBatches) == 0 {
					continue
				}
				acked = append(acked, shareAcked{tp: shareTP{t.TopicID, p.Partition},
					acks: shareAcks(p.AcknowledgementBatches, func(a kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) (int64, int64, []int8) {
						return a.FirstOffset, a.LastOffset, a.AcknowledgeTypes
					})})
			}
		}
		for _, a := range acked {
			out.partition(a.tp.topic, a.tp.partition)
		}
		// The acquisitions go on while the acknowledgements are written; the response waits for both.
		wait := b.shareAcknowledgeAll(ctx, img, m, acked)
		switch {
		case req.ShareSessionEpoch == shareSessionFinal:
			b.shareRelease(ctx, img, m, parts)
		case !req.IsRenewAck:
			b.shareAcquire(ctx, img, m, parts, limit, out, deadline)
		}
		for i, err := range wait() {
			rp := out.partition(acked[i].tp.topic, acked[i].tp.partition)
			rp.AcknowledgeErrorCode, rp.AcknowledgeErrorMessage = b.errorCode(err), errorMessage(err)
		}
		return resp
	}
}

// shareFetchOut builds a ShareFetch response partition by partition.
type shareFetchOut struct {
	resp *kmsg.ShareFetchResponse
}

func newShareFetchOut(resp *kmsg.ShareFetchResponse) *shareFetchOut {
	return &shareFetchOut{resp: resp}
}

// partition returns the response's entry for the partition, adding it the first time.
func (o *shareFetchOut) partition(topic controller.TopicID, p int32) *kmsg.ShareFetchResponseTopicPartition {
	i := slices.IndexFunc(o.resp.Topics, func(t kmsg.ShareFetchResponseTopic) bool { return t.TopicID == topic })
	if i < 0 {
		t := kmsg.NewShareFetchResponseTopic()
		t.TopicID = topic
		o.resp.Topics = append(o.resp.Topics, t)
		i = len(o.resp.Topics) - 1
	}
	t := &o.resp.Topics[i]
	j := slices.IndexFunc(t.Partitions, func(rp kmsg.ShareFetchResponseTopicPartition) bool { return rp.Partition == p })
	if j < 0 {
		rp := kmsg.NewShareFetchResponseTopicPartition()
		rp.Partition = p
		rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
		rp.Records = noRecords
		t.Partitions = append(t.Partitions, rp)
		j = len(t.Partitions) - 1
	}
	return &t.Partitions[j]
}

// sharePartFor returns the owner of m's group's share-partition tp at its leader here.
func (b *Broker) sharePartFor(img *controller.Image, m shareMember, tp shareTP) (*sharePart, error) {
	t, ok := img.TopicByID(tp.topic)
	if !ok {
		return nil, errUnknownTopicID
	}
	var opening openWait
	r, err := b.replica(img, t.Name, tp.partition, &opening)
	if err != nil {
		return nil, err
	}
	if err := r.CheckLeader(-1); err != nil {
		return nil, err
	}
	return b.shares.part(img, sharestate.SharePartition{Group: m.group, TopicID: tp.topic, Partition: tp.partition}, r)
}

// shareAcknowledge hands m's acknowledgements of tp to its owner and returns once the owner has taken
// them; wait returns once they are committed.
func (b *Broker) shareAcknowledge(ctx context.Context, img *controller.Image, m shareMember, tp shareTP, acks []share.AckBatch) (wait func() error) {
	p, err := b.sharePartFor(img, m, tp)
	if err != nil {
		return func() error { return err }
	}
	return p.acknowledge(ctx, m.member, acks)
}

// shareAcked is a request's acknowledgements of one share-partition.
type shareAcked struct {
	tp   shareTP
	acks []share.AckBatch
}

// shareAcknowledgeAll hands the acknowledgements of every share-partition in acked to their owners and
// returns once each owner has taken them, so that what the request does next (its acquisitions) runs
// after them; wait returns their errors in acked's order once they are committed. Each owner writes its
// own state while the request goes on, and the writes meet in one group-commit round of the state
// topic's log.
func (b *Broker) shareAcknowledgeAll(ctx context.Context, img *controller.Image, m shareMember, acked []shareAcked) (wait func() []error) {
	waits := make([]func() error, len(acked))
	for i, a := range acked {
		waits[i] = b.shareAcknowledge(ctx, img, m, a.tp, a.acks)
	}
	return func() []error {
		errs := make([]error, len(acked))
		for i, w := range waits {
			errs[i] = w()
		}
		return errs
	}
}

// shareRelease hands back every record m holds in parts, at a session's close, the share-partitions
// at once as shareAcknowledgeAll does.
func (b *Broker) shareRelease(ctx context.Context, img *controller.Image, m shareMember, parts []shareTP) {
	var wg sync.WaitGroup
	for _, tp := range parts {
		if p, err := b.sharePartFor(img, m, tp); err == nil {
			wg.Go(func() { _ = p.releaseMember(ctx, m.member) })
		}
	}
	wg.Wait()
}

// shareConnClosed ends m's session ss when the connection that opened it closed with it still open,
// and releases the records m holds in its partitions, as epoch -1 would have: a consumer that crashed
// or lost its connection has its records offered to the others now rather than when their locks
// expire. A session m reopened since, here or over another connection, is left alone.
func (b *Broker) shareConnClosed(m shareMember, ss *shareSession) {
	parts, ok := b.shares.endSession(m, ss)
	if !ok || len(parts) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), shareOpWait)
	defer cancel()
	b.shareRelease(ctx, b.meta.Image(), m, parts)
}

// shareAcquire acquires records for m across parts, in the session's order, up to limit, and fills out
// with them; while none is available it parks until a partition's high watermark moves or one of its
// share-partitions releases records or makes room in its window (then tries again), the deadline
// passes, the broker drains or ctx ends. It watches each share-partition before it first tries it, so
// that no wake-up between a try and the wait is missed.
func (b *Broker) shareAcquire(ctx context.Context, img *controller.Image, m shareMember, parts []shareTP, limit shareLimit, out *shareFetchOut, deadline <-chan time.Time) {
	wake := make(chan struct{}, 1)
	watched := map[*sharePart]bool{}
	var stops []func()
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	for {
		got, served := 0, false
		for _, tp := range parts {
			if got >= limit.records {
				break
			}
			p, err := b.sharePartFor(img, m, tp)
			if err == nil {
				if !watched[p] {
					watched[p] = true
					stops = append(stops, p.replica.Watch(wake), p.watch(wake))
				}
				var n int
				n, err = b.shareAcquireOne(ctx, m, tp, p, shareLimit{records: limit.records - got, strict: limit.strict}, out)
				got += n
			}
			if err != nil {
				rp := out.partition(tp.topic, tp.partition)
				rp.ErrorCode, rp.ErrorMessage = b.errorCode(err), errorMessage(err)
				if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
					return
				}
				continue
			}
			served = true
		}
		if got > 0 || !served {
			return
		}
		select {
		case <-wake:
		case <-deadline:
			return
		case <-b.draining:
			return
		case <-ctx.Done():
			return
		}
	}
}

// shareAcquireOne acquires records of tp for m from its owner p up to limit and adds them, and the
// batches that hold them, to out. It returns how many records it acquired.
func (b *Broker) shareAcquireOne(ctx context.Context, m shareMember, tp shareTP, p *sharePart, limit shareLimit, out *shareFetchOut) (int, error) {
	fetchers := 0
	if p.set.cfg.KeyOrdered {
		fetchers = b.shares.fetchers(m.group, tp)
	}
	ranges, err := p.acquire(ctx, m.member, limit.records, fetchers)
	if err != nil || len(ranges) == 0 {
		return 0, err
	}
	last := ranges[len(ranges)-1].Last
	var batches []byte
	end := ranges[0].First
	for _, a := range ranges {
		// Ranges apart (records taken by priority or due time) are read apart: the batches between
		// them are not sent.
		if a.Last < end {
			continue
		}
		var more []byte
		if more, end, err = readShareBatches(p.replica, max(a.First, end), a.Last); err != nil {
			return 0, err
		}
		batches = append(batches, more...)
	}
	if batches == nil {
		batches = noRecords
	}
	if !limit.strict && end > last+1 {
		// The records acquired so far are the member's whatever happens here: a failed extension
		// (the owner stopped, ctx ended) only leaves the batch's tail unacquired.
		if more, err := p.acquireThrough(ctx, m.member, last+1, end-1); err == nil {
			ranges = appendRanges(ranges, more)
		}
	}
	rp := out.partition(tp.topic, tp.partition)
	rp.Records = batches
	n := 0
	for _, a := range ranges {
		ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
		ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = a.First, a.Last, a.DeliveryCount
		rp.AcquiredRecords = append(rp.AcquiredRecords, ar)
		n += int(a.Last - a.First + 1)
	}
	return n, nil
}

// appendRanges appends the acquired ranges more, which follow ranges, to ranges, joining the two that
// meet with the same delivery count.
func appendRanges(ranges, more []share.AcquiredRange) []share.AcquiredRange {
	if len(more) > 0 {
		k := len(ranges) - 1
		if r := ranges[k]; r.Last+1 == more[0].First && r.DeliveryCount == more[0].DeliveryCount {
			ranges[k].Last = more[0].Last
			more = more[1:]
		}
	}
	return append(ranges, more...)
}

// readShareBatches reads the whole batches of r that hold the offsets first through last, and returns
// them with the offset after the last of them (first when there are none).
func readShareBatches(r *partition.Replica, first, last int64) ([]byte, int64, error) {
	var out []byte
	end := first
	for off := first; off <= last; {
		res, err := r.Read(off, shareReadChunk, false)
		if err != nil {
			return nil, 0, err
		}
		if len(res.Records) == 0 {
			break
		}
		next := off
		for batch, err := range record.Batches(res.Records) {
			if err != nil {
				return nil, 0, fmt.Errorf("%w: %w", record.ErrCorrupt, err)
			}
			h, err := record.ParseHeader(batch)
			if err != nil {
				return nil, 0, err
			}
			if h.BaseOffset > last {
				break
			}
			out = append(out, batch...)
			next = h.NextOffset()
		}
		if next <= off {
			break
		}
		off, end = next, next
	}
	if out == nil {
		out = noRecords
	}
	return out, end, nil
}
