package api

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/kafka/wire"
)

// shareAcknowledge answers ShareAcknowledge (key 79): a member's acknowledgements of records it
// acquired at this leader, in an open share session (epoch 0 may not open one), each partition answered
// once its acknowledgements are committed. Epoch -1 then closes the session and releases what the
// member still holds.
func (b *Broker) shareAcknowledgeReq(req *kmsg.ShareAcknowledgeRequest) wire.Reply {
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	if deref(req.GroupID) == "" || deref(req.MemberID) == "" {
		resp.ErrorCode = errorCode(errInvalidRequest)
		return ready(resp)
	}
	m := shareMember{group: *req.GroupID, member: *req.MemberID}
	parts, _, err := b.shares.session(m, req.ShareSessionEpoch, nil, nil, false)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return ready(resp)
	}
	img := b.meta.Image()
	resp.AcquisitionLockTimeoutMillis = int32(b.shares.lockDuration(img, m.group) / time.Millisecond)
	return func(ctx context.Context) kmsg.Response {
		ctx, cancel := context.WithTimeout(ctx, shareOpWait)
		defer cancel()
		var acked []shareAcked
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				acked = append(acked, shareAcked{tp: shareTP{t.TopicID, p.Partition},
					acks: shareAcks(p.AcknowledgementBatches, func(a kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch) (int64, int64, []int8) {
						return a.FirstOffset, a.LastOffset, a.AcknowledgeTypes
					})})
			}
		}
		errs := b.shareAcknowledgeAll(ctx, img, m, acked)()
		for _, t := range req.Topics {
			rt := kmsg.NewShareAcknowledgeResponseTopic()
			rt.TopicID = t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
				rp.Partition = p.Partition
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
				rp.ErrorCode, rp.ErrorMessage = b.errorCode(errs[0]), errorMessage(errs[0])
				errs = errs[1:]
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		if req.ShareSessionEpoch == shareSessionFinal {
			b.shareRelease(ctx, img, m, parts)
		}
		return resp
	}
}
