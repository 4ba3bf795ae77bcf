package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/txn"
)

// codecZstd is the batch attribute codec for zstd, which Produce accepts from v7.
const codecZstd = 4

// firstZstdProduceVersion is the first Produce version that may carry zstd batches.
const firstZstdProduceVersion = 7

// firstImplicitAddProduceVersion is the first Produce version of TV2 (KIP-890 part 2): the leader adds
// the partition to the transaction itself.
const firstImplicitAddProduceVersion = 12

// pendingAppend is one partition's append of a produce request: the wait for its acks level and where
// its result goes.
type pendingAppend struct {
	wait func(context.Context) error
	out  *kmsg.ProduceResponseTopicPartition
}

// produce answers Produce (key 0). Every partition's batch is appended in Handle, in request order,
// on the partition's leader (NOT_LEADER_OR_FOLLOWER elsewhere; NOT_ENOUGH_REPLICAS for acks -1 with
// the ISR below min.insync.replicas). A transactional batch opens or continues its producer's
// transaction in the partition (docs/transactions.md, "Partition state": INVALID_TXN_STATE for a
// non-transactional batch while it is open, INVALID_PRODUCER_EPOCH for a fenced epoch). Before the
// first batch of a transaction in a partition, the leader asks the transaction's coordinator whether
// the partition is in it (KIP-890 part 1, unless disabled): when not, nothing is written and the
// partition gets INVALID_TXN_STATE (TRANSACTION_ABORTABLE from v11); a coordinator that cannot answer
// yet gives NOT_ENOUGH_REPLICAS, which producers retry. From v12 (TV2) the leader adds the partition to
// the transaction instead of asking, retrying while the coordinator answers CONCURRENT_TRANSACTIONS;
// v11 and below always need the client's own AddPartitionsToTxn, whatever the cluster's transaction
// version. The Reply waits for the acks level (docs/replication.md): acks 1
// until the leader's append is durable under its log's flush policy, acks -1 until the high
// watermark covers the batch, both at most the request's timeout when set (REQUEST_TIMED_OUT); acks 0 is
// answered with nothing.
//
// The batches alias the request's frame, a buffer the wire reuses once the Reply was called
// (wire.Request.Body). Every append is finished when Handle returns (the log writes the batch to its
// file, which copies it, and a recompressed batch is a new buffer), and the Reply and the waits it calls
// hold offsets only, never the batch.
func (b *Broker) produce(ctx context.Context, req *kmsg.ProduceRequest) wire.Reply {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	var reqErr error
	switch {
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		reqErr = fmt.Errorf("%w: %d", errInvalidRequiredAcks, req.Acks)
	}
	n := 0
	for i := range req.Topics {
		n += len(req.Topics[i].Partitions)
	}
	waits := make([]pendingAppend, 0, n)
	var opening openWait
	if n > 1 {
		// the partitions' syncs start together once all are appended (storage.Syncer.Hold)
		release := b.replicas.HoldSync()
		defer release()
	}
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		*st = kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := &st.Partitions[j]
			*sp = kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			err := reqErr
			var wait func(context.Context) error
			if err == nil {
				wait, err = b.appendBatch(ctx, req, rt.Topic, sp, rp.Records, &opening)
			}
			if err != nil {
				b.failPartition(sp, produceError(req.Version, err))
				continue
			}
			waits = append(waits, pendingAppend{wait: wait, out: sp})
		}
	}
	if req.Acks == 0 {
		return func(context.Context) kmsg.Response { return nil }
	}
	timeout := time.Duration(max(req.TimeoutMillis, 0)) * time.Millisecond
	return func(ctx context.Context) kmsg.Response {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		if timeout > 0 {
			expired := b.clock.After(timeout)
			go func() {
				select {
				case <-expired:
					cancel()
				case <-ctx.Done():
				}
			}()
		}
		for _, w := range waits {
			if err := w.wait(ctx); err != nil {
				b.failPartition(w.out, err)
			}
		}
		return resp
	}
}

// ProduceHere serves req, a Produce from the node itself (its HTTP API's publishes, dead letters,
// delay topics' releases at a partition it leads), as the Kafka listener serves a client's, at acks=all: every check, the same append and the same wait, without the
// ACLs and quotas of a client's connection, since the caller authorizes its own callers. It returns
// once every partition is answered; the batches may be reused then.
func (b *Broker) ProduceHere(ctx context.Context, req *kmsg.ProduceRequest) *kmsg.ProduceResponse {
	req.Acks = -1
	return b.produce(ctx, req)(ctx).(*kmsg.ProduceResponse)
}

// appendBatch checks the one batch of a partition, conforms it to the topic's produce configs
// (conformBatch: the timestamp window, compression.type), checks its weir.* delivery headers
// (checkDelivery) and appends it, filling sp's offsets. It returns the function that waits for the
// acks level.
func (b *Broker) appendBatch(ctx context.Context, req *kmsg.ProduceRequest, topic string, sp *kmsg.ProduceResponseTopicPartition, batch []byte, opening *openWait) (func(context.Context) error, error) {
	img := b.meta.Image()
	if _, ok := img.Topic(topic); !ok && img.AutoCreateTopics() {
		if _, err := b.autoCreate(ctx, topic, nil); err != nil {
			return nil, err
		}
		img = b.meta.Image()
	}
	r, err := b.replica(img, topic, sp.Partition, opening)
	if err != nil {
		return nil, err
	}
	checked, err := checkProducedBatch(req.Version, batch)
	if err != nil {
		return nil, err
	}
	t, _ := img.Topic(topic)
	pc := img.ProduceConfigOn(t, b.nodeID)
	if checked, err = b.conformBatch(checked, pc); err != nil {
		return nil, err
	}
	if err := checkDelivery(checked, pc, b.clock); err != nil {
		return nil, err
	}
	level := partition.AcksLeader
	if req.Acks == -1 {
		level = partition.AcksAll
	}
	var app partition.Appended
	var wait func(context.Context) error
	if h := checked.Header; h.Transactional() && (b.verifyTxn || req.Version >= firstImplicitAddProduceVersion) {
		id := deref(req.TransactionID)
		if id == "" {
			return nil, errTransactionalIDRequired
		}
		q := txnOf{b: b, id: id, p: txn.ProducerIDEpoch{ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch}}
		tp := txn.TopicPartition{Topic: topic, Partition: sp.Partition}
		ask := func(ctx context.Context) error { return q.verify(ctx, tp) }
		if req.Version >= firstImplicitAddProduceVersion {
			addWait := time.Duration(req.TimeoutMillis) * time.Millisecond
			if addWait <= 0 {
				addWait = addWaitMax
			}
			ask = func(ctx context.Context) error { return q.add(ctx, tp, addWait) }
		}
		app, wait, err = r.AppendTxn(ctx, checked, level, ask)
	} else {
		app, wait, err = r.AppendAcks(checked, level)
	}
	if err != nil {
		return nil, err
	}
	sp.BaseOffset = app.BaseOffset
	sp.LogAppendTime = app.LogAppendTime
	sp.LogStartOffset = app.LogStartOffset
	return wait, nil
}

// checkProducedBatch validates the batch (once for the whole produce path: framing and CRC) and refuses
// what a client may not send.
func checkProducedBatch(version int16, batch []byte) (record.Checked, error) {
	c, err := record.Check(batch)
	if err != nil {
		if h, herr := record.ParseHeader(batch); herr == nil && h.Size() < len(batch) {
			return record.Checked{}, errMultipleBatches
		}
		return record.Checked{}, err
	}
	h := c.Header
	switch {
	case h.Control():
		err = fmt.Errorf("%w: clients may not send control batches", record.ErrInvalidRecord)
	case h.Transactional() && h.ProducerID < 0:
		err = fmt.Errorf("%w: a transactional batch without a producer id", record.ErrInvalidRecord)
	case h.LogAppendTime():
		err = errInvalidTimestamp
	case h.Compression() == codecZstd && version < firstZstdProduceVersion:
		err = errUnsupportedCompression
	case h.ProducerID >= 0 && h.BaseSequence < 0:
		err = fmt.Errorf("%w: producer id %d with sequence %d", record.ErrInvalidRecord, h.ProducerID, h.BaseSequence)
	}
	return c, err
}

// produceError is err as a Produce of version answers it: a partition that the coordinator says is not
// in the transaction is TRANSACTION_ABORTABLE for v11+, which know that code, INVALID_TXN_STATE before.
func produceError(version int16, err error) error {
	if version >= 11 && errors.Is(err, errNotInTransaction) {
		return fmt.Errorf("%w: %w", errTransactionAbortable, err)
	}
	return err
}

// failPartition records err as a partition's result.
func (b *Broker) failPartition(sp *kmsg.ProduceResponseTopicPartition, err error) {
	sp.ErrorCode = b.errorCode(err)
	sp.ErrorMessage = errorMessage(err)
	sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
}
