package api

import (
	"context"
	"encoding/binary"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/share"
	"github.com/weir-mq/weir/internal/sharestate"
)

// writeShareGroupState answers WriteShareGroupState (key 85), which the leader of a data partition on
// another node sends with one record of a share-partition (docs/queues.md, "State across nodes"): the
// record is checked, appended and answered once committed, as a local write is. The record's slot and
// window end travel in weir's tagged fields (a partition without them is INVALID_REQUEST), and a third
// makes it a create (FENCED_STATE_EPOCH when the share-partition has state by now). Another tag
// (shareTagAdmin) makes it an admin's reset of the start offset or deletion, with no record; a leader's
// write after one is FENCED_STATE_EPOCH until the leader reads the state again. The same tag sent to
// the data partition's leader stops its owner of the share-partition (shareAdminDrop); on the request
// itself, with a member id, it ends that member's share session on this node (shareAdminEndMember).
func (b *Broker) writeShareGroupState(req *kmsg.WriteShareGroupStateRequest) wire.Reply {
	coord := b.shares.store.coord
	return func(ctx context.Context) kmsg.Response {
		ctx, cancel := context.WithTimeout(ctx, shareOpWait)
		defer cancel()
		resp := req.ResponseKind().(*kmsg.WriteShareGroupStateResponse)
		if op, _ := uvarintTag(req.UnknownTags, shareTagAdmin); op == shareAdminEndMember {
			if member, ok := bytesTag(req.UnknownTags, shareTagMember); ok && req.GroupID != "" {
				b.shareEndMember(ctx, b.meta.Image(), shareMember{group: req.GroupID, member: member})
			}
			return resp
		}
		for _, t := range req.Topics {
			rt := kmsg.NewWriteShareGroupStateResponseTopic()
			rt.TopicID = t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteShareGroupStateResponseTopicPartition()
				rp.Partition = p.Partition
				sp := sharestate.SharePartition{Group: req.GroupID, TopicID: controller.TopicID(t.TopicID), Partition: p.Partition}
				r, ok := writtenRecord(p)
				create, _ := uvarintTag(p.UnknownTags, shareTagCreate)
				admin, _ := uvarintTag(p.UnknownTags, shareTagAdmin)
				var err error
				switch {
				case sp.Group == "" || sp.Partition < 0:
					rp.ErrorCode = kerr.InvalidRequest.Code
				case admin == shareAdminReset && p.StartOffset >= 0:
					err = coord.Reset(ctx, sp, p.StartOffset)
				case admin == shareAdminDelete:
					err = coord.Delete(ctx, sp)
				case admin == shareAdminDrop:
					b.shares.drop(sp)
				case admin != 0 || !ok:
					rp.ErrorCode = kerr.InvalidRequest.Code
				case create == 1:
					err = coord.Create(ctx, sp, r)
				default:
					err = coord.Write(ctx, sp, r)
				}
				if err != nil {
					rp.ErrorCode = b.shareStateCode(err)
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
}

// writtenRecord is the share.Record a WriteShareGroupState partition carries; false when its tagged
// fields are missing or malformed, or a delivery state is not one a record holds. The coordinator's
// Write checks the rest (share.Record's assertions).
func writtenRecord(p kmsg.WriteShareGroupStateRequestTopicPartition) (share.Record, bool) {
	slot, okSlot := uvarintTag(p.UnknownTags, shareTagSlot)
	end, okEnd := uvarintTag(p.UnknownTags, shareTagEnd)
	if !okSlot || !okEnd || slot > math.MaxInt32 || end > math.MaxInt64 {
		return share.Record{}, false
	}
	r := share.Record{
		Snapshot: slot == 0, Seq: p.StateEpoch, Slot: int32(slot), LeaderEpoch: p.LeaderEpoch,
		StartOffset: p.StartOffset, End: int64(end),
	}
	for _, b := range p.StateBatches {
		st, ok := fromWireState(b.DeliveryState)
		if !ok {
			return share.Record{}, false
		}
		r.Batches = append(r.Batches, share.Batch{First: b.FirstOffset, Last: b.LastOffset, State: st, DeliveryCount: b.DeliveryCount})
	}
	return r, true
}

// bytesTag reads tagged field key of tags as a string of its whole value.
func bytesTag(tags kmsg.Tags, key uint32) (string, bool) {
	var v string
	found := false
	tags.Each(func(k uint32, val []byte) {
		if k == key {
			v, found = string(val), true
		}
	})
	return v, found
}

// uvarintTag reads tagged field key of tags as one uvarint filling its whole value.
func uvarintTag(tags kmsg.Tags, key uint32) (uint64, bool) {
	var v uint64
	found := false
	tags.Each(func(k uint32, val []byte) {
		if k != key {
			return
		}
		n, used := binary.Uvarint(val)
		if used > 0 && used == len(val) {
			v, found = n, true
		}
	})
	return v, found
}
