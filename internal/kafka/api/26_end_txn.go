package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/txn"
)

// endTxn answers EndTxn (key 26) once PrepareCommit or PrepareAbort is committed; the coordinator
// writes the markers after. v5 is TV2's (KIP-890 part 2): the end bumps the producer's epoch (a new
// producer id once it is exhausted), and the answer carries the producer id and epoch of the client's
// next transaction.
func (b *Broker) endTxn(req *kmsg.EndTxnRequest) wire.Reply {
	return func(ctx context.Context) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		p := txn.ProducerIDEpoch{ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch}
		if req.Version < 5 {
			resp.ErrorCode = fencedCode(b.errorCode(b.txn.EndTxn(ctx, req.TransactionalID, p, req.Commit)), req.Version >= 2)
			return resp
		}
		next, err := b.txn.EndTxnV2(ctx, req.TransactionalID, p, req.Commit)
		resp.ErrorCode = b.errorCode(err)
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		if err == nil {
			resp.ProducerID, resp.ProducerEpoch = next.ProducerID, next.ProducerEpoch
		}
		return resp
	}
}
