package controller

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/hashicorp/raft"
)

// Status is the cluster as the controller leader sees it, for `weir cluster status`.
type Status struct {
	// ControllerID is the leader's node id, NoLeader when none is known.
	ControllerID int32 `json:"controller_id"`
	// ControllerAddr is the leader's controller address.
	ControllerAddr string `json:"controller_addr"`
	// Term is the leader's Raft term.
	Term uint64 `json:"term"`
	// Nodes is sorted by NodeID: every Raft server and every registered broker.
	Nodes []NodeStatus `json:"nodes"`
	// Leaderless lists partitions with no leader.
	Leaderless []PartitionStatus `json:"leaderless"`
	// UnderReplicated lists partitions whose ISR is smaller than their replica set.
	UnderReplicated []PartitionStatus `json:"under_replicated"`
	// Moving lists the partitions with a move in progress (docs/reassignment.md).
	Moving []PartitionStatus `json:"moving,omitempty"`
}

// NodeStatus is one node in a Status.
type NodeStatus struct {
	NodeID int32 `json:"node_id"`
	// Addr is the node's controller (Raft) address; empty for a broker not in the Raft configuration.
	Addr string `json:"addr"`
	// Voter is true for a Raft voter, false for a non-voter or a broker outside the configuration.
	Voter bool `json:"voter"`
	// RaftState is the state the node reported in its last heartbeat (Leader, Follower,
	// Candidate), empty when it has not reported one.
	RaftState string `json:"raft_state"`
	// LastContact is when the leader last heard from the node; zero when never (since it leads).
	LastContact time.Time `json:"last_contact"`
	// AppliedIndex is the last Raft index the node reported applying.
	AppliedIndex uint64 `json:"applied_index"`
	// Registered is true for a broker in the image; Fenced as the image says.
	Registered bool `json:"registered"`
	Fenced     bool `json:"fenced"`
}

// PartitionStatus names a partition and its replica state.
type PartitionStatus struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Leader    int32   `json:"leader"`
	Replicas  []int32 `json:"replicas"`
	ISR       []int32 `json:"isr"`
	// Adding and Removing are a move's replicas being added and removed.
	Adding   []int32 `json:"adding,omitempty"`
	Removing []int32 `json:"removing,omitempty"`
}

// Status returns the cluster status. In a quorum any node answers by asking the leader; the
// single-node store answers from its image.
func (s *Store) Status(ctx context.Context) (Status, error) {
	if s.closed.Load() {
		return Status{}, ErrClosed
	}
	if s.node == nil {
		img := s.Image()
		st := Status{ControllerID: img.ControllerID}
		for _, b := range img.Brokers {
			ns := NodeStatus{NodeID: b.NodeID, Registered: true, Fenced: b.Fenced}
			if b.NodeID == img.ControllerID {
				ns.Voter, ns.RaftState, ns.LastContact = true, raft.Leader.String(), s.clock.Now()
			}
			st.Nodes = append(st.Nodes, ns)
		}
		st.Leaderless, st.UnderReplicated = partitionProblems(img)
		st.Moving = moves(img)
		return st, nil
	}
	if s.node.isLeader() {
		return s.node.status(), nil
	}
	var st Status
	if err := s.node.callLeader(ctx, s.node.client, methodStatus, struct{}{}, &st); err != nil {
		return Status{}, err
	}
	return st, nil
}

// status builds the leader's Status.
func (n *raftNode) status() Status {
	img := n.store.Image()
	now := n.cfg.Clock.Now()
	st := Status{ControllerID: NoLeader, ControllerAddr: n.leaderAddr(), Term: n.r.CurrentTerm()}
	if _, id := n.r.LeaderWithID(); id != "" {
		if nid, ok := parseServerID(id); ok {
			st.ControllerID = nid
		}
	}
	nodes := map[int32]*NodeStatus{}
	node := func(id int32) *NodeStatus {
		ns := nodes[id]
		if ns == nil {
			ns = &NodeStatus{NodeID: id}
			nodes[id] = ns
		}
		return ns
	}
	if f := n.r.GetConfiguration(); f.Error() == nil {
		for _, srv := range f.Configuration().Servers {
			id, ok := parseServerID(srv.ID)
			if !ok {
				continue
			}
			ns := node(id)
			ns.Addr = string(srv.Address)
			ns.Voter = srv.Suffrage == raft.Voter
		}
	}
	for _, b := range img.Brokers {
		ns := node(b.NodeID)
		ns.Registered, ns.Fenced = true, b.Fenced
	}
	for id, ns := range nodes {
		if sess, ok := n.sess.get(id); ok {
			ns.RaftState, ns.LastContact, ns.AppliedIndex = sess.raftState, sess.lastSeen, sess.applied
		}
		if id == n.cfg.Self.NodeID {
			ns.RaftState, ns.LastContact, ns.AppliedIndex = n.r.State().String(), now, n.fsm.applied.Load()
		}
		st.Nodes = append(st.Nodes, *ns)
	}
	sort.Slice(st.Nodes, func(i, j int) bool { return st.Nodes[i].NodeID < st.Nodes[j].NodeID })
	st.Leaderless, st.UnderReplicated = partitionProblems(img)
	st.Moving = moves(img)
	return st
}

// partitionProblems lists the partitions of img without a leader and those under-replicated,
// sorted by topic and partition.
func partitionProblems(img *Image) (leaderless, under []PartitionStatus) {
	for _, name := range img.TopicNames() {
		for p, ps := range img.Topics[name].States {
			st := PartitionStatus{Topic: name, Partition: int32(p), Leader: ps.Leader, Replicas: ps.Replicas, ISR: ps.ISR}
			if ps.Leader == NoLeader {
				leaderless = append(leaderless, st)
			}
			if len(ps.ISR) < len(ps.Replicas) {
				under = append(under, st)
			}
		}
	}
	return leaderless, under
}

// moves lists the partitions of img with a move in progress, sorted by topic and partition.
func moves(img *Image) []PartitionStatus {
	var out []PartitionStatus
	for _, name := range img.TopicNames() {
		for p, ps := range img.Topics[name].States {
			if ps.Moving() {
				out = append(out, PartitionStatus{Topic: name, Partition: int32(p), Leader: ps.Leader, Replicas: ps.Replicas,
					ISR: ps.ISR, Adding: ps.AddingReplicas, Removing: ps.RemovingReplicas})
			}
		}
	}
	return out
}

// WaitReady returns once the image has a cluster id and this broker's current incarnation is
// registered and unfenced in it (at once for the single-node store), or when ctx ends. The local
// image then holds every command committed before this start's registration.
func (s *Store) WaitReady(ctx context.Context) error {
	if s.node == nil {
		return nil
	}
	nodeID := s.node.cfg.Self.NodeID
	ch, unsub := s.Subscribe()
	defer unsub()
	for {
		img := s.Image()
		if b, ok := img.Broker(nodeID); ok && !b.Fenced && b.Incarnation == s.node.incarnation && img.ClusterID != "" && s.node.brokerEpoch.Load() != 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: waiting for the controller: %w", ErrTimeout, ctx.Err())
		}
	}
}
