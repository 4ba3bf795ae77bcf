package api

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// deleteRecords answers DeleteRecords (key 21): each partition's log start offset moves up to the
// offset given (-1: the last stable offset, which is the high watermark unless a transaction is open);
// past the last stable offset is OFFSET_OUT_OF_RANGE. The response carries the new low watermark.
func (b *Broker) deleteRecords(req *kmsg.DeleteRecordsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	img := b.meta.Image()
	var opening openWait
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			r, err := b.replica(img, rt.Topic, rp.Partition, &opening)
			if err == nil {
				sp.LowWatermark, err = r.DeleteRecords(rp.Offset)
			}
			if err != nil {
				sp.ErrorCode = b.errorCode(err)
				sp.LowWatermark = -1
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
