package partition

import (
	"slices"
	"sort"
	"time"
)

// The roles ReplicaStatus.Role names.
const (
	RoleLeader   = "leader"
	RoleFollower = "follower"
	// RoleNone is a replica whose partition has no leader in the image.
	RoleNone = "none"
)

// ReplicaStatus is one hosted replica as `weir cluster status` and /metrics show it.
type ReplicaStatus struct {
	Topic          string `json:"topic"`
	Partition      int32  `json:"partition"`
	Role           string `json:"role"`
	LeaderEpoch    int32  `json:"leader_epoch"`
	Leader         int32  `json:"leader"`
	LogStartOffset int64  `json:"log_start_offset"`
	LogEndOffset   int64  `json:"log_end_offset"`
	HighWatermark  int64  `json:"high_watermark"`
	// LastStableOffset is where read_committed consumers stop: the high watermark, or the first offset
	// of the oldest transaction not yet settled below it.
	LastStableOffset int64   `json:"last_stable_offset"`
	Replicas         []int32 `json:"replicas"`
	ISR              []int32 `json:"isr"`
	// Followers is set on a leader: each other replica's progress, sorted by node id.
	Followers []FollowerStatus `json:"followers,omitempty"`
	// OpenTxn is the oldest open transaction, which holds the last stable offset back; nil when none.
	OpenTxn *OpenTxnStatus `json:"open_transaction,omitempty"`
}

// OpenTxnStatus is a partition's oldest open transaction.
type OpenTxnStatus struct {
	ProducerID  int64 `json:"producer_id"`
	FirstOffset int64 `json:"first_offset"`
	// StartedMs is the timestamp of its first batch (Unix milliseconds, as the producer stamped it).
	StartedMs int64 `json:"started_ms"`
}

// FollowerStatus is a leader's view of one follower.
type FollowerStatus struct {
	NodeID int32 `json:"node_id"`
	// LogEndOffset is the follower's durable LEO as last reported; -1 before its first fetch.
	LogEndOffset int64 `json:"log_end_offset"`
	// Lag is the leader's LEO minus the follower's (the leader's LEO when unknown).
	Lag int64 `json:"lag"`
	// SinceCaughtUp is how long ago the follower last reached the leader's LEO.
	SinceCaughtUp time.Duration `json:"since_caught_up"`
	InISR         bool          `json:"in_isr"`
}

// Status returns the replica's status.
func (r *Replica) Status() ReplicaStatus {
	var s ReplicaStatus
	if err := r.do(func() { s = r.c.status(r.clock.Now()) }); err != nil {
		v := r.view.Load()
		s = ReplicaStatus{Role: v.role.String(), LeaderEpoch: v.epoch, Leader: v.leader,
			LogStartOffset: r.log.StartOffset(), LogEndOffset: r.log.EndOffset(), HighWatermark: r.hw.Load(),
			LastStableOffset: r.LastStableOffset()}
	}
	s.Topic, s.Partition = r.topic, r.part
	return s
}

// status is the core's part of a ReplicaStatus.
func (c *core) status(now time.Time) ReplicaStatus {
	leo := c.log.EndOffset()
	s := ReplicaStatus{
		Role: c.role.String(), LeaderEpoch: c.epoch, Leader: c.leader,
		LogStartOffset: c.log.StartOffset(), LogEndOffset: leo, HighWatermark: c.hw, LastStableOffset: c.lso(),
		Replicas: slices.Clone(c.replicas), ISR: slices.Clone(c.isr),
	}
	if id, first, ok := c.producers.oldestOpen(); ok {
		s.OpenTxn = &OpenTxnStatus{ProducerID: id, FirstOffset: first, StartedMs: c.producers.m[id].txnFirstTimestamp}
	}
	if c.role != roleLeader {
		return s
	}
	for id, f := range c.followers {
		s.Followers = append(s.Followers, FollowerStatus{
			NodeID: id, LogEndOffset: f.leo, Lag: leo - max(f.leo, 0),
			SinceCaughtUp: now.Sub(f.lastCaughtUp), InISR: slices.Contains(c.isr, id),
		})
	}
	sort.Slice(s.Followers, func(i, j int) bool { return s.Followers[i].NodeID < s.Followers[j].NodeID })
	return s
}

// ReplicaStatus returns the status of every hosted replica, sorted by topic and partition.
func (m *Manager) ReplicaStatus() []ReplicaStatus {
	var out []ReplicaStatus
	for _, h := range m.snapshot() {
		out = append(out, h.r.Status())
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// UnderReplicated counts the partitions this node leads whose ISR is smaller than their replica set.
func (m *Manager) UnderReplicated() int {
	n := 0
	for _, h := range m.snapshot() {
		s := h.r.Status()
		if s.Role == roleLeader.String() && len(s.ISR) < len(s.Replicas) {
			n++
		}
	}
	return n
}
