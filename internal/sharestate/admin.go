package sharestate

import (
	"context"
	"fmt"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/share"
)

// The admin's operations on a share-partition's state (docs/queues.md, "The admin keys"): a summary
// read that fences nobody (DescribeShareGroupOffsets), a reset of the start offset
// (AlterShareGroupOffsets) and a deletion (DeleteShareGroupOffsets, DeleteGroups). The group
// coordinator calls Reset and Delete only for a share group without members; a reset or a deletion
// still fences the leader that held the share-partition before it: its writes are refused with
// ErrStateReset until a leader reads the state again (Read's fence) or creates it (Create), so that
// an owner restored before the reset can neither overwrite it nor bring a deleted state back.

// Summary returns sp's committed state without fencing anyone, a copy the caller owns; ErrNoState
// when sp has none.
func (c *Coordinator) Summary(ctx context.Context, sp SharePartition) (*share.Durable, error) {
	return call(ctx, c, sp, func(s *shard, reply func(*share.Durable, error)) {
		st := s.states[sp]
		if st == nil || !st.committed.Loaded() {
			reply(nil, fmt.Errorf("%w: %s", ErrNoState, sp))
			return
		}
		reply(st.committed.Clone(), nil)
	})
}

// Reset sets sp's start offset to start with an empty window (share.Durable.Reset; a share-partition
// without state gets one at leader epoch 0) and returns once that is committed. From then on the
// leaders' writes are refused with ErrStateReset until one reads the state again.
func (c *Coordinator) Reset(ctx context.Context, sp SharePartition, start int64) error {
	_, err := call(ctx, c, sp, func(s *shard, reply func(struct{}, error)) {
		st := s.states[sp]
		if st == nil {
			st = &state{}
		}
		if s.write(sp, st.appended.Reset(start), reply) {
			s.states[sp].reset = true
		}
	})
	return err
}

// Delete removes sp's state: tombstones for its snapshot key and the slots of its current round,
// answered once committed. A leader's next write is refused with ErrStateReset, and its next read
// finds no state, so that a share group of the same name starts afresh. A share-partition without
// state is deleted at once.
func (c *Coordinator) Delete(ctx context.Context, sp SharePartition) error {
	_, err := call(ctx, c, sp, func(s *shard, reply func(struct{}, error)) { s.remove(sp, reply) })
	return err
}

// removeTopics removes the state of every share-partition of the topics gone (deleted), as Delete
// does; a failed removal is logged, and the state stays until the group is deleted.
func (s *shard) removeTopics(gone map[controller.TopicID]string) {
	for sp := range s.states {
		if _, ok := gone[sp.TopicID]; !ok {
			continue
		}
		s.remove(sp, func(_ struct{}, err error) {
			if err != nil {
				s.c.log.Warn("sharestate: the state of a deleted topic's share-partition stays", "share_partition", sp.String(), "err", err)
			}
		})
	}
}

// remove appends sp's tombstones and forgets its state; the committed state goes once they are
// committed.
func (s *shard) remove(sp SharePartition, reply func(struct{}, error)) {
	st := s.states[sp]
	if st == nil || !st.appended.Loaded() && !st.committed.Loaded() {
		reply(struct{}{}, nil)
		return
	}
	_, slot := st.appended.Round()
	recs := make([]record.Record, 0, slot+1)
	for i := range slot + 1 {
		recs = append(recs, record.Record{OffsetDelta: i, Key: sp.key(i).Encode()})
	}
	_, wait, err := s.log.Append(encodeRecords(recs, s.c.clock.Now().UnixMilli()))
	if err != nil {
		reply(struct{}{}, writeFailed(err))
		return
	}
	st.appended = share.Durable{}
	st.reset = true
	s.Await(wait, func(err error) {
		if err != nil {
			reply(struct{}{}, writeFailed(err))
			return
		}
		st.committed = share.Durable{}
		reply(struct{}{}, nil)
	})
}
