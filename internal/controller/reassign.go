package controller

import (
	"context"
	"fmt"
	"slices"
)

// This file holds the Apply steps of partition moves and of elections asked for by ElectLeaders. The
// design is docs/reassignment.md: a move lives in the image only (Replicas, AddingReplicas,
// RemovingReplicas), and completes in the Apply that puts the last target replica in the ISR.

// partitionOf returns the topic and state a command names, or ErrUnknownTopic / ErrUnknownPartition.
func (img *Image) partitionOf(topic string, p int32) (*Topic, *PartitionState, error) {
	t, ok := img.Topics[topic]
	if !ok {
		return nil, nil, fmt.Errorf("%w: %q", ErrUnknownTopic, topic)
	}
	st, ok := t.Partition(p)
	if !ok {
		return nil, nil, fmt.Errorf("%w: %s-%d", ErrUnknownPartition, topic, p)
	}
	return t, st, nil
}

// setPartition replaces one partition's state, copying the topic.
func (img *Image) setPartition(t *Topic, p int32, ns *PartitionState) {
	nt := *t
	nt.States = slices.Clone(t.States)
	nt.States[p] = ns
	img.Topics[t.Name] = &nt
}

// Moving reports whether a move of the partition is in progress.
func (st *PartitionState) Moving() bool {
	return len(st.AddingReplicas) > 0 || len(st.RemovingReplicas) > 0
}

// TargetReplicas is where the partition is going: Replicas without RemovingReplicas (Replicas when
// nothing moves).
func (st *PartitionState) TargetReplicas() []int32 {
	return slices.DeleteFunc(slices.Clone(st.Replicas), func(r int32) bool { return contains(st.RemovingReplicas, r) })
}

// originalReplicas is where the partition was before its move: Replicas without AddingReplicas.
func (st *PartitionState) originalReplicas() []int32 {
	return slices.DeleteFunc(slices.Clone(st.Replicas), func(r int32) bool { return contains(st.AddingReplicas, r) })
}

func (img *Image) reassignPartition(c ReassignPartition) error {
	t, st, err := img.partitionOf(c.Topic, c.Partition)
	if err != nil {
		return err
	}
	lc := img.LogConfig(t)
	ns := st.clone()
	if c.Cancel {
		if !st.Moving() {
			return fmt.Errorf("%w: %s-%d", ErrNoReassignment, c.Topic, c.Partition)
		}
		ns.Replicas = st.originalReplicas()
		ns.AddingReplicas, ns.RemovingReplicas = nil, nil
	} else {
		if err := img.checkTarget(c.Replicas, lc.MinInsyncReplicas); err != nil {
			return fmt.Errorf("%s-%d: %w", c.Topic, c.Partition, err)
		}
		orig := st.originalReplicas()
		removing := slices.DeleteFunc(slices.Clone(orig), func(r int32) bool { return contains(c.Replicas, r) })
		ns.Replicas = append(slices.Clone(c.Replicas), removing...)
		if len(ns.Replicas) > maxReplicationFactor {
			return fmt.Errorf("%w: %s-%d: %d replicas during the move, at most %d", ErrInvalidReplicaAssignment,
				c.Topic, c.Partition, len(ns.Replicas), maxReplicationFactor)
		}
		ns.AddingReplicas = slices.DeleteFunc(slices.Clone(c.Replicas), func(r int32) bool { return contains(orig, r) })
		ns.RemovingReplicas = removing
		ns.AddingReplicas, ns.RemovingReplicas = orNil(ns.AddingReplicas), orNil(ns.RemovingReplicas)
	}
	if err := img.keepReplicas(ns, lc.MinInsyncReplicas, lc.UncleanLeaderElection); err != nil {
		return fmt.Errorf("%s-%d: %w", c.Topic, c.Partition, err)
	}
	completeMove(img, ns, lc.MinInsyncReplicas)
	ns.PartitionEpoch++
	img.setPartition(t, c.Partition, ns)
	return nil
}

// orNil is ids, or nil when it is empty, so that an image holds one form of "no replicas".
func orNil(ids []int32) []int32 {
	if len(ids) == 0 {
		return nil
	}
	return ids
}

// checkTarget checks a move's target replica list: not empty, no broker twice, every broker live,
// at least minISR replicas.
func (img *Image) checkTarget(target []int32, minISR int32) error {
	if len(target) == 0 {
		return fmt.Errorf("%w: no replicas", ErrInvalidReplicaAssignment)
	}
	for i, r := range target {
		if contains(target[:i], r) {
			return fmt.Errorf("%w: broker %d named twice in %v", ErrInvalidReplicaAssignment, r, target)
		}
		if !img.live(r) {
			return fmt.Errorf("%w: broker %d is not a live registered broker", ErrInvalidReplicaAssignment, r)
		}
	}
	if len(target) < int(minISR) {
		return fmt.Errorf("%w: %d replicas, fewer than min.insync.replicas %d", ErrInvalidReplicaAssignment,
			len(target), minISR)
	}
	return nil
}

// keepReplicas drops from ns's ISR and ELR the brokers that are no longer in its Replicas, and elects a
// new leader if the leader was one of them. An ISR left empty is refused: the data would then live only
// on replicas the change drops.
func (img *Image) keepReplicas(ns *PartitionState, minISR int32, unclean bool) error {
	keep := func(set []int32) []int32 {
		return slices.DeleteFunc(slices.Clone(set), func(r int32) bool { return !contains(ns.Replicas, r) })
	}
	isr := keep(ns.ISR)
	if len(isr) == 0 {
		return fmt.Errorf("%w: none of %v is in the ISR %v", ErrInvalidReplicaAssignment, ns.Replicas, ns.ISR)
	}
	ns.ISR, ns.ELR = isr, orNil(keep(ns.ELR))
	if ns.Leader != NoLeader && !contains(ns.Replicas, ns.Leader) {
		ns.Leader = NoLeader
		img.elect(ns, minISR, unclean)
	}
	return nil
}

// completeMove ends ns's move when every target replica is in the ISR: Replicas becomes the target,
// the removed replicas leave the ISR and ELR, and a removed leader gives way to the first live target
// replica in the ISR. It does nothing otherwise.
func completeMove(img *Image, ns *PartitionState, minISR int32) {
	if !ns.Moving() {
		return
	}
	target := ns.TargetReplicas()
	for _, r := range target {
		if !contains(ns.ISR, r) {
			return
		}
	}
	ns.Replicas = target
	ns.AddingReplicas, ns.RemovingReplicas = nil, nil
	// every target replica is in the ISR, so the ISR stays non-empty and the leader, if removed, has
	// a successor whenever a target replica is live
	_ = img.keepReplicas(ns, minISR, false)
}

func (img *Image) electLeader(c ElectLeader) error {
	t, st, err := img.partitionOf(c.Topic, c.Partition)
	if err != nil {
		return err
	}
	ns := st.clone()
	if c.Unclean {
		if st.Leader != NoLeader {
			return fmt.Errorf("%w: %s-%d is led by %d", ErrElectionNotNeeded, c.Topic, c.Partition, st.Leader)
		}
		lc := img.LogConfig(t)
		if !img.elect(ns, lc.MinInsyncReplicas, true) {
			return fmt.Errorf("%w: %s-%d has no live replica in %v", ErrEligibleLeadersNotAvailable, c.Topic, c.Partition, st.Replicas)
		}
	} else {
		pref := st.Replicas[0]
		switch {
		case st.Leader == pref:
			return fmt.Errorf("%w: %s-%d is led by its preferred replica %d", ErrElectionNotNeeded, c.Topic, c.Partition, pref)
		case !contains(st.ISR, pref) || !img.live(pref):
			return fmt.Errorf("%w: %s-%d's preferred replica %d is fenced or out of the ISR %v",
				ErrPreferredLeaderNotAvailable, c.Topic, c.Partition, pref, st.ISR)
		}
		ns.Leader = pref
		ns.LeaderEpoch++
	}
	ns.PartitionEpoch++
	img.setPartition(t, c.Partition, ns)
	return nil
}

// ReassignPartition starts, replaces or cancels a partition's move (docs/reassignment.md). The
// errors are Apply's: ErrUnknownTopic, ErrUnknownPartition, ErrInvalidReplicaAssignment,
// ErrNoReassignment.
func (s *Store) ReassignPartition(ctx context.Context, c ReassignPartition) error {
	_, _, err := s.propose(ctx, func(*Image) Command { return c }, false)
	return err
}

// ElectLeader runs one partition's election as ElectLeaders asks it. The errors are Apply's:
// ErrElectionNotNeeded, ErrPreferredLeaderNotAvailable, ErrEligibleLeadersNotAvailable besides the
// unknown topic or partition.
func (s *Store) ElectLeader(ctx context.Context, c ElectLeader) error {
	_, _, err := s.propose(ctx, func(*Image) Command { return c }, false)
	return err
}
