package controller

import "fmt"

// This file holds the Apply steps that change leadership and ISRs. The rules are written up in
// docs/controller.md ("Election and fencing").

func (img *Image) becomeController(c BecomeController) error {
	if c.NodeID < 0 || c.Epoch < img.ControllerEpoch {
		return fmt.Errorf("%w: controller %d epoch %d, current epoch %d", ErrStaleEpoch, c.NodeID, c.Epoch, img.ControllerEpoch)
	}
	if img.ClusterID == "" {
		if c.ClusterID == "" {
			return fmt.Errorf("%w: first controller without a cluster id", ErrInvalidCommand)
		}
		img.ClusterID = c.ClusterID
	}
	img.ControllerID = c.NodeID
	img.ControllerEpoch = c.Epoch
	return nil
}

// mapPartitions replaces, in every topic, each partition state for which f returns a new state;
// topics and slices are copied only where something changed.
func (img *Image) mapPartitions(f func(t *Topic, p int32, st *PartitionState) *PartitionState) {
	for name, t := range img.Topics {
		var states []*PartitionState
		for i, st := range t.States {
			ns := f(t, int32(i), st)
			if ns == nil {
				continue
			}
			if states == nil {
				states = append([]*PartitionState(nil), t.States...)
			}
			states[i] = ns
		}
		if states != nil {
			nt := *t
			nt.States = states
			img.Topics[name] = &nt
		}
	}
}

// setFenced sets the fence of a registered broker (the caller has checked it exists).
func (img *Image) setFenced(id int32, fenced bool) {
	for i := range img.Brokers {
		if img.Brokers[i].NodeID == id {
			img.Brokers[i].Fenced = fenced
		}
	}
}

func (img *Image) fenceBroker(c FenceBroker) error {
	b, err := img.brokerOrErr(c.NodeID)
	if err != nil {
		return err
	}
	if b.Fenced {
		return fmt.Errorf("%w: broker %d is already fenced", ErrInvalidCommand, c.NodeID)
	}
	img.setFenced(c.NodeID, true)
	id := c.NodeID
	img.mapPartitions(func(t *Topic, _ int32, st *PartitionState) *PartitionState {
		inISR := contains(st.ISR, id)
		if st.Leader != id && (!inISR || len(st.ISR) == 1) {
			return nil
		}
		lc := img.LogConfig(t)
		ns := st.clone()
		if inISR && len(ns.ISR) > 1 {
			ns.ISR = without(ns.ISR, id)
			if len(ns.ISR) < int(lc.MinInsyncReplicas) && !contains(ns.ELR, id) {
				ns.ELR = append(ns.ELR, id)
			}
		}
		if st.Leader == id {
			ns.Leader = NoLeader
			img.elect(ns, lc.MinInsyncReplicas, lc.UncleanLeaderElection)
		}
		ns.PartitionEpoch++
		return ns
	})
	return nil
}

// brokerOrErr returns the broker with node id id, or ErrUnknownBroker.
func (img *Image) brokerOrErr(id int32) (Broker, error) {
	b, ok := img.Broker(id)
	if !ok {
		return Broker{}, fmt.Errorf("%w: %d", ErrUnknownBroker, id)
	}
	return b, nil
}

func (img *Image) unfenceBroker(c UnfenceBroker) error {
	b, err := img.brokerOrErr(c.NodeID)
	if err != nil {
		return err
	}
	if !b.Fenced {
		return fmt.Errorf("%w: broker %d is not fenced", ErrInvalidCommand, c.NodeID)
	}
	img.setFenced(c.NodeID, false)
	img.electLeaderless(c.NodeID)
	return nil
}

// electLeaderless runs an election in every leaderless partition that id, just unfenced, replicates.
func (img *Image) electLeaderless(id int32) {
	img.mapPartitions(func(t *Topic, _ int32, st *PartitionState) *PartitionState {
		if st.Leader != NoLeader || !contains(st.Replicas, id) {
			return nil
		}
		lc := img.LogConfig(t)
		ns := st.clone()
		if !img.elect(ns, lc.MinInsyncReplicas, lc.UncleanLeaderElection) {
			return nil
		}
		ns.PartitionEpoch++
		return ns
	})
}

// bumpLeaderEpochs gives every partition id leads a new leader epoch: the broker restarted, and
// followers must not mistake its new log for the old one.
func (img *Image) bumpLeaderEpochs(id int32) {
	img.mapPartitions(func(_ *Topic, _ int32, st *PartitionState) *PartitionState {
		if st.Leader != id {
			return nil
		}
		ns := st.clone()
		ns.LeaderEpoch++
		ns.PartitionEpoch++
		return ns
	})
}

// elect picks a leader for ns, which has none: the first unfenced ISR member in replica order, else
// the first unfenced ELR member, else (unclean only) the first unfenced replica. It reports whether
// it found one; the leader epoch then grows. ISR members that lose their place because the leader
// came from outside the ISR join the ELR while the ISR is below minISR, as fencing does.
func (img *Image) elect(ns *PartitionState, minISR int32, unclean bool) bool {
	pick := func(set []int32) int32 {
		for _, r := range ns.Replicas {
			if contains(set, r) && img.live(r) {
				return r
			}
		}
		return NoLeader
	}
	leader := pick(ns.ISR)
	switch {
	case leader != NoLeader:
	case pick(ns.ELR) != NoLeader:
		leader = pick(ns.ELR)
		elr := without(ns.ELR, leader)
		if int(minISR) > 1 {
			for _, r := range ns.ISR {
				if !contains(elr, r) {
					elr = append(elr, r)
				}
			}
		}
		ns.ISR, ns.ELR = []int32{leader}, elr
	case unclean && pick(ns.Replicas) != NoLeader:
		leader = pick(ns.Replicas)
		ns.ISR, ns.ELR = []int32{leader}, nil
	default:
		return false
	}
	ns.Leader = leader
	ns.LeaderEpoch++
	return true
}

func (img *Image) alterPartition(c AlterPartition) error {
	t, ok := img.Topics[c.Topic]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, c.Topic)
	}
	st, ok := t.Partition(c.Partition)
	if !ok {
		return fmt.Errorf("%w: %s-%d", ErrUnknownPartition, c.Topic, c.Partition)
	}
	if c.Leader != st.Leader || c.LeaderEpoch != st.LeaderEpoch || c.PartitionEpoch != st.PartitionEpoch {
		return fmt.Errorf("%w: %s-%d from leader %d epochs %d/%d, current leader %d epochs %d/%d", ErrStaleEpoch,
			c.Topic, c.Partition, c.Leader, c.LeaderEpoch, c.PartitionEpoch, st.Leader, st.LeaderEpoch, st.PartitionEpoch)
	}
	if !contains(c.ISR, c.Leader) {
		return fmt.Errorf("%w: ISR %v leaves out the leader %d", ErrInvalidCommand, c.ISR, c.Leader)
	}
	for i, r := range c.ISR {
		if !contains(st.Replicas, r) || contains(c.ISR[:i], r) {
			return fmt.Errorf("%w: ISR %v is not a set of replicas %v", ErrInvalidCommand, c.ISR, st.Replicas)
		}
		if !contains(st.ISR, r) && !img.live(r) {
			return fmt.Errorf("%w: ISR %v adds fenced broker %d", ErrInvalidCommand, c.ISR, r)
		}
	}
	lc := img.LogConfig(t)
	ns := st.clone()
	ns.ISR = append([]int32(nil), c.ISR...)
	var elr []int32
	if len(ns.ISR) < int(lc.MinInsyncReplicas) {
		for _, r := range st.ELR {
			if !contains(ns.ISR, r) {
				elr = append(elr, r)
			}
		}
	}
	ns.ELR = elr
	completeMove(img, ns, lc.MinInsyncReplicas)
	ns.PartitionEpoch++
	states := append([]*PartitionState(nil), t.States...)
	states[c.Partition] = ns
	nt := *t
	nt.States = states
	img.Topics[c.Topic] = &nt
	return nil
}

func (img *Image) electPreferredLeaders(c ElectPreferredLeaders) error {
	want := map[string]map[int32]bool{}
	for _, tp := range c.Partitions {
		t, ok := img.Topics[tp.Topic]
		if !ok {
			return fmt.Errorf("%w: %q", ErrUnknownTopic, tp.Topic)
		}
		if _, ok := t.Partition(tp.Partition); !ok {
			return fmt.Errorf("%w: %s-%d", ErrUnknownPartition, tp.Topic, tp.Partition)
		}
		if want[tp.Topic] == nil {
			want[tp.Topic] = map[int32]bool{}
		}
		want[tp.Topic][tp.Partition] = true
	}
	img.mapPartitions(func(t *Topic, p int32, st *PartitionState) *PartitionState {
		if c.Partitions != nil && !want[t.Name][p] {
			return nil
		}
		pref := st.Replicas[0]
		if st.Leader == pref || !contains(st.ISR, pref) || !img.live(pref) {
			return nil
		}
		ns := st.clone()
		ns.Leader = pref
		ns.LeaderEpoch++
		ns.PartitionEpoch++
		return ns
	})
	return nil
}
