package api

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/txn"
)

// addOffsetsToTxn answers AddOffsetsToTxn (key 25): the group's partition of __consumer_offsets (the
// group coordinator's placement, creating the topic on first use) joins the producer's transaction.
func (b *Broker) addOffsetsToTxn(req *kmsg.AddOffsetsToTxnRequest) wire.Reply {
	return func(ctx context.Context) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
		if b.groups == nil {
			resp.ErrorCode = errorCode(fmt.Errorf("%w: no group coordinator", group.ErrCoordinatorNotAvailable))
			return resp
		}
		p, err := b.groups.Locate(ctx, req.Group)
		if err == nil {
			pe := txn.ProducerIDEpoch{ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch}
			err = b.txn.AddPartitions(ctx, req.TransactionalID, pe, []txn.TopicPartition{{Topic: group.OffsetsTopic, Partition: p}})
		}
		resp.ErrorCode = fencedCode(b.errorCode(err), req.Version >= 2)
		return resp
	}
}
