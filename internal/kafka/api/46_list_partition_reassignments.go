package api

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
)

// listPartitionReassignments answers ListPartitionReassignments (key 46) from this node's image: every
// moving partition (null topics), or those of the named partitions that are moving, with the full
// replica set and the adding and removing replicas (docs/reassignment.md). Partitions that do not
// exist or do not move are left out, as Kafka does.
func (b *Broker) listPartitionReassignments(req *kmsg.ListPartitionReassignmentsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	img := b.meta.Image()
	add := func(t *controller.Topic, parts []int32) {
		rt := kmsg.NewListPartitionReassignmentsResponseTopic()
		rt.Topic = t.Name
		for p, st := range t.States {
			if !st.Moving() || parts != nil && !slices.Contains(parts, int32(p)) {
				continue
			}
			rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			rp.Partition = int32(p)
			rp.Replicas = slices.Clone(st.Replicas)
			rp.AddingReplicas = append([]int32{}, st.AddingReplicas...)
			rp.RemovingReplicas = append([]int32{}, st.RemovingReplicas...)
			rt.Partitions = append(rt.Partitions, rp)
		}
		if len(rt.Partitions) > 0 {
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if req.Topics == nil {
		for _, name := range img.TopicNames() {
			t, _ := img.Topic(name)
			add(t, nil)
		}
		return resp
	}
	for _, rt := range req.Topics {
		if t, ok := img.Topic(rt.Topic); ok {
			add(t, append([]int32{}, rt.Partitions...))
		}
	}
	return resp
}
