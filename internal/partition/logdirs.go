package partition

import "sort"

// ReplicaSize is one hosted replica as DescribeLogDirs describes it.
type ReplicaSize struct {
	Topic     string
	Partition int32
	// Bytes is the size of the replica's segments.
	Bytes int64
	// OffsetLag is 0 on a leader; on a follower, the leader's high watermark as last fetched minus the
	// replica's log end (never negative).
	OffsetLag int64
}

// DataDir is the directory that holds the Manager's replicas.
func (m *Manager) DataDir() string { return m.dataDir }

// ReplicaSizes returns every hosted replica's size and lag, sorted by topic and partition.
func (m *Manager) ReplicaSizes() []ReplicaSize {
	var out []ReplicaSize
	for k, h := range m.snapshot() {
		rs := ReplicaSize{Topic: k.topic, Partition: k.partition}
		for _, s := range h.r.log.Segments() {
			rs.Bytes += s.Size
		}
		if !h.r.IsLeader() {
			rs.OffsetLag = max(h.r.leaderHW.Load()-h.r.log.EndOffset(), 0)
		}
		out = append(out, rs)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}
