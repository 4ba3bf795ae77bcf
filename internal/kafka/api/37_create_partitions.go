package api

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// createPartitions answers CreatePartitions (key 37): grows topics to the requested counts through
// the controller quorum, which places the new partitions at the topic's replication factor. A
// manual assignment is accepted only where it is the placement itself: every new partition on this
// node alone, in a cluster of this one broker.
func (b *Broker) createPartitions(ctx context.Context, req *kmsg.CreatePartitionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	seen := make(map[string]int, len(req.Topics))
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	grown := false
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		var err error
		switch {
		case seen[rt.Topic] > 1:
			err = fmt.Errorf("%w: topic %q", errDuplicateResource, rt.Topic)
		default:
			err = b.checkPartitionAssignment(rt.Assignment)
		}
		if err == nil {
			err = b.meta.CreatePartitions(ctx, rt.Topic, rt.Count, req.ValidateOnly)
		}
		if err != nil {
			st.ErrorCode, st.ErrorMessage = errorCode(err), errorMessage(err)
		} else {
			grown = grown || !req.ValidateOnly
		}
		resp.Topics = append(resp.Topics, st)
	}
	if grown {
		b.reconcile()
	}
	return resp
}

// checkPartitionAssignment accepts no assignment, or one that places every new partition on this
// node alone while it is the only registered broker (the one placement a single node has).
func (b *Broker) checkPartitionAssignment(as []kmsg.CreatePartitionsRequestTopicAssignment) error {
	if len(as) == 0 {
		return nil
	}
	if brokers := b.meta.Image().Brokers; len(brokers) != 1 || brokers[0].NodeID != b.nodeID {
		return fmt.Errorf("%w: manual placement of new partitions is not supported in a cluster", errInvalidReplicaAssignment)
	}
	for _, a := range as {
		if len(a.Replicas) != 1 || a.Replicas[0] != b.nodeID {
			return fmt.Errorf("%w: new partition assigned to %v", errInvalidReplicaAssignment, a.Replicas)
		}
	}
	return nil
}
