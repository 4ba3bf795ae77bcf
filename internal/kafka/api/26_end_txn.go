package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/txn"
)

// endTxn answers EndTxn (key 26) once PrepareCommit or PrepareAbort is committed; the coordinator
// writes the markers after.
func (b *Broker) endTxn(req *kmsg.EndTxnRequest) wire.Reply {
	return func(ctx context.Context) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		p := txn.ProducerIDEpoch{ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch}
		resp.ErrorCode = fencedCode(b.errorCode(b.txn.EndTxn(ctx, req.TransactionalID, p, req.Commit)), req.Version >= 2)
		return resp
	}
}
