package api_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/sharestate"
)

// TestFindCoordinatorBatched: from v4 FindCoordinator names many keys and each is answered on its
// own, the same coordinator as v3 gives for it; share-partition keys (type 2) are found from v6, on
// the __share_group_state partition that holds them, and a malformed one is refused alone.
func TestFindCoordinatorBatched(t *testing.T) {
	n := startNode(t)
	rc := dialRaw(t, n)

	v3 := kmsg.NewPtrFindCoordinatorRequest()
	v3.Version, v3.CoordinatorKey = 3, "g1"
	one := rc.do(v3).(*kmsg.FindCoordinatorResponse)
	if one.ErrorCode != 0 || one.Port <= 0 {
		t.Fatalf("v3: %+v", one)
	}

	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorKeys = 4, []string{"g1", "g2", "g3"}
	resp := rc.do(req).(*kmsg.FindCoordinatorResponse)
	if len(resp.Coordinators) != 3 {
		t.Fatalf("v4 answered %d keys, want 3: %+v", len(resp.Coordinators), resp)
	}
	for i, c := range resp.Coordinators {
		if c.Key != req.CoordinatorKeys[i] || c.ErrorCode != 0 || c.NodeID != one.NodeID || c.Host != one.Host || c.Port != one.Port {
			t.Fatalf("v4 key %d: %+v, want %s at node %d %s:%d", i, c, req.CoordinatorKeys[i], one.NodeID, one.Host, one.Port)
		}
	}

	good := sharestate.SharePartition{Group: "sg:with:colons", TopicID: controller.TopicID{7}, Partition: 2}.String()
	bad := []string{"no-colons", "sg:not-a-topic-id:1", "sg:" + controller.TopicID{7}.String() + ":-1", ":" + controller.TopicID{7}.String() + ":1"}
	share := kmsg.NewPtrFindCoordinatorRequest()
	share.Version, share.CoordinatorType, share.CoordinatorKeys = 6, 2, append([]string{good}, bad...)
	resp = rc.do(share).(*kmsg.FindCoordinatorResponse)
	if len(resp.Coordinators) != 1+len(bad) {
		t.Fatalf("v6 share keys: %+v", resp)
	}
	if c := resp.Coordinators[0]; c.ErrorCode != 0 || c.NodeID != one.NodeID || c.Port != one.Port {
		t.Fatalf("share-partition key %s: %v %+v", good, kerr.ErrorForCode(c.ErrorCode), c)
	}
	for _, c := range resp.Coordinators[1:] {
		if c.ErrorCode != kerr.InvalidRequest.Code || c.NodeID != -1 {
			t.Fatalf("malformed share-partition key %q: %v, want INVALID_REQUEST", c.Key, kerr.ErrorForCode(c.ErrorCode))
		}
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(sharestate.StateTopic)
	md.Topics = append(md.Topics, mt)
	if tm := rc.do(md).(*kmsg.MetadataResponse).Topics[0]; tm.ErrorCode != 0 || len(tm.Partitions) == 0 {
		t.Fatalf("%s after a share-partition key was found: %v, %d partitions", sharestate.StateTopic, kerr.ErrorForCode(tm.ErrorCode), len(tm.Partitions))
	}

	share.Version = 5
	resp = rc.do(share).(*kmsg.FindCoordinatorResponse)
	if c := resp.Coordinators[0]; c.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("share-partition key at v5: %v, want INVALID_REQUEST", kerr.ErrorForCode(c.ErrorCode))
	}
	unknown := kmsg.NewPtrFindCoordinatorRequest()
	unknown.Version, unknown.CoordinatorType, unknown.CoordinatorKeys = 6, 3, []string{"x"}
	if c := rc.do(unknown).(*kmsg.FindCoordinatorResponse).Coordinators[0]; c.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("key type 3: %v, want INVALID_REQUEST", kerr.ErrorForCode(c.ErrorCode))
	}
}
