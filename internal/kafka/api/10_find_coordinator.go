package api

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/sharestate"
	"github.com/weir-mq/weir/internal/txn"
)

// FindCoordinator's key types: consumer groups, transactional ids, and share-partitions (whose key is
// "group:topicId:partition", from v6).
const (
	coordinatorTypeGroup = 0
	coordinatorTypeTxn   = 1
	coordinatorTypeShare = 2
)

// findCoordinator answers FindCoordinator (key 10): the leader of the __consumer_offsets partition
// that holds the group, of the __transaction_state partition that holds the transactional id, or of
// the __share_group_state partition that holds the share-partition, creating the topic on first use;
// the leader is given at its address on listener. Up to v3 the request names one key; from v4 it
// names many, and each is answered on its own. deny, when not nil, is the authorizer's error code for
// a key (0: allowed).
func (b *Broker) findCoordinator(ctx context.Context, req *kmsg.FindCoordinatorRequest, listener string, deny func(key string) int16) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if req.Version < 4 {
		c := b.coordinatorOf(ctx, req, req.CoordinatorKey, listener, deny)
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port
		return resp
	}
	for _, key := range req.CoordinatorKeys {
		resp.Coordinators = append(resp.Coordinators, b.coordinatorOf(ctx, req, key, listener, deny))
	}
	return resp
}

// coordinatorOf answers one key of req: its coordinator, or the error; node -1 with an error.
// Share-partition keys came with v6.
func (b *Broker) coordinatorOf(ctx context.Context, req *kmsg.FindCoordinatorRequest, key, listener string, deny func(key string) int16) kmsg.FindCoordinatorResponseCoordinator {
	c := kmsg.NewFindCoordinatorResponseCoordinator()
	c.Key, c.NodeID, c.Port = key, -1, -1
	if deny != nil {
		if c.ErrorCode = deny(key); c.ErrorCode != 0 {
			return c
		}
	}
	if req.CoordinatorType == coordinatorTypeShare && req.Version < 6 {
		c.ErrorCode = kerr.InvalidRequest.Code
		c.ErrorMessage = kmsg.StringPtr("share-partition keys came with FindCoordinator v6")
		return c
	}
	node, host, port, err := b.coordinatorFor(ctx, req.CoordinatorType, key, listener)
	if err != nil {
		c.ErrorCode, c.ErrorMessage = b.errorCode(err), errorMessage(err)
		return c
	}
	c.NodeID, c.Host, c.Port = node, host, port
	return c
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
	case keyType == coordinatorTypeShare && b.shares != nil:
		sp, perr := sharestate.ParseSharePartition(key)
		if perr != nil {
			return 0, "", 0, fmt.Errorf("%w: %v", errInvalidRequest, perr)
		}
		topic = sharestate.StateTopic
		p, err = b.shares.store.coord.Locate(ctx, sp)
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
