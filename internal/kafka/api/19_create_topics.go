package api

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
)

// createTopics answers CreateTopics (key 19). Each topic is created, or with ValidateOnly only
// checked, on its own; a name given twice fails every occurrence with INVALID_REQUEST.
func (b *Broker) createTopics(ctx context.Context, req *kmsg.CreateTopicsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := make(map[string]int, len(req.Topics))
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	created := false
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		var t *controller.Topic
		var err error
		if seen[rt.Topic] > 1 {
			err = fmt.Errorf("%w: topic %q", errDuplicateResource, rt.Topic)
		} else {
			t, err = b.createTopic(ctx, rt, req.ValidateOnly)
		}
		if err != nil {
			st.ErrorCode, st.ErrorMessage = errorCode(err), errorMessage(err)
			resp.Topics = append(resp.Topics, st)
			continue
		}
		created = created || !req.ValidateOnly
		b.describeCreated(&st, t)
		resp.Topics = append(resp.Topics, st)
	}
	if created {
		b.reconcile()
	}
	return resp
}

// createTopic checks one topic's request fields and creates (or validates) it.
func (b *Broker) createTopic(ctx context.Context, rt *kmsg.CreateTopicsRequestTopic, validateOnly bool) (*controller.Topic, error) {
	img := b.meta.Image()
	partitions := rt.NumPartitions
	if len(rt.ReplicaAssignment) > 0 {
		if rt.NumPartitions != -1 || rt.ReplicationFactor != -1 {
			return nil, fmt.Errorf("%w: replica assignment with a partition count or replication factor", errInvalidRequest)
		}
		if err := b.checkAssignment(rt.ReplicaAssignment); err != nil {
			return nil, err
		}
		partitions = int32(len(rt.ReplicaAssignment))
	} else if err := img.CheckReplicationFactor(rt.ReplicationFactor); err != nil {
		return nil, err
	}
	configs := make(map[string]string, len(rt.Configs))
	for _, c := range rt.Configs {
		if c.Value == nil {
			continue
		}
		configs[c.Name] = *c.Value
	}
	return b.meta.CreateTopic(ctx, rt.Topic, partitions, configs, validateOnly)
}

// checkAssignment accepts a manual assignment only if it numbers partitions 0..n-1 and places each
// on this node alone, the only placement a single node has.
func (b *Broker) checkAssignment(as []kmsg.CreateTopicsRequestTopicReplicaAssignment) error {
	seen := make(map[int32]bool, len(as))
	for _, a := range as {
		if a.Partition < 0 || int(a.Partition) >= len(as) || seen[a.Partition] {
			return fmt.Errorf("%w: partition %d in the assignment", errInvalidReplicaAssignment, a.Partition)
		}
		seen[a.Partition] = true
		if len(a.Replicas) != 1 || a.Replicas[0] != b.nodeID {
			return fmt.Errorf("%w: partition %d assigned to %v", errInvalidReplicaAssignment, a.Partition, a.Replicas)
		}
	}
	return nil
}

// describeCreated fills the v5+ fields of a created topic: its id, counts and resolved configs.
func (b *Broker) describeCreated(st *kmsg.CreateTopicsResponseTopic, t *controller.Topic) {
	st.TopicID = t.ID
	st.NumPartitions = t.Partitions
	st.ReplicationFactor = 1
	img := b.meta.Image()
	if cur, ok := img.Topic(t.Name); !ok || cur.ID != t.ID {
		// Validated only (or deleted meanwhile): describe it on the image it would have made.
		next, err := controller.Apply(img, controller.CreateTopic{Name: t.Name, ID: t.ID, Partitions: t.Partitions, Configs: t.Configs})
		if err != nil {
			return
		}
		img = next
	}
	entries, err := img.DescribeTopicConfigs(t.Name)
	if err != nil {
		return
	}
	for _, e := range entries {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name = e.Name
		v := e.Value
		c.Value = &v
		c.ReadOnly = e.ReadOnly
		c.Source = int8(configSource(e.Source))
		c.IsSensitive = e.Sensitive
		st.Configs = append(st.Configs, c)
	}
}
