package api

import (
	"path/filepath"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeLogDirs answers DescribeLogDirs (key 35): the node's one data directory with every replica
// it hosts (null topics) or the named ones it hosts, each with the bytes of its segments and its
// offset lag (0 on a leader; on a follower the leader's last known high watermark minus its log end).
// v4's total and usable bytes of the volume are left at -1, unknown (docs/reassignment.md).
func (b *Broker) describeLogDirs(req *kmsg.DescribeLogDirsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = b.replicas.DataDir()
	if abs, err := filepath.Abs(dir.Dir); err == nil {
		dir.Dir = abs
	}
	var want map[string][]int32
	if req.Topics != nil {
		want = make(map[string][]int32, len(req.Topics))
		for _, t := range req.Topics {
			want[t.Topic] = append(want[t.Topic], t.Partitions...)
		}
	}
	for _, rs := range b.replicas.ReplicaSizes() {
		if want != nil && !slices.Contains(want[rs.Topic], rs.Partition) {
			continue
		}
		if n := len(dir.Topics); n == 0 || dir.Topics[n-1].Topic != rs.Topic {
			t := kmsg.NewDescribeLogDirsResponseDirTopic()
			t.Topic = rs.Topic
			dir.Topics = append(dir.Topics, t)
		}
		p := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		p.Partition, p.Size, p.OffsetLag = rs.Partition, rs.Bytes, rs.OffsetLag
		t := &dir.Topics[len(dir.Topics)-1]
		t.Partitions = append(t.Partitions, p)
	}
	resp.Dirs = append(resp.Dirs, dir)
	return resp
}
