package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/kafka/wire"
)

// txnOffsetCommit answers TxnOffsetCommit (key 28): the offsets a transactional producer commits for a
// group inside its transaction. Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION; the rest go
// to the coordinator, which checks the member and generation when the request names them (v3+, KIP-447),
// writes the offsets as the producer's transactional batch (INVALID_PRODUCER_EPOCH for a fenced epoch)
// and answers once they are durable. They stay invisible to OffsetFetch until the transaction's COMMIT
// marker reaches the group's partition. The transactional id is not checked against the transaction
// coordinator, as in Kafka's TV1: the producer epoch fences zombies.
func (b *Broker) txnOffsetCommit(req *kmsg.TxnOffsetCommitRequest) wire.Reply {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	img := b.meta.Image()
	var offsets []group.OffsetCommit
	var slots []*kmsg.TxnOffsetCommitResponseTopicPartition
	resp.Topics = make([]kmsg.TxnOffsetCommitResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		st := &resp.Topics[i]
		*st = kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.TxnOffsetCommitResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			*sp = kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			if !hasPartition(img, rt.Topic, rp.Partition) {
				sp.ErrorCode = errorCode(errUnknownTopicOrPartition)
				continue
			}
			epoch := rp.LeaderEpoch
			if req.Version < 2 {
				epoch = -1
			}
			offsets = append(offsets, group.OffsetCommit{
				TopicPartition: group.TopicPartition{Topic: rt.Topic, Partition: rp.Partition},
				Offset:         rp.Offset,
				LeaderEpoch:    epoch,
				Metadata:       deref(rp.Metadata),
			})
			slots = append(slots, sp)
		}
	}
	who := group.CommitRequest{Generation: -1}
	if req.Version >= 3 {
		who = group.CommitRequest{MemberID: req.MemberID, InstanceID: deref(req.InstanceID), Generation: req.Generation}
	}
	return func(ctx context.Context) kmsg.Response {
		if len(offsets) == 0 {
			return resp
		}
		errs, err := b.groups.TxnCommit(ctx, req.Group, who, req.ProducerID, req.ProducerEpoch, offsets)
		for i, sp := range slots {
			if err != nil {
				sp.ErrorCode = b.errorCode(err)
			} else {
				sp.ErrorCode = b.errorCode(errs[i])
			}
		}
		return resp
	}
}
