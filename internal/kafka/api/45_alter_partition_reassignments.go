package api

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
)

// alterPartitionReassignments answers AlterPartitionReassignments (key 45, KIP-455): each partition's
// move is started, replaced, or cancelled (null replicas) through the controller quorum, one
// ReassignPartition each (docs/reassignment.md). Apply's checks give the per-partition errors:
// UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (a broker that is not live, one named twice,
// fewer replicas than min.insync.replicas), NO_REASSIGNMENT_IN_PROGRESS; v1's
// AllowReplicationFactorChange=false refuses a change of the replica count with
// INVALID_REPLICATION_FACTOR. A partition named twice is INVALID_REQUEST.
func (b *Broker) alterPartitionReassignments(ctx context.Context, req *kmsg.AlterPartitionAssignmentsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	seen := map[controller.TopicPartition]int{}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			seen[controller.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}]++
		}
	}
	changed := false
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = rp.Partition
			var err error
			if seen[controller.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}] > 1 {
				err = fmt.Errorf("%w: %s-%d named twice", errDuplicateResource, rt.Topic, rp.Partition)
			} else {
				err = b.reassign(ctx, rt.Topic, rp, req.Version >= 1 && !req.AllowReplicationFactorChange)
			}
			if err != nil {
				sp.ErrorCode, sp.ErrorMessage = errorCode(err), errorMessage(err)
			} else {
				changed = true
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if changed {
		b.reconcile()
	}
	return resp
}

// reassign proposes one partition's move or cancel; sameCount refuses a target whose replica count
// differs from the partition's before its move.
func (b *Broker) reassign(ctx context.Context, topic string, rp kmsg.AlterPartitionAssignmentsRequestTopicPartition, sameCount bool) error {
	cmd := controller.ReassignPartition{Topic: topic, Partition: rp.Partition, Replicas: rp.Replicas, Cancel: rp.Replicas == nil}
	if sameCount && !cmd.Cancel {
		if t, ok := b.meta.Image().Topic(topic); ok {
			if st, ok := t.Partition(rp.Partition); ok && len(st.Replicas)-len(st.AddingReplicas) != len(rp.Replicas) {
				return fmt.Errorf("%w: %s-%d has %d replicas, asked for %d without a replication factor change",
					controller.ErrInvalidReplication, topic, rp.Partition, len(st.Replicas)-len(st.AddingReplicas), len(rp.Replicas))
			}
		}
	}
	return b.meta.ReassignPartition(ctx, cmd)
}
