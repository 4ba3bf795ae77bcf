package api

import (
	"context"
	"fmt"
	"sync"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/sharestate"
)

// The share admin keys (90-92) and share groups in DeleteGroups (docs/queues.md, "The admin keys"):
// the group coordinator checks the group (of the share kind, without members for a change), then
// reads, resets or deletes each share-partition's durable state at its share-state coordinator
// (shareStore), and stops the data leader's owner of each share-partition it changed (dropOwner), so
// that the next operation there restores the new state. An owner the stop does not reach finds out
// at its next write, which the share-state coordinator refuses (sharestate.ErrStateReset), and stops
// then.

// errShareGroupKind answers an admin request for a group id that names a classic or consumer-protocol
// group (GROUP_ID_NOT_FOUND, as Kafka answers a request for a group of another type).
var errShareGroupKind = fmt.Errorf("%w: the id is not a share group's", group.ErrGroupNotFound)

// shareAdminGroup checks that groupID may be administered here as a share group: this node coordinates
// it, and it names no classic or consumer-protocol group. When empty is set the share group must have
// no members (NON_EMPTY_GROUP), and it is created, empty, when nobody holds the id, so that the id is
// held by share groups from then on (group.Coordinator.ShareEnsure).
func (b *Broker) shareAdminGroup(ctx context.Context, groupID, listener string, empty bool) error {
	if groupID == "" {
		return group.ErrInvalidGroupID
	}
	if err := b.shareCoordinatorCheck(ctx, groupID, listener); err != nil {
		return err
	}
	if empty {
		return b.groups.ShareEnsure(ctx, groupID)
	}
	return b.otherKind(ctx, groupID)
}

// otherKind returns GROUP_ID_NOT_FOUND when groupID names a consumer-protocol group or a classic one
// (with members or committed offsets), and nil when it names neither.
func (b *Broker) otherKind(ctx context.Context, groupID string) error {
	if _, err := b.groups.ConsumerDescribe(ctx, groupID); err == nil {
		return fmt.Errorf("%w: %q is a consumer group", errShareGroupKind, groupID)
	}
	d, err := b.groups.Describe(ctx, groupID)
	if err != nil {
		return err
	}
	if d.State != group.Dead {
		return fmt.Errorf("%w: %q is a classic group", errShareGroupKind, groupID)
	}
	return nil
}

// deleteShareGroup deletes groupID if it is a share group (false otherwise): the state of its
// share-partitions first, then the group and its record, so that a share group of the same name
// starts afresh; NON_EMPTY_GROUP while it has members, or when one joined while the state was deleted.
func (b *Broker) deleteShareGroup(ctx context.Context, groupID string) (bool, error) {
	known, err := b.groups.ShareEmpty(ctx, groupID)
	if !known || err != nil {
		return known, err
	}
	if err := b.deleteShareGroupState(ctx, groupID, b.meta.Image()); err != nil {
		return true, err
	}
	return true, b.groups.ShareDelete(ctx, groupID)
}

// drop stops this node's owner of sp, if any: the next operation starts one that restores sp's state
// anew.
func (s *shareGroups) drop(sp sharestate.SharePartition) {
	s.mu.Lock()
	p := s.parts[sp]
	delete(s.parts, sp)
	s.mu.Unlock()
	if p != nil {
		p.stop()
	}
}

// resetSharePartition sets sp's start offset and stops the data leader's owner of it.
func (b *Broker) resetSharePartition(ctx context.Context, sp sharestate.SharePartition, start int64) error {
	if err := b.shares.store.reset(ctx, sp, start); err != nil {
		return err
	}
	b.dropOwner(ctx, sp)
	return nil
}

// deleteSharePartition deletes sp's state and stops the data leader's owner of it.
func (b *Broker) deleteSharePartition(ctx context.Context, sp sharestate.SharePartition) error {
	if err := b.shares.store.remove(ctx, sp); err != nil {
		return err
	}
	b.dropOwner(ctx, sp)
	return nil
}

// dropOwner stops the owner of sp at its data partition's leader: here, or on another node with
// shareAdminDrop. The state is changed by then, so a failure is only logged: that owner's next write
// is refused (sharestate.ErrStateReset) and stops it.
func (b *Broker) dropOwner(ctx context.Context, sp sharestate.SharePartition) {
	img := b.meta.Image()
	leader := controller.NoLeader
	if t, ok := img.TopicByID(sp.TopicID); ok {
		if st, ok := t.Partition(sp.Partition); ok {
			leader = st.Leader
		}
	}
	switch leader {
	case b.nodeID:
		b.shares.drop(sp)
	case controller.NoLeader:
	default:
		if err := b.shares.store.adminAt(ctx, leader, sp, shareAdminDrop, 0); err != nil {
			b.log.Warn("api: the share-partition's owner at its leader was not stopped", "share_partition", sp.String(), "node", leader, "err", err)
		}
	}
}

// deleteShareGroupState deletes the state of groupID's share-partitions of every topic in img but weir's
// internal ones, shareAdminFanout at a time: the group's record of which topics it read is its
// members' subscriptions, gone with them, so every partition is asked (a share-partition without state
// costs its coordinator a lookup).
func (b *Broker) deleteShareGroupState(ctx context.Context, groupID string, img *controller.Image) error {
	var sps []sharestate.SharePartition
	for _, t := range img.Topics {
		if t.Internal {
			continue
		}
		for p := range t.Partitions {
			sps = append(sps, sharestate.SharePartition{Group: groupID, TopicID: t.ID, Partition: int32(p)})
		}
	}
	errs := make([]error, len(sps))
	fanOut(len(sps), func(i int) { errs[i] = b.deleteSharePartition(ctx, sps[i]) })
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// shareAdminFanout bounds the share-partitions one admin request asks their share-state coordinators
// about at once: a group's null topics name every partition of every topic.
const shareAdminFanout = 32

// fanOut calls fn(i) for every i below n, shareAdminFanout at a time, and returns when all have.
func fanOut(n int, fn func(i int)) {
	sem := make(chan struct{}, shareAdminFanout)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			fn(i)
		})
	}
	wg.Wait()
}
