package api

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/share"
	"github.com/weir-mq/weir/internal/sharestate"
)

// shareStore is where a share-partition's owner reads and writes its durable state (docs/queues.md,
// "State across nodes"): the local share-state coordinator when this node leads the share-partition's
// __share_group_state partition, else that partition's leader, with ReadShareGroupState and
// WriteShareGroupState over the broker's inter-broker connections. The leader is looked up in the
// image at every call, so a moved coordinator is found at the next try.
type shareStore struct {
	nodeID int32
	meta   *controller.Store
	coord  *sharestate.Coordinator
	conns  *brokerConns
}

// Weir's tagged fields of a WriteShareGroupState partition (uvarints): the record's slot (0 for a
// snapshot) and the window's end, which Kafka's shape lacks because its coordinator, not its leader,
// chooses snapshots. Far above the tags Kafka numbers from 0, so that none of Kafka's collides.
// shareTagCreate, set to 1, makes the write a Create (sharestate.Coordinator.Create): the first
// snapshot of a leader that read no state.
// shareTagSummary, set to 1 on a ReadShareGroupState partition, reads the committed state without
// fencing (sharestate.Coordinator.Summary, for DescribeShareGroupOffsets); shareTagAdmin on a
// WriteShareGroupState partition makes it an admin's shareAdminReset to its StartOffset or
// shareAdminDelete, with no record (Coordinator.Reset, Coordinator.Delete).
const (
	shareTagSlot    = 10000
	shareTagEnd     = 10001
	shareTagCreate  = 10002
	shareTagSummary = 10003
	shareTagAdmin   = 10004
	// shareTagLeaderEpoch on a summary's answer is the leader epoch of the state read, which the
	// response's shape lacks.
	shareTagLeaderEpoch = 10005
	// shareTagMember on a WriteShareGroupState request (not a partition) is a member id, its bytes:
	// with the request's shareTagAdmin shareAdminEndMember, the member whose share session ends.
	shareTagMember = 10006
)

// The values of shareTagAdmin. shareAdminDrop goes to the data partition's leader rather than the
// share-state coordinator: it stops the leader's owner of the share-partition after a reset or a
// deletion, so that its next operation restores the new state.
const (
	shareAdminReset  = 1
	shareAdminDelete = 2
	shareAdminDrop   = 3
	// shareAdminEndMember, on the request rather than a partition, goes from a group coordinator to
	// every other node: the member named by shareTagMember left the group when its session timed
	// out, and its share session there ends with its records released (Broker.shareMembersGone).
	shareAdminEndMember = 4
)

// shareNoStartOffset is the start offset ReadShareGroupState answers for a share-partition with no
// state (Kafka's uninitialized share-partition).
const shareNoStartOffset = -1

// Kafka's delivery states on the wire (its RecordState ids), for the states a durable record holds.
const (
	wireAvailable    = 0
	wireAcknowledged = 2
	wireArchived     = 4
)

// coordinator returns the node that leads sp's __share_group_state partition, creating the topic on
// first use.
func (s *shareStore) coordinator(ctx context.Context, sp sharestate.SharePartition) (int32, error) {
	p, err := s.coord.Locate(ctx, sp)
	if err != nil {
		return 0, err
	}
	t, ok := s.meta.Image().Topic(sharestate.StateTopic)
	if !ok {
		return 0, fmt.Errorf("%w: %s", errTopicNotReady, sharestate.StateTopic)
	}
	st, ok := t.Partition(p)
	if !ok || st.Leader == controller.NoLeader {
		return 0, fmt.Errorf("%w: %s-%d has no leader", sharestate.ErrCoordinatorNotAvailable, sharestate.StateTopic, p)
	}
	return st.Leader, nil
}

// read returns sp's committed state for its leader at leaderEpoch, which the coordinator fences in
// first (sharestate.Coordinator.Read); sharestate.ErrNoState when it has none,
// share.ErrFencedLeaderEpoch when the state was written by a later leader.
func (s *shareStore) read(ctx context.Context, sp sharestate.SharePartition, leaderEpoch int32) (*share.Durable, error) {
	return s.readAt(ctx, sp, leaderEpoch, false)
}

// summary returns sp's committed state without fencing anyone (sharestate.Coordinator.Summary);
// sharestate.ErrNoState when it has none.
func (s *shareStore) summary(ctx context.Context, sp sharestate.SharePartition) (*share.Durable, error) {
	return s.readAt(ctx, sp, 0, true)
}

// readAt is read, or summary when summary is set.
func (s *shareStore) readAt(ctx context.Context, sp sharestate.SharePartition, leaderEpoch int32, summary bool) (*share.Durable, error) {
	node, err := s.coordinator(ctx, sp)
	if err != nil {
		return nil, err
	}
	if node == s.nodeID && summary {
		return s.coord.Summary(ctx, sp)
	}
	if node == s.nodeID {
		return s.coord.Read(ctx, sp, leaderEpoch)
	}
	addr, err := brokerAddr(s.meta.Image(), node)
	if err != nil {
		return nil, unreachableCoordinator(err)
	}
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = sp.Group
	rt := kmsg.NewReadShareGroupStateRequestTopic()
	rt.TopicID = sp.TopicID
	rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch = sp.Partition, leaderEpoch
	if summary {
		rp.UnknownTags.Set(shareTagSummary, binary.AppendUvarint(nil, 1))
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := s.conns.roundTrip(ctx, addr, req)
	if err != nil {
		return nil, unreachableCoordinator(err)
	}
	resp := kresp.(*kmsg.ReadShareGroupStateResponse)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if t.TopicID == sp.TopicID && p.Partition == sp.Partition {
				epoch := leaderEpoch
				if e, ok := uvarintTag(p.UnknownTags, shareTagLeaderEpoch); summary && ok && e <= math.MaxInt32 {
					epoch = int32(e)
				}
				return readAnswer(sp, epoch, p)
			}
		}
	}
	return nil, fmt.Errorf("%w: node %d did not answer for %s", sharestate.ErrCoordinatorNotAvailable, node, sp)
}

// readAnswer turns a coordinator's answer for one share-partition into its state, at leaderEpoch.
func readAnswer(sp sharestate.SharePartition, leaderEpoch int32, p kmsg.ReadShareGroupStateResponseTopicPartition) (*share.Durable, error) {
	if err := shareStateError(p.ErrorCode); err != nil {
		return nil, err
	}
	if p.StartOffset == shareNoStartOffset {
		return nil, fmt.Errorf("%w: %s", sharestate.ErrNoState, sp)
	}
	r := share.Record{Snapshot: true, Seq: p.StateEpoch, LeaderEpoch: leaderEpoch, StartOffset: p.StartOffset, End: p.StartOffset}
	for _, b := range p.StateBatches {
		st, ok := fromWireState(b.DeliveryState)
		if !ok {
			return nil, fmt.Errorf("%w: delivery state %d", share.ErrCorruptRecord, b.DeliveryState)
		}
		r.Batches = append(r.Batches, share.Batch{First: b.FirstOffset, Last: b.LastOffset, State: st, DeliveryCount: b.DeliveryCount})
		r.End = b.LastOffset + 1
	}
	var d share.Durable
	if err := d.Apply(r); err != nil {
		return nil, err
	}
	return &d, nil
}

// write appends r, a record of sp's leader, and returns once it is committed.
func (s *shareStore) write(ctx context.Context, sp sharestate.SharePartition, r share.Record) error {
	return s.send(ctx, sp, r, false)
}

// create appends r, the first snapshot of a leader that read no state, only if sp still has none
// (sharestate.ErrStateExists otherwise).
func (s *shareStore) create(ctx context.Context, sp sharestate.SharePartition, r share.Record) error {
	return s.send(ctx, sp, r, true)
}

// send is write, or create when create is set.
func (s *shareStore) send(ctx context.Context, sp sharestate.SharePartition, r share.Record, create bool) error {
	node, err := s.coordinator(ctx, sp)
	if err != nil {
		return err
	}
	if node == s.nodeID && create {
		return s.coord.Create(ctx, sp, r)
	}
	if node == s.nodeID {
		return s.coord.Write(ctx, sp, r)
	}
	addr, err := brokerAddr(s.meta.Image(), node)
	if err != nil {
		return unreachableCoordinator(err)
	}
	req, rp := writeStateRequest(sp)
	rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset = r.Seq, r.LeaderEpoch, r.StartOffset
	for _, b := range r.Batches {
		wb := kmsg.NewWriteShareGroupStateRequestTopicPartitionStateBatch()
		wb.FirstOffset, wb.LastOffset, wb.DeliveryState, wb.DeliveryCount = b.First, b.Last, toWireState(b.State), b.DeliveryCount
		rp.StateBatches = append(rp.StateBatches, wb)
	}
	rp.UnknownTags.Set(shareTagSlot, binary.AppendUvarint(nil, uint64(r.Slot)))
	rp.UnknownTags.Set(shareTagEnd, binary.AppendUvarint(nil, uint64(r.End)))
	if create {
		rp.UnknownTags.Set(shareTagCreate, binary.AppendUvarint(nil, 1))
	}
	return s.roundTripWrite(ctx, addr, node, sp, req, create)
}

// writeStateRequest returns a WriteShareGroupState request for sp alone and its partition, to fill.
func writeStateRequest(sp sharestate.SharePartition) (*kmsg.WriteShareGroupStateRequest, *kmsg.WriteShareGroupStateRequestTopicPartition) {
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.GroupID = sp.Group
	rt := kmsg.NewWriteShareGroupStateRequestTopic()
	rt.TopicID = sp.TopicID
	rp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
	rp.Partition = sp.Partition
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req, &req.Topics[0].Partitions[0]
}

// endMemberAt asks node to end the share session of group's member there (shareAdminEndMember).
func (s *shareStore) endMemberAt(ctx context.Context, img *controller.Image, node int32, group, member string) error {
	addr, err := brokerAddr(img, node)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.GroupID = group
	req.UnknownTags.Set(shareTagAdmin, binary.AppendUvarint(nil, shareAdminEndMember))
	req.UnknownTags.Set(shareTagMember, []byte(member))
	_, err = s.conns.roundTrip(ctx, addr, req)
	return err
}

// reset sets sp's start offset to start with an empty window, for an admin
// (sharestate.Coordinator.Reset).
func (s *shareStore) reset(ctx context.Context, sp sharestate.SharePartition, start int64) error {
	return s.admin(ctx, sp, shareAdminReset, start)
}

// remove deletes sp's state, for an admin (sharestate.Coordinator.Delete).
func (s *shareStore) remove(ctx context.Context, sp sharestate.SharePartition) error {
	return s.admin(ctx, sp, shareAdminDelete, 0)
}

// admin runs op (shareAdminReset to start, or shareAdminDelete) at sp's share-state coordinator.
func (s *shareStore) admin(ctx context.Context, sp sharestate.SharePartition, op uint64, start int64) error {
	node, err := s.coordinator(ctx, sp)
	if err != nil {
		return err
	}
	switch {
	case node == s.nodeID && op == shareAdminReset:
		return s.coord.Reset(ctx, sp, start)
	case node == s.nodeID:
		return s.coord.Delete(ctx, sp)
	}
	return s.adminAt(ctx, node, sp, op, start)
}

// adminAt sends op for sp to node, a WriteShareGroupState with weir's admin tag and no record.
func (s *shareStore) adminAt(ctx context.Context, node int32, sp sharestate.SharePartition, op uint64, start int64) error {
	addr, err := brokerAddr(s.meta.Image(), node)
	if err != nil {
		return unreachableCoordinator(err)
	}
	req, rp := writeStateRequest(sp)
	rp.StartOffset = start
	rp.UnknownTags.Set(shareTagAdmin, binary.AppendUvarint(nil, op))
	return s.roundTripWrite(ctx, addr, node, sp, req, false)
}

// roundTripWrite sends req, a WriteShareGroupState for sp, to node at addr and returns its answer's
// error for sp. A create's FENCED_STATE_EPOCH is sharestate.ErrStateExists, another write's
// sharestate.ErrStateReset.
func (s *shareStore) roundTripWrite(ctx context.Context, addr string, node int32, sp sharestate.SharePartition, req *kmsg.WriteShareGroupStateRequest, create bool) error {
	kresp, err := s.conns.roundTrip(ctx, addr, req)
	if err != nil {
		return unreachableCoordinator(err)
	}
	resp := kresp.(*kmsg.WriteShareGroupStateResponse)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if t.TopicID != sp.TopicID || p.Partition != sp.Partition {
				continue
			}
			err := shareStateError(p.ErrorCode)
			if !create && errors.Is(err, sharestate.ErrStateExists) {
				return fmt.Errorf("%w: %s", sharestate.ErrStateReset, sp)
			}
			return err
		}
	}
	return fmt.Errorf("%w: node %d did not answer for %s", sharestate.ErrCoordinatorNotAvailable, node, sp)
}

// unreachableCoordinator is the error of a coordinator that did not answer: retriable, as the image
// names a new one once the node is fenced.
func unreachableCoordinator(err error) error {
	return fmt.Errorf("%w: %v", sharestate.ErrCoordinatorNotAvailable, err)
}

// shareStateError is the error a remote share-state coordinator's code stands for.
func shareStateError(code int16) error {
	switch code {
	case 0:
		return nil
	case kerr.NotCoordinator.Code:
		return sharestate.ErrNotCoordinator
	case kerr.CoordinatorLoadInProgress.Code:
		return sharestate.ErrLoadInProgress
	case kerr.CoordinatorNotAvailable.Code:
		return sharestate.ErrCoordinatorNotAvailable
	case kerr.FencedLeaderEpoch.Code:
		return share.ErrFencedLeaderEpoch
	case kerr.FencedStateEpoch.Code:
		return sharestate.ErrStateExists
	case kerr.InvalidRequest.Code:
		return fmt.Errorf("%w: the coordinator refused the record", share.ErrCorruptRecord)
	}
	return fmt.Errorf("%w: the coordinator answered %s", sharestate.ErrCoordinatorNotAvailable, ErrorName(code))
}

// shareStateCode is the code a share-state coordinator answers err with: a record that cannot follow
// the share-partition's state is INVALID_REQUEST, a create of a share-partition that has state, and a
// leader's write after an admin's reset, FENCED_STATE_EPOCH.
func (b *Broker) shareStateCode(err error) int16 {
	switch {
	case errors.Is(err, share.ErrStaleRecord) || errors.Is(err, share.ErrCorruptRecord):
		return kerr.InvalidRequest.Code
	case errors.Is(err, sharestate.ErrStateExists) || errors.Is(err, sharestate.ErrStateReset):
		return kerr.FencedStateEpoch.Code
	}
	return b.errorCode(err)
}

func toWireState(s share.RecordState) int8 {
	switch s {
	case share.Acknowledged:
		return wireAcknowledged
	case share.Archived:
		return wireArchived
	}
	return wireAvailable
}

func fromWireState(s int8) (share.RecordState, bool) {
	switch s {
	case wireAvailable:
		return share.Available, true
	case wireAcknowledged:
		return share.Acknowledged, true
	case wireArchived:
		return share.Archived, true
	}
	return 0, false
}
