package group

import (
	"context"
	"fmt"
	"iter"
	"time"
)

// KIP-848 groups on the shard (docs/groups.md, "KIP-848 consumer groups"): a group's groupState holds
// its ConsumerGroup beside the classic Group, which stays Empty while the ConsumerGroup has members (of
// either protocol: classic members' JoinGroup, SyncGroup, Heartbeat and LeaveGroup go to it). Only the
// committed offsets are written to the log; the membership lives in memory and members rebuild it
// after a coordinator move.

// consumerConfig is the ConsumerConfig of every KIP-848 group, with ids from newID.
func (c CoordinatorConfig) consumerConfig(newID func(string) string) ConsumerConfig {
	return ConsumerConfig{SessionTimeout: c.ConsumerSessionTimeout, HeartbeatInterval: c.ConsumerHeartbeatInterval,
		MembersMax: c.ConsumerMembersMax, NewMemberID: newID,
		ClassicSessionTimeoutMin: c.SessionTimeoutMin, ClassicSessionTimeoutMax: c.SessionTimeoutMax}
}

// ConsumerHeartbeat handles a ConsumerGroupHeartbeat, with the cluster's topics as the request found
// them.
func (c *Coordinator) ConsumerHeartbeat(ctx context.Context, group string, req ConsumerHeartbeat, topics Topics) ConsumerHeartbeatResponse {
	resp, err := memberCall(ctx, c, group, func(s *shard, reply func(ConsumerHeartbeatResponse, error)) {
		reply(s.consumerHeartbeat(group, req, topics), nil)
	})
	if err != nil {
		return ConsumerHeartbeatResponse{Err: err}
	}
	return resp
}

// ConsumerDescribe reports a KIP-848 group; ErrNotConsumerGroup for a group that is not one.
func (c *Coordinator) ConsumerDescribe(ctx context.Context, group string) (ConsumerDescription, error) {
	return call(ctx, c, group, func(s *shard, reply func(ConsumerDescription, error)) {
		gs := s.groups[group]
		if gs == nil || gs.cg == nil {
			reply(ConsumerDescription{}, fmt.Errorf("%w: %q", ErrNotConsumerGroup, group))
			return
		}
		reply(gs.cg.Describe(), nil)
	})
}

// hasConsumers reports whether the group is a KIP-848 group with members, of either protocol.
func (gs *groupState) hasConsumers() bool { return gs.cg != nil && !gs.cg.Empty() }

func (s *shard) consumerHeartbeat(group string, req ConsumerHeartbeat, topics Topics) ConsumerHeartbeatResponse {
	if err := s.shareHeld(group, "consumer"); err != nil {
		return ConsumerHeartbeatResponse{Err: err}
	}
	gs := s.groups[group]
	switch {
	case gs != nil && gs.g.State() != Empty && req.MemberEpoch != JoinEpoch:
		return ConsumerHeartbeatResponse{Err: fmt.Errorf("%w: %q has classic members", ErrNotConsumerGroup, group)}
	case gs != nil && gs.g.State() != Empty:
		// A join the group would refuse does not convert it.
		if err := validateJoin(req); err != nil {
			return ConsumerHeartbeatResponse{Err: err}
		}
		if err := s.upgrade(group, gs, topics); err != nil {
			return ConsumerHeartbeatResponse{Err: err}
		}
	case req.MemberEpoch != JoinEpoch && (gs == nil || gs.cg == nil):
		return ConsumerHeartbeatResponse{Err: fmt.Errorf("%w: %q", ErrUnknownMemberID, req.MemberID)}
	}
	gs = s.group(group)
	if gs.cg == nil {
		cg, err := NewConsumerGroup(group, s.c.cfg.consumerConfig(s.newMemberID))
		if err != nil {
			// The config was checked by NewCoordinator.
			panic(fmt.Sprintf("group: consumer config rejected after it was checked: %v", err))
		}
		gs.cg = cg
	}
	now := s.c.clock.Now()
	resp := gs.cg.Heartbeat(now, req, topics)
	s.consumerChanged(gs, now)
	return resp
}

// upgrade converts a classic group with members into a KIP-848 group of classic members
// (ConsumerGroupFromClassic), emptying the classic group; ErrNotConsumerGroup when it cannot.
func (s *shard) upgrade(group string, gs *groupState, topics Topics) error {
	now := s.c.clock.Now()
	cg, err := ConsumerGroupFromClassic(gs.g.Snapshot(), s.c.cfg.consumerConfig(s.newMemberID), topics, now)
	if err != nil {
		return fmt.Errorf("%q cannot be converted: %w", group, err)
	}
	gs.cg = cg
	s.apply(gs, gs.g.HandOver())
	s.c.log.Info("group: converted to a KIP-848 group", "group", group, "classic_members", len(cg.members),
		"epoch", cg.epoch)
	return nil
}

// classicJoin is a JoinGroup to a KIP-848 group with members: the member joins as a classic member.
func (s *shard) classicJoin(gs *groupState, req JoinRequest) JoinResponse {
	now := s.c.clock.Now()
	topics := req.Topics
	if topics == nil {
		topics = noTopics{}
	}
	resp := gs.cg.ClassicJoin(now, req, topics)
	s.consumerChanged(gs, now)
	return resp
}

// noTopics is a cluster without topics: the Topics of a JoinRequest that carries none.
type noTopics struct{}

func (noTopics) Lookup(string) (TopicInfo, bool) { return TopicInfo{}, false }

func (noTopics) All() iter.Seq2[string, TopicInfo] { return func(func(string, TopicInfo) bool) {} }

// consumerChanged downgrades a KIP-848 group whose members are all classic, or else notes when it
// became empty (its offsets' retention starts then) and arms its next timer.
func (s *shard) consumerChanged(gs *groupState, now time.Time) {
	if out, ok := gs.cg.Downgrade(gs.g, now); ok {
		gs.cg, gs.cgEmpty, gs.cgDeadline = nil, true, time.Time{}
		s.apply(gs, out)
		s.c.log.Info("group: converted to a classic group", "group", gs.g.ID(), "members", len(gs.g.members),
			"generation", gs.g.Generation())
		return
	}
	if empty := gs.cg.Empty(); empty != gs.cgEmpty {
		gs.cgEmpty = empty
		if empty {
			gs.emptySince = now
		}
	}
	gs.cgDeadline = gs.cg.Deadline()
	s.arm(now, gs.cgDeadline)
}

// tickConsumers runs the timers of the KIP-848 groups due at now.
func (s *shard) tickConsumers(now time.Time) {
	for _, gs := range s.groups {
		if gs.cg != nil && !gs.cgDeadline.IsZero() && !now.Before(gs.cgDeadline) {
			gs.cg.Tick(now)
			s.consumerChanged(gs, now)
		}
	}
}

// validateConsumerCommit checks an OffsetCommit or TxnOffsetCommit of offsets to a group with KIP-848
// members, as ConsumerGroup.ValidateCommit says: the member epoch is in who.Generation. A transaction's
// commit naming no member is accepted, since the transaction guards it.
func validateConsumerCommit(gs *groupState, who CommitRequest, offsets []OffsetCommit, txn bool) error {
	if txn && who.Generation < 0 && who.MemberID == "" {
		return nil
	}
	tps := make([]TopicPartition, len(offsets))
	for i, o := range offsets {
		tps[i] = o.TopicPartition
	}
	return gs.cg.ValidateCommit(who.MemberID, who.Generation, tps)
}

// FetchMember is who sends an OffsetFetch v9+: a KIP-848 member and its epoch, or an empty id and epoch
// -1 for a client outside the group.
type FetchMember struct {
	MemberID string
	Epoch    int32
}

// FetchMemberOffsets is FetchOffsets (FetchStableOffsets with requireStable) for an OffsetFetch v8+,
// which may name a member: in a group with KIP-848 members, a member id or epoch must be a member's
// current ones (ErrUnknownMemberID, ErrStaleMemberEpoch), as ConsumerGroup.ValidateMember says. A
// classic group's members are not checked, as in Kafka.
func (c *Coordinator) FetchMemberOffsets(ctx context.Context, group string, who FetchMember, partitions []TopicPartition, requireStable bool) ([]FetchedOffset, error) {
	return call(ctx, c, group, func(s *shard, reply func([]FetchedOffset, error)) {
		if gs := s.groups[group]; gs != nil && gs.hasConsumers() && (who.MemberID != "" || who.Epoch >= 0) {
			if err := gs.cg.ValidateMember(who.MemberID, who.Epoch); err != nil {
				reply(nil, err)
				return
			}
		}
		reply(s.fetchOffsets(group, partitions, requireStable), nil)
	})
}
