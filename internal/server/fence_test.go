package server

import (
	"testing"

	"github.com/weir-mq/weir/internal/controller"
)

// TestServerFenceOutcome: what a broker whose data directory failed says about its partitions once
// it is fenced: those another replica leads, and those (every one, on a single node) that are offline
// until it is back. Nothing claims a partition moved when no other replica exists.
func TestServerFenceOutcome(t *testing.T) {
	build := func(t *testing.T, brokers int32, topics ...controller.CreateTopic) *controller.Image {
		t.Helper()
		img := controller.NewImage("c", 1)
		apply := func(cmd controller.Command) {
			t.Helper()
			next, err := controller.Apply(img, cmd)
			if err != nil {
				t.Fatalf("apply %T: %v", cmd, err)
			}
			img = next
		}
		for id := int32(1); id <= brokers; id++ {
			apply(controller.RegisterBroker{Broker: controller.Broker{NodeID: id, Host: "h", Port: 9000 + id, Incarnation: "a"}})
		}
		for i, ct := range topics {
			ct.ID = controller.TopicID{byte(i + 1)}
			ct.Partitions = int32(len(ct.Replicas))
			apply(ct)
		}
		return img
	}
	for _, tc := range []struct {
		name    string
		brokers int32
		topics  []controller.CreateTopic
		want    fenceOutcome
		text    string
	}{
		{
			name: "single node", brokers: 1,
			topics: []controller.CreateTopic{{Name: "a", Replicas: [][]int32{{1}, {1}}}, {Name: "b", Replicas: [][]int32{{1}}}},
			want:   fenceOutcome{offline: 3},
			text:   "no other replica can lead its partitions (3): they are offline until the data directory is repaired and the node restarted",
		},
		{
			name: "three replicas", brokers: 3,
			topics: []controller.CreateTopic{{Name: "r", Replicas: [][]int32{{1, 2, 3}, {2, 3, 1}}}},
			want:   fenceOutcome{elsewhere: 2},
			text:   "other replicas lead its partitions (2)",
		},
		{
			name: "some with one replica", brokers: 3,
			topics: []controller.CreateTopic{
				{Name: "r", Replicas: [][]int32{{1, 2, 3}}},
				{Name: "s", Replicas: [][]int32{{1}}},
				{Name: "o", Replicas: [][]int32{{2}}},
			},
			want: fenceOutcome{elsewhere: 1, offline: 1},
			text: "other replicas lead 1 of its partitions; no other replica can lead the remaining 1: they are offline " +
				"until the data directory is repaired and the node restarted",
		},
		{
			name: "no partitions", brokers: 2,
			topics: []controller.CreateTopic{{Name: "o", Replicas: [][]int32{{2}}}},
			text:   "it hosted no partitions",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := build(t, tc.brokers, tc.topics...)
			got := fenceOutcomeOf(img, 1)
			if got != tc.want || got.String() != tc.text {
				t.Fatalf("before the fence: %+v %q, want %+v %q", got, got, tc.want, tc.text)
			}
			fenced, err := controller.Apply(img, controller.FenceBroker{NodeID: 1})
			if err != nil {
				t.Fatal(err)
			}
			if again := fenceOutcomeOf(fenced, 1); again != tc.want {
				t.Fatalf("after the fence: %+v, want %+v", again, tc.want)
			}
		})
	}
}
