package api

import (
	"context"
	"errors"
	"fmt"
	"slices"

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

// createTopic checks one topic's request fields and creates (or validates) it through the
// controller quorum: with a replication factor the controller places the replicas (distinct brokers,
// leaders spread); with a manual assignment the replicas are the ones given.
func (b *Broker) createTopic(ctx context.Context, rt *kmsg.CreateTopicsRequestTopic, validateOnly bool) (*controller.Topic, error) {
	img := b.meta.Image()
	spec := controller.TopicSpec{Name: rt.Topic, Partitions: rt.NumPartitions, ReplicationFactor: rt.ReplicationFactor}
	if len(rt.ReplicaAssignment) > 0 {
		if rt.NumPartitions != -1 || rt.ReplicationFactor != -1 {
			return nil, fmt.Errorf("%w: replica assignment with a partition count or replication factor", errInvalidRequest)
		}
		replicas, err := checkAssignment(img, rt.ReplicaAssignment)
		if err != nil {
			return nil, err
		}
		spec.Partitions, spec.Replicas = int32(len(replicas)), replicas
	} else if err := img.CheckReplicationFactor(rt.ReplicationFactor); err != nil {
		return nil, err
	}
	spec.Configs = make(map[string]string, len(rt.Configs))
	for _, c := range rt.Configs {
		if c.Value == nil {
			continue
		}
		spec.Configs[c.Name] = *c.Value
	}
	return b.meta.CreateTopicSpec(ctx, spec, validateOnly)
}

// checkAssignment accepts a manual assignment that numbers partitions 0..n-1 and gives each a
// non-empty list of distinct registered brokers, and returns it indexed by partition.
func checkAssignment(img *controller.Image, as []kmsg.CreateTopicsRequestTopicReplicaAssignment) ([][]int32, error) {
	out := make([][]int32, len(as))
	for _, a := range as {
		if a.Partition < 0 || int(a.Partition) >= len(as) || out[a.Partition] != nil {
			return nil, fmt.Errorf("%w: partition %d in the assignment", errInvalidReplicaAssignment, a.Partition)
		}
		if err := checkReplicaList(img, a.Replicas); err != nil {
			return nil, fmt.Errorf("%w: partition %d: %w", errInvalidReplicaAssignment, a.Partition, err)
		}
		out[a.Partition] = a.Replicas
	}
	return out, nil
}

// checkReplicaList reports a replica list that is empty, names a broker twice or one the image does
// not know.
func checkReplicaList(img *controller.Image, replicas []int32) error {
	if len(replicas) == 0 {
		return errors.New("no replicas")
	}
	for i, id := range replicas {
		if _, ok := img.Broker(id); !ok {
			return fmt.Errorf("broker %d is not registered", id)
		}
		if slices.Contains(replicas[:i], id) {
			return fmt.Errorf("broker %d named twice", id)
		}
	}
	return nil
}

// describeCreated fills the v5+ fields of a created topic: its id, counts and resolved configs.
func (b *Broker) describeCreated(st *kmsg.CreateTopicsResponseTopic, t *controller.Topic) {
	st.TopicID = t.ID
	st.NumPartitions = t.Partitions
	st.ReplicationFactor = t.ReplicationFactor()
	img := b.meta.Image()
	if cur, ok := img.Topic(t.Name); !ok || cur.ID != t.ID {
		// Validated only (or deleted meanwhile): describe it on the image it would have made.
		replicas := make([][]int32, len(t.States))
		for p, ps := range t.States {
			replicas[p] = ps.Replicas
		}
		next, err := controller.Apply(img, controller.CreateTopic{Name: t.Name, ID: t.ID, Partitions: t.Partitions, Configs: t.Configs, Replicas: replicas})
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
