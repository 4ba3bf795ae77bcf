package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/txn"
)

// addPartitionsToTxn answers AddPartitionsToTxn (key 24). v0-3 are the client's: the partitions join
// the producer's transaction once its record is committed. When a partition is unknown, it gets
// UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED, and nothing is added, as in Kafka.
// v4+ batch transactions, for partition leaders (addPartitionsToTxnBrokers).
func (b *Broker) addPartitionsToTxn(req *kmsg.AddPartitionsToTxnRequest) wire.Reply {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version >= 4 {
		return func(ctx context.Context) kmsg.Response {
			b.addPartitionsToTxnBrokers(ctx, req, resp)
			return resp
		}
	}
	img := b.meta.Image()
	var parts []txn.TopicPartition
	var slots []*int16
	unknown := false
	resp.Topics = make([]kmsg.AddPartitionsToTxnResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		st := &resp.Topics[i]
		*st = kmsg.NewAddPartitionsToTxnResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.AddPartitionsToTxnResponseTopicPartition, len(rt.Partitions))
		for j, p := range rt.Partitions {
			sp := &st.Partitions[j]
			*sp = kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			sp.Partition = p
			if !hasPartition(img, rt.Topic, p) {
				sp.ErrorCode = errorCode(errUnknownTopicOrPartition)
				unknown = true
				continue
			}
			parts = append(parts, txn.TopicPartition{Topic: rt.Topic, Partition: p})
			slots = append(slots, &sp.ErrorCode)
		}
	}
	if unknown {
		for _, code := range slots {
			*code = kerr.OperationNotAttempted.Code
		}
		return ready(resp)
	}
	return func(ctx context.Context) kmsg.Response {
		if len(parts) == 0 {
			return resp
		}
		p := txn.ProducerIDEpoch{ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch}
		code := fencedCode(b.errorCode(b.txn.AddPartitions(ctx, req.TransactionalID, p, parts)), req.Version >= 2)
		for _, c := range slots {
			*c = code
		}
		return resp
	}
}
