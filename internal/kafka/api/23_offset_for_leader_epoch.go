package api

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// offsetForLeaderEpoch answers OffsetForLeaderEpoch (key 23): for each partition, the largest epoch
// at or below the one asked and the offset where it ends (KIP-101, KIP-320).
func (b *Broker) offsetForLeaderEpoch(req *kmsg.OffsetForLeaderEpochRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	img := b.meta.Image()
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			r, err := b.replica(img, rt.Topic, rp.Partition)
			if err == nil && req.Version >= 2 {
				err = checkLeaderEpoch(r, rp.CurrentLeaderEpoch)
			}
			if err != nil {
				sp.ErrorCode = b.errorCode(err)
				sp.LeaderEpoch, sp.EndOffset = -1, -1
			} else {
				sp.LeaderEpoch, sp.EndOffset = r.EndOffsetForEpoch(rp.LeaderEpoch)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
