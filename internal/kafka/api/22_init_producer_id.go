package api

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/txn"
)

// producerIDBlock is how many producer ids the broker reserves from the metadata store at a time, so
// that one durable metadata write serves many InitProducerId requests.
const producerIDBlock = 1000

// ProducerIDs hands out producer ids from blocks the metadata store reserved durably: an id is never
// given twice, across restarts too (ids left in a block at shutdown are skipped). One node has one,
// shared by the idempotent producers' InitProducerId and the transaction coordinator.
type ProducerIDs struct {
	meta *controller.Store
	// turn is held (a value sent) while taking an id; a channel rather than a mutex because refilling
	// waits for a durable metadata write, and a caller must be able to give up when its ctx ends.
	turn       chan struct{}
	next, stop int64
}

// NewProducerIDs returns the producer ids of a node whose metadata store is meta.
func NewProducerIDs(meta *controller.Store) *ProducerIDs {
	return &ProducerIDs{meta: meta, turn: make(chan struct{}, 1)}
}

// Take returns a fresh producer id, reserving a new block when the current one is used up.
func (p *ProducerIDs) Take(ctx context.Context) (int64, error) {
	select {
	case p.turn <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	defer func() { <-p.turn }()
	if p.next == p.stop {
		first, err := p.meta.AllocateProducerIDs(ctx, producerIDBlock)
		if err != nil {
			return 0, err
		}
		p.next, p.stop = first, first+producerIDBlock
	}
	id := p.next
	p.next++
	return id, nil
}

// initProducerID answers InitProducerId (key 22): an idempotent producer gets a new producer id at
// epoch 0; a transactional one goes to the transaction coordinator, which answers once the id's record
// is committed.
func (b *Broker) initProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) wire.Reply {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		if b.txn == nil {
			resp.ErrorCode = errorCode(errTransactionsUnsupported)
			return ready(resp)
		}
		return b.initTransactionalProducerID(req, resp)
	}
	id, err := b.pids.Take(ctx)
	if err != nil {
		resp.ErrorCode = b.errorCode(err)
		return ready(resp)
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return ready(resp)
}

func (b *Broker) initTransactionalProducerID(req *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) wire.Reply {
	current := txn.ProducerIDEpoch{ProducerID: txn.NoProducerID, ProducerEpoch: -1}
	if req.Version >= 3 && req.ProducerID >= 0 {
		current = txn.ProducerIDEpoch{ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch}
	}
	timeout := time.Duration(req.TransactionTimeoutMillis) * time.Millisecond
	return func(ctx context.Context) kmsg.Response {
		p, err := b.txn.InitProducerID(ctx, *req.TransactionalID, timeout, current)
		if err != nil {
			resp.ErrorCode = fencedCode(b.errorCode(err), req.Version >= 4)
			return resp
		}
		resp.ProducerID, resp.ProducerEpoch = p.ProducerID, p.ProducerEpoch
		return resp
	}
}

// fencedCode is code as a request version that knows PRODUCER_FENCED (KIP-588) is answered; older
// versions get INVALID_PRODUCER_EPOCH instead, as Kafka answers them.
func fencedCode(code int16, knowsFenced bool) int16 {
	if code == kerr.ProducerFenced.Code && !knowsFenced {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}
