package api

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/txn"
)

// txnOffsetCommit answers TxnOffsetCommit (key 28): the offsets a transactional producer commits for a
// group inside its transaction. Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION; the rest go
// to the coordinator, which checks the member and generation when the request names them (v3+, KIP-447),
// writes the offsets as the producer's transactional batch (INVALID_PRODUCER_EPOCH for a fenced epoch)
// and answers once they are durable. They stay invisible to OffsetFetch until the transaction's COMMIT
// marker reaches the group's partition. Up to v4 the client added the group's partition to its
// transaction itself (AddOffsetsToTxn) and the transactional id is not checked against the transaction
// coordinator, as in Kafka's TV1: the producer epoch fences zombies. v5 is TV2's (KIP-890 part 2):
// the group coordinator first adds the group's partition to the transaction, as a Produce v12's leader
// adds its partition.
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
		if req.Version >= 5 {
			if err := b.addGroupToTxn(ctx, req); err != nil {
				code := b.errorCode(err)
				for _, sp := range slots {
					sp.ErrorCode = code
				}
				return resp
			}
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

// addGroupToTxn adds the group's __consumer_offsets partition to the producer's transaction, the
// implicit AddOffsetsToTxn of TxnOffsetCommit v5.
func (b *Broker) addGroupToTxn(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) error {
	p, err := b.groups.Locate(ctx, req.Group)
	if err != nil {
		return err
	}
	q := txnOf{b: b, id: req.TransactionalID, p: txn.ProducerIDEpoch{ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch}}
	err = q.add(ctx, txn.TopicPartition{Topic: group.OffsetsTopic, Partition: p}, addWaitMax)
	if errors.Is(err, errCoordinatorBusy) {
		// The transaction coordinator cannot answer yet: an error this request's clients retry.
		return fmt.Errorf("%w: %v", group.ErrLoadInProgress, err)
	}
	return err
}
