package api

import (
	"context"
	"fmt"
	"sync"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/share"
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
// no members (NON_EMPTY_GROUP), and it is created, empty, when this node does not know it, so that
// the id is held by share groups from then on.
func (b *Broker) shareAdminGroup(ctx context.Context, groupID, listener string, empty bool) error {
	if groupID == "" {
		return group.ErrInvalidGroupID
	}
	if err := b.shareCoordinatorCheck(ctx, groupID, listener); err != nil {
		return err
	}
	if err := b.otherKind(ctx, groupID); err != nil {
		return err
	}
	if empty {
		_, err := b.shares.emptyGroup(groupID, b.meta.Image(), true)
		return err
	}
	return nil
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

// emptyGroup reports whether this node knows groupID as a share group, with NON_EMPTY_GROUP while it
// has members. With create, a group this node does not know is made, empty, so that ListGroups and
// DeleteGroups show it and the id is held by share groups from then on.
func (s *shareGroups) emptyGroup(groupID string, img *controller.Image, create bool) (bool, error) {
	if s == nil {
		return false, nil
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[groupID]
	if g == nil {
		if !create {
			return false, nil
		}
		var err error
		if g, err = share.NewGroup(groupID, share.GroupConfig{}); err != nil {
			return false, err
		}
		s.groups[groupID] = g
	}
	g.Expire(now, imageTopics(img))
	if g.State() != share.GroupEmpty {
		return true, fmt.Errorf("%w: share group %q has members", group.ErrNonEmptyGroup, groupID)
	}
	return true, nil
}

// forget deletes the share group groupID from this node, unless a member joined it since emptyGroup
// (NON_EMPTY_GROUP).
func (s *shareGroups) forget(groupID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.groups[groupID]; g != nil && g.State() != share.GroupEmpty {
		return fmt.Errorf("%w: share group %q has members", group.ErrNonEmptyGroup, groupID)
	}
	delete(s.groups, groupID)
	return nil
}

// deleteShareGroup deletes groupID if this node knows it as a share group and it names no group of
// another kind (false otherwise: an empty share group does not hold its id yet, docs/queues.md): the
// state of its share-partitions first, then the group, so that a share group of the same name starts
// afresh; NON_EMPTY_GROUP while it has members.
func (b *Broker) deleteShareGroup(ctx context.Context, groupID string) (bool, error) {
	img := b.meta.Image()
	known, err := b.shares.emptyGroup(groupID, img, false)
	if !known || err != nil {
		return known, err
	}
	if b.otherKind(ctx, groupID) != nil {
		return false, nil
	}
	if err := b.deleteShareGroupState(ctx, groupID, img); err != nil {
		return true, err
	}
	return true, b.shares.forget(groupID)
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
