package httpapi

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/record"
)

// Publishes in process.
//
// A publish's records get their partitions here: the one a record names, else murmur2 of its key as
// the Kafka clients' default partitioner hashes it, else one partition for all of the publish's records
// without a key, the next in turn from one publish to the next (as a sticky partitioner keeps a batch
// on one partition). The records of the partitions the image says this node leads become one batch a
// partition, in one Produce request served in process (Options.Produce): the node's own produce
// path, its checks, its group-commit round and its acks=all wait, without a client's encoding, a
// loopback hop and the node's decoding. Concurrent publishes are separate requests, so none waits for
// another's; a franz-go producer, idempotent, has one request in flight to a broker and puts the
// publishes that arrive meanwhile behind it. The batches are not compressed: the topic's
// compression.type decides what is stored, and under producer (its default) they are stored as they
// come, as the Java client's default (compression.type none) sends them.
//
// The other records, and those of a partition the node was found not to lead (its leadership moved
// since the image was read), go through the manual-partitioner client, which finds the leader and
// retries as any Kafka client does. A batch whose acks=all wait ended because the node lost the
// leadership is among those: it may then be written twice, when it had reached the new leader.

// hereScratch are the buffers of one publish's in-process request, reused from one publish to the
// next; scratch that grew past hereScratchMax is let go.
type hereScratch struct {
	order   []int // indices of the records appended here, sorted by partition
	body    []byte
	batches []byte
	spans   []int // where each partition's batch ends in batches
	hdrs    []record.RecordHeader
}

var herePool = sync.Pool{New: func() any { return new(hereScratch) }}

const hereScratchMax = 8 << 20

// hereProduceVersion is the Produce version of in-process requests: the last before 12, whose change
// (the leader adding a transactional batch's partition to its transaction) concerns none of them.
const hereProduceVersion = 11

// retryElsewhere are the errors of an in-process append that the Kafka client retries: the partition
// is not led here, or not ready to take the append.
var retryElsewhere = []error{kerr.NotLeaderForPartition, kerr.UnknownTopicOrPartition, kerr.LeaderNotAvailable, kerr.NotEnoughReplicas}

// produce produces recs, all to topic, a topic of partitions partitions (0 when it is yet to be
// auto-created), at acks=all and waits for each one's acknowledgement; manual says which name their
// partition. It returns each record's error; an acknowledged record has its partition, offset and
// timestamp set.
func (a *API) produce(ctx context.Context, topic string, partitions int32, recs []*kgo.Record, manual func(i int) bool) []error {
	errs := make([]error, len(recs))
	var wg sync.WaitGroup
	if partitions == 0 {
		for i := range recs {
			cl := a.cl
			if manual(i) {
				cl = a.manual
			}
			a.produceKafka(ctx, cl, recs, i, errs, &wg)
		}
		wg.Wait()
		return errs
	}
	sc := herePool.Get().(*hereScratch)
	defer sc.put()
	keyless := int32(a.keyless.Add(1) % uint32(partitions))
	now := time.Now()
	for i, rec := range recs {
		switch {
		case manual(i):
		case rec.Key != nil:
			rec.Partition = record.KeyPartition(rec.Key, partitions)
		default:
			rec.Partition = keyless
		}
		if rec.Timestamp.IsZero() {
			rec.Timestamp = now
		}
		if a.opts.Metadata.Leads(topic, rec.Partition) {
			sc.order = append(sc.order, i)
			continue
		}
		a.produceKafka(ctx, a.manual, recs, i, errs, &wg)
	}
	if len(sc.order) > 0 {
		for _, i := range a.produceHere(ctx, sc, topic, recs, errs) {
			a.produceKafka(ctx, a.manual, recs, i, errs, &wg)
		}
	}
	wg.Wait()
	return errs
}

// produceKafka produces recs[i] with cl, its error going to errs[i] once wg is done with it.
func (a *API) produceKafka(ctx context.Context, cl *kgo.Client, recs []*kgo.Record, i int, errs []error, wg *sync.WaitGroup) {
	wg.Add(1)
	cl.Produce(ctx, recs[i], func(_ *kgo.Record, err error) {
		errs[i] = err
		wg.Done()
	})
}

// produceHere appends the records sc.order lists, a batch a partition, in one in-process Produce
// request, and sets their offsets and errors. It returns the records to produce through the Kafka
// client instead: those of partitions answered with an error of retryElsewhere.
func (a *API) produceHere(ctx context.Context, sc *hereScratch, topic string, recs []*kgo.Record, errs []error) []int {
	slices.SortStableFunc(sc.order, func(i, j int) int { return int(recs[i].Partition) - int(recs[j].Partition) })
	req := &kmsg.ProduceRequest{Version: hereProduceVersion, Acks: -1, TimeoutMillis: int32(requestTimeout / time.Millisecond)}
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	for run := range partitionRuns(sc.order, recs) {
		sc.appendBatch(recs, run)
		sc.spans = append(sc.spans, len(sc.batches))
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = recs[run[0]].Partition
		rt.Partitions = append(rt.Partitions, rp)
	}
	from := 0
	for j := range rt.Partitions {
		rt.Partitions[j].Records = sc.batches[from:sc.spans[j]]
		from = sc.spans[j]
	}
	req.Topics = append(req.Topics, rt)
	// the answer has the request's shape: one topic, its partitions in the request's order
	parts := a.opts.Produce(ctx, req).Topics[0].Partitions
	var again []int
	j := 0
	for run := range partitionRuns(sc.order, recs) {
		out := parts[j]
		j++
		if err := kerr.ErrorForCode(out.ErrorCode); err != nil {
			if slices.ContainsFunc(retryElsewhere, func(e error) bool { return errors.Is(err, e) }) {
				again = append(again, run...)
				continue
			}
			for _, i := range run {
				errs[i] = err
			}
			continue
		}
		for k, i := range run {
			recs[i].Offset = out.BaseOffset + int64(k)
			if out.LogAppendTime >= 0 {
				recs[i].Timestamp = time.UnixMilli(out.LogAppendTime)
			}
		}
	}
	return again
}

// partitionRuns yields the runs of order, sorted by partition, whose records share a partition.
func partitionRuns(order []int, recs []*kgo.Record) func(yield func([]int) bool) {
	return func(yield func([]int) bool) {
		for len(order) > 0 {
			n := 1
			for n < len(order) && recs[order[n]].Partition == recs[order[0]].Partition {
				n++
			}
			if !yield(order[:n]) {
				return
			}
			order = order[n:]
		}
	}
}

// appendBatch appends to sc.batches one uncompressed batch of the records run lists, in their order.
func (sc *hereScratch) appendBatch(recs []*kgo.Record, run []int) {
	base, maxTS := recs[run[0]].Timestamp.UnixMilli(), int64(0)
	for _, i := range run {
		ts := recs[i].Timestamp.UnixMilli()
		base, maxTS = min(base, ts), max(maxTS, ts)
	}
	sc.body = sc.body[:0]
	for k, i := range run {
		rec := recs[i]
		sc.hdrs = sc.hdrs[:0]
		for _, h := range rec.Headers {
			sc.hdrs = append(sc.hdrs, record.RecordHeader{Key: []byte(h.Key), Value: h.Value})
		}
		sc.body = record.AppendRecord(sc.body, record.Record{
			TimestampDelta: rec.Timestamp.UnixMilli() - base, OffsetDelta: int32(k),
			Key: rec.Key, Value: rec.Value, Headers: sc.hdrs,
		})
	}
	sc.batches = record.AppendBatch(sc.batches, record.PlainHeader(len(run), base, maxTS), sc.body)
}

// put clears the scratch, which aliases the publish's records, and gives it back to the pool.
func (sc *hereScratch) put() {
	if cap(sc.body) > hereScratchMax || cap(sc.batches) > hereScratchMax {
		return
	}
	clear(sc.hdrs[:cap(sc.hdrs)])
	sc.order, sc.body, sc.batches, sc.spans, sc.hdrs = sc.order[:0], sc.body[:0], sc.batches[:0], sc.spans[:0], sc.hdrs[:0]
	herePool.Put(sc)
}
