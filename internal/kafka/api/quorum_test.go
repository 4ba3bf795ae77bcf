package api_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestQuorumKeysOneNode drives DescribeQuorum, AddRaftVoter and RemoveRaftVoter with franz-go against
// one node, the quorum's only voter: DescribeQuorum names it leader and voter at its controller
// address; adding it again is DUPLICATE_VOTER, removing it (the last voter) INVALID_REQUEST, removing
// a node that is no voter VOTER_NOT_FOUND, adding a node that is no live broker INVALID_REQUEST, another
// cluster id INCONSISTENT_CLUSTER_ID; and the quorum is unchanged after.
func TestQuorumKeysOneNode(t *testing.T) {
	n := startNode(t)
	cl := newClient(t, n)
	ctx := testCtx(t)
	describe := func() *kmsg.DescribeQuorumResponse {
		t.Helper()
		req := kmsg.NewPtrDescribeQuorumRequest()
		for _, topic := range []string{"__cluster_metadata", "other"} {
			rt := kmsg.NewDescribeQuorumRequestTopic()
			rt.Topic = topic
			rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != 2 || resp.Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("describe quorum: %+v", resp)
		}
		return resp
	}
	p := describe().Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.LeaderID != 1 || p.LeaderEpoch < 1 || p.HighWatermark < 1 ||
		len(p.CurrentVoters) != 1 || p.CurrentVoters[0].ReplicaID != 1 || len(p.Observers) != 0 {
		t.Fatalf("quorum of one: %+v", p)
	}
	resp := describe()
	if len(resp.Nodes) != 1 || resp.Nodes[0].NodeID != 1 || len(resp.Nodes[0].Listeners) != 1 || resp.Nodes[0].Listeners[0].Name != "CONTROLLER" {
		t.Fatalf("nodes: %+v", resp.Nodes)
	}
	ctrl := resp.Nodes[0].Listeners[0]

	add := func(id int32, cluster *string) int16 {
		t.Helper()
		req := kmsg.NewPtrAddRaftVoterRequest()
		req.VoterID, req.ClusterID = id, cluster
		l := kmsg.NewAddRaftVoterRequestListener()
		l.Name, l.Host, l.Port = "CONTROLLER", ctrl.Host, ctrl.Port
		req.Listeners = append(req.Listeners, l)
		r, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return r.ErrorCode
	}
	remove := func(id int32) int16 {
		t.Helper()
		req := kmsg.NewPtrRemoveRaftVoterRequest()
		req.VoterID = id
		r, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return r.ErrorCode
	}
	for _, c := range []struct {
		what string
		got  int16
		want *kerr.Error
	}{
		{"add voter 1", add(1, nil), kerr.DuplicateVoter},
		{"add node 9", add(9, nil), kerr.InvalidRequest},
		{"add under another cluster id", add(1, kmsg.StringPtr("other")), kerr.InconsistentClusterID},
		{"remove the last voter", remove(1), kerr.InvalidRequest},
		{"remove node 9", remove(9), kerr.VoterNotFound},
	} {
		if c.got != c.want.Code {
			t.Errorf("%s: %v, want %v", c.what, kerr.ErrorForCode(c.got), c.want)
		}
	}
	if p := describe().Topics[0].Partitions[0]; len(p.CurrentVoters) != 1 || p.CurrentVoters[0].ReplicaID != 1 {
		t.Errorf("the refused changes changed the quorum: %+v", p)
	}
}
