package api

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/record"
)

// Special ListOffsets timestamps.
const (
	listLatest   = -1
	listEarliest = -2
)

// listOffsets answers ListOffsets (key 2) on a partition's leader (NOT_LEADER_OR_FOLLOWER elsewhere,
// the client's CurrentLeaderEpoch checked): -1 is the high watermark (the last stable offset for
// read_committed), -2 the log start offset, any other timestamp the first offset of a batch at or
// after it (-1 when there is none below the high watermark, or the last stable offset for
// read_committed).
func (b *Broker) listOffsets(req *kmsg.ListOffsetsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	img := b.meta.Image()
	var opening openWait
	committed := req.IsolationLevel == isolationReadCommitted
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			if err := b.listOffset(img, rt.Topic, rp, committed, &sp, &opening); err != nil {
				sp.ErrorCode = b.errorCode(err)
				sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// listOffset resolves one partition's timestamp into sp.
func (b *Broker) listOffset(img *controller.Image, topic string, rp kmsg.ListOffsetsRequestTopicPartition, committed bool, sp *kmsg.ListOffsetsResponseTopicPartition, opening *openWait) error {
	r, err := b.replica(img, topic, rp.Partition, opening)
	if err != nil {
		return err
	}
	if err := r.CheckLeader(rp.CurrentLeaderEpoch); err != nil {
		return err
	}
	sp.LeaderEpoch = r.LeaderEpoch()
	sp.Timestamp = -1
	switch ts := rp.Timestamp; {
	case ts == listLatest && committed:
		sp.Offset = r.LastStableOffset()
	case ts == listLatest:
		sp.Offset = r.HighWatermark()
	case ts == listEarliest:
		sp.Offset = r.LogStartOffset()
	case ts < 0:
		return fmt.Errorf("%w: timestamp %d", errInvalidRequest, ts)
	default:
		off, ok, err := r.OffsetForTime(ts)
		if err != nil {
			return err
		}
		sp.Offset = -1
		if !ok || committed && off >= r.LastStableOffset() {
			return nil
		}
		sp.Offset = off
		// The batch's max timestamp: a timestamp of a record at or after the one found, the best the
		// broker knows without decompressing.
		if res, err := r.Read(off, 1, committed); err == nil {
			if h, err := record.ParseHeader(res.Records); err == nil {
				sp.Timestamp = h.MaxTimestamp
			}
		}
	}
	return nil
}
