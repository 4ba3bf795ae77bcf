package api

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/partition"
)

// offsetForLeaderEpoch answers OffsetForLeaderEpoch (key 23) on a partition's leader, for followers
// about to truncate and for clients validating their position: the largest epoch at or below the one
// asked and the offset where it ends (KIP-101, KIP-279, KIP-320). The CurrentLeaderEpoch (v2+) is
// checked; a replica that does not lead answers NOT_LEADER_OR_FOLLOWER.
func (b *Broker) offsetForLeaderEpoch(req *kmsg.OffsetForLeaderEpochRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	img := b.meta.Image()
	var opening openWait
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			current := int32(-1)
			if req.Version >= 2 {
				current = rp.CurrentLeaderEpoch
			}
			r, err := b.replica(img, rt.Topic, rp.Partition, &opening)
			if err == nil {
				var end partition.EpochEnd
				end, err = r.LeaderEndOffsetForEpoch(current, rp.LeaderEpoch)
				sp.LeaderEpoch, sp.EndOffset = end.Epoch, end.EndOffset
			}
			if err != nil {
				sp.ErrorCode = b.errorCode(err)
				sp.LeaderEpoch, sp.EndOffset = -1, -1
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
