package api

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/partition"
)

// describeProducers answers DescribeProducers (key 61): for each partition this node leads, its active
// producers (those the producer state still holds) with their epoch, latest sequence and timestamp, the
// coordinator epoch of their latest marker and the first offset of their open transaction (-1: none).
// A partition it does not lead gets NOT_LEADER_OR_FOLLOWER, an unknown one UNKNOWN_TOPIC_OR_PARTITION.
func (b *Broker) describeProducers(req *kmsg.DescribeProducersRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	img := b.meta.Image()
	var opening openWait
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = p
			r, err := b.replica(img, rt.Topic, p, &opening)
			if err == nil {
				err = r.CheckLeader(-1)
			}
			var ps []partition.ProducerState
			if err == nil {
				ps, err = r.Producers()
			}
			if err != nil {
				sp.ErrorCode = b.errorCode(err)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			sp.ActiveProducers = make([]kmsg.DescribeProducersResponseTopicPartitionActiveProducer, 0, len(ps))
			for _, s := range ps {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = s.ProducerID, int32(s.ProducerEpoch), s.LastSequence
				ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = s.LastTimestamp, s.CoordinatorEpoch, s.CurrentTxnStartOffset
				sp.ActiveProducers = append(sp.ActiveProducers, ap)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
