package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/hashicorp/raft"
)

// This file changes the controller quorum at run time (docs/controller.md, "Changing the voters"):
// the leader adds a voter with Raft's AddVoter, and removes one with DemoteVoter when it is a live
// broker (it stays a non-voter, so it keeps applying the metadata log) or RemoveServer when it is not.
// A change that would leave the quorum without a live majority is refused before it is proposed.

// RPC methods of the voter changes, answered by the leader.
const (
	methodAddVoter    = "add_voter"
	methodRemoveVoter = "remove_voter"
)

var (
	// ErrDuplicateVoter is returned by AddVoter for a node that is already a voter.
	ErrDuplicateVoter = errors.New("controller: already a voter")
	// ErrVoterNotFound is returned by RemoveVoter for a node that is not a voter.
	ErrVoterNotFound = errors.New("controller: not a voter")
	// ErrQuorumLoss is returned by AddVoter and RemoveVoter for a change after which the voters that
	// are live would not be a majority of the voters, or no voter would remain.
	ErrQuorumLoss = errors.New("controller: the change would lose the quorum")
	// ErrVoterNotCaughtUp is returned by AddVoter for a node that had not applied the metadata log up
	// to the leader's commit when the leader stopped waiting for it.
	ErrVoterNotCaughtUp = errors.New("controller: the node has not caught up with the metadata log")
)

// voterRequest is the body of add_voter (NodeID and Addr) and remove_voter (NodeID).
type voterRequest struct {
	NodeID int32  `json:"node_id"`
	Addr   string `json:"addr,omitempty"`
}

// checkVoterChange decides whether the voters may become next: not empty, and with a majority of
// next live, so that the quorum can commit once the change is made. It is pure; live says whether the
// leader heard from a node just now.
func checkVoterChange(next []int32, live func(int32) bool) error {
	if len(next) == 0 {
		return fmt.Errorf("%w: no voter would remain", ErrQuorumLoss)
	}
	n := 0
	for _, id := range next {
		if live(id) {
			n++
		}
	}
	if 2*n <= len(next) {
		return fmt.Errorf("%w: %d of the voters %v would be live, fewer than a majority", ErrQuorumLoss, n, next)
	}
	return nil
}

// AddVoter makes node id, whose controller (Raft) address is addr, a controller voter. The node must
// be a live broker (it registered, and heartbeats); a node already in the Raft configuration, as the
// non-voter every broker is, must be named at the address it has there. The errors:
// ErrDuplicateVoter, ErrQuorumLoss, ErrVoterNotCaughtUp, ErrInvalidCommand (not a live broker, another
// address, no quorum on a single-node store), ErrNotController.
func (s *Store) AddVoter(ctx context.Context, id int32, addr string) error {
	return s.changeVoters(ctx, methodAddVoter, voterRequest{NodeID: id, Addr: addr})
}

// RemoveVoter takes node id out of the controller voters: a live broker stays a Raft non-voter, any
// other node leaves the Raft configuration. The errors: ErrVoterNotFound, ErrQuorumLoss (the last
// voter, or too few live ones would remain), ErrInvalidCommand (a single-node store),
// ErrNotController.
func (s *Store) RemoveVoter(ctx context.Context, id int32) error {
	return s.changeVoters(ctx, methodRemoveVoter, voterRequest{NodeID: id})
}

func (s *Store) changeVoters(ctx context.Context, method string, req voterRequest) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.node == nil {
		return fmt.Errorf("%w: a single-node store has no quorum to change", ErrInvalidCommand)
	}
	return s.node.callLeader(ctx, s.node.client, method, req, nil)
}

// handleVoters answers add_voter and remove_voter on the leader.
func (n *raftNode) handleVoters(method string, body json.RawMessage) (any, error) {
	var req voterRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidCommand, method, err)
	}
	f := n.r.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("controller: raft configuration: %w", err)
	}
	servers := f.Configuration().Servers
	var voters []int32
	var current *raft.Server
	for i, srv := range servers {
		id, ok := parseServerID(srv.ID)
		if !ok {
			continue
		}
		if srv.Suffrage == raft.Voter {
			voters = append(voters, id)
		}
		if id == req.NodeID {
			current = &servers[i]
		}
	}
	isVoter := slices.Contains(voters, req.NodeID)
	var fut raft.Future
	if method == methodAddVoter {
		switch {
		case isVoter:
			return nil, fmt.Errorf("%w: node %d", ErrDuplicateVoter, req.NodeID)
		case req.Addr == "":
			return nil, fmt.Errorf("%w: add_voter without an address", ErrInvalidCommand)
		case !n.live(req.NodeID):
			return nil, fmt.Errorf("%w: node %d is not a live broker", ErrInvalidCommand, req.NodeID)
		case current != nil && string(current.Address) != req.Addr:
			return nil, fmt.Errorf("%w: node %d's controller address is %s, not %s", ErrInvalidCommand, req.NodeID, current.Address, req.Addr)
		}
		if err := checkVoterChange(append(voters, req.NodeID), n.live); err != nil {
			return nil, err
		}
		if err := n.caughtUp(req.NodeID); err != nil {
			return nil, err
		}
		fut = n.r.AddVoter(serverID(req.NodeID), raft.ServerAddress(req.Addr), 0, n.cfg.RPCTimeout)
	} else {
		if !isVoter {
			return nil, fmt.Errorf("%w: node %d", ErrVoterNotFound, req.NodeID)
		}
		next := slices.DeleteFunc(slices.Clone(voters), func(id int32) bool { return id == req.NodeID })
		if err := checkVoterChange(next, n.live); err != nil {
			return nil, err
		}
		if n.live(req.NodeID) {
			fut = n.r.DemoteVoter(serverID(req.NodeID), 0, n.cfg.RPCTimeout)
		} else {
			fut = n.r.RemoveServer(serverID(req.NodeID), 0, n.cfg.RPCTimeout)
		}
	}
	if err := fut.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
			return nil, fmt.Errorf("%w: %w", n.notLeader(), err)
		}
		return nil, fmt.Errorf("controller: %s %d: %w", method, req.NodeID, err)
	}
	n.log.Info("controller: voters changed", "change", method, "node_id", req.NodeID, "addr", req.Addr)
	return struct{}{}, nil
}

// caughtUp checks that broker id had, at its last heartbeat, applied the metadata log up to what was
// committed at the heartbeat before. A voter counts toward every commit from the moment it is added, so
// one that lags would hold the quorum back until it catches up; as KIP-853's leader does, the leader
// adds only a node that keeps up, and answers the others ErrVoterNotCaughtUp, to be tried again.
func (n *raftNode) caughtUp(id int32) error {
	if id == n.cfg.Self.NodeID {
		return nil
	}
	ss, _ := n.sess.get(id)
	if ss.prevCommit == 0 || ss.applied < ss.prevCommit {
		return fmt.Errorf("%w: node %d reported index %d applied at its last heartbeat, behind the %d committed a heartbeat earlier; try again once it has caught up",
			ErrVoterNotCaughtUp, id, ss.applied, ss.prevCommit)
	}
	return nil
}

// live reports whether the leader heard from broker id within the last two heartbeat intervals
// (itself always). The session is too long a measure: a voter killed a few seconds ago still has one,
// and counting it could commit a configuration whose live voters are no majority, which no leader
// can then change back.
func (n *raftNode) live(id int32) bool {
	if id == n.cfg.Self.NodeID {
		return true
	}
	ss, ok := n.sess.get(id)
	return ok && !ss.lastSeen.IsZero() && n.cfg.Clock.Now().Sub(ss.lastSeen) <= 2*n.cfg.HeartbeatInterval
}

// votes reports whether id is a voter in the latest Raft configuration. Registration asks it, rather
// than --controller-voters, so that a voter removed while it was down is added back as a non-voter
// when it registers again.
func (n *raftNode) votes(id int32) bool {
	f := n.r.GetConfiguration()
	if f.Error() != nil {
		_, initial := n.voters[id]
		return initial
	}
	for _, srv := range f.Configuration().Servers {
		if srv.ID == serverID(id) {
			return srv.Suffrage == raft.Voter
		}
	}
	return false
}
