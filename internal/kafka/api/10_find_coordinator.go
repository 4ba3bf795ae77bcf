package api

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/txn"
)

// FindCoordinator's key types: consumer groups and transactional ids.
const (
	coordinatorTypeGroup = 0
	coordinatorTypeTxn   = 1
)

// findCoordinator answers FindCoordinator (key 10): the leader of the __consumer_offsets partition
// that holds the group, or of the __transaction_state partition that holds the transactional id,
// creating the topic on first use; the leader is given at its address on listener.
func (b *Broker) findCoordinator(ctx context.Context, req *kmsg.FindCoordinatorRequest, listener string) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	node, host, port, err := b.coordinatorFor(ctx, req.CoordinatorType, req.CoordinatorKey, listener)
	if err != nil {
		resp.ErrorCode = b.errorCode(err)
		resp.ErrorMessage = errorMessage(err)
		resp.NodeID, resp.Port = -1, -1
		return resp
	}
	resp.NodeID, resp.Host, resp.Port = node, host, port
	return resp
}

func (b *Broker) coordinatorFor(ctx context.Context, keyType int8, key, listener string) (int32, string, int32, error) {
	topic := group.OffsetsTopic
	var p int32
	var err error
	switch {
	case keyType == coordinatorTypeGroup:
		p, err = b.groups.Locate(ctx, key)
	case keyType == coordinatorTypeTxn && b.txn != nil:
		topic = txn.StateTopic
		p, err = b.txn.Locate(ctx, key)
	default:
		return 0, "", 0, fmt.Errorf("%w: coordinator key type %d", errInvalidRequest, keyType)
	}
	if err != nil {
		return 0, "", 0, err
	}
	img := b.meta.Image()
	t, ok := img.Topic(topic)
	if !ok {
		return 0, "", 0, group.ErrCoordinatorNotAvailable
	}
	st, ok := t.Partition(p)
	if !ok || st.Leader == controller.NoLeader {
		return 0, "", 0, group.ErrCoordinatorNotAvailable
	}
	if st.Leader == b.nodeID {
		if !b.meta.LeaseHeld() {
			// The controller may have moved the offsets partition while this broker could not hear it.
			return 0, "", 0, group.ErrCoordinatorNotAvailable
		}
	}
	br, ok := img.Broker(st.Leader)
	if !ok {
		return 0, "", 0, group.ErrCoordinatorNotAvailable
	}
	host, port, ok := br.Endpoint(listener)
	if !ok {
		return 0, "", 0, group.ErrCoordinatorNotAvailable
	}
	return br.NodeID, host, port, nil
}
