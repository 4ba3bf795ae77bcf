package api_test

import (
	"context"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/kafka/wire"
)

// TestAPIMetadataOfflineReplicas: Metadata leaves a fenced broker out of its brokers and reports its
// replicas as offline, answering for every topic and for topics by name alike.
func TestAPIMetadataOfflineReplicas(t *testing.T) {
	var cmds []controller.Command
	for id := int32(1); id <= 3; id++ {
		cmds = append(cmds, controller.RegisterBroker{Broker: controller.Broker{NodeID: id, Host: "h", Port: 9000 + id, Incarnation: "i"}})
	}
	cmds = append(cmds,
		controller.CreateTopic{Name: "a", ID: controller.TopicID{1}, Partitions: 1, Replicas: [][]int32{{1, 2, 3}}},
		controller.CreateTopic{Name: "b", ID: controller.TopicID{2}, Partitions: 1, Replicas: [][]int32{{2, 1}}},
		controller.FenceBroker{NodeID: 3},
	)
	br := brokerOver(t, cmds)
	ctx := context.Background()
	metadata := func(topics ...string) *kmsg.MetadataResponse {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		for _, name := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = &name
			req.Topics = append(req.Topics, rt)
		}
		wreq := &wire.Request{Key: req.Key(), Version: req.Version, Body: req, Principal: wire.AnonymousPrincipal, Listener: "PLAINTEXT"}
		return br.Handle(ctx, wreq)(ctx).(*kmsg.MetadataResponse)
	}
	want := map[string][]int32{"a": {3}, "b": nil}
	for _, resp := range []*kmsg.MetadataResponse{metadata(), metadata("a", "b")} {
		var ids []int32
		for _, mb := range resp.Brokers {
			ids = append(ids, mb.NodeID)
		}
		if !slices.Equal(ids, []int32{1, 2}) {
			t.Errorf("brokers %v, want 1 and 2 (3 is fenced)", ids)
		}
		if len(resp.Topics) != 2 {
			t.Fatalf("%d topics, want 2", len(resp.Topics))
		}
		for _, mt := range resp.Topics {
			mp := mt.Partitions[0]
			if mp.ErrorCode != 0 || !slices.Equal(mp.OfflineReplicas, want[*mt.Topic]) {
				t.Errorf("topic %s: error %v, offline replicas %v, want none and %v", *mt.Topic, kerr.ErrorForCode(mp.ErrorCode), mp.OfflineReplicas, want[*mt.Topic])
			}
		}
	}
}
