package server

import (
	"slices"
	"strings"
	"testing"

	"github.com/weir-mq/weir/internal/controller"
)

// TestServerOutOfSync: /readyz's check names the partitions hosted on a node that are not in their
// ISR, and says nothing once they all are.
func TestServerOutOfSync(t *testing.T) {
	img := threeBrokerImage(t, [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 2, 1}})
	if got := outOfSync(img, 1); got != "" {
		t.Fatalf("fresh topic: %q, want in sync", got)
	}
	for p := int32(1); p < 3; p++ {
		st := img.Topics["t"].States[p]
		isr := slices.DeleteFunc(slices.Clone(st.ISR), func(id int32) bool { return id == 1 })
		img = applyTo(t, img, controller.AlterPartition{Topic: "t", Partition: p, Leader: st.Leader, LeaderEpoch: st.LeaderEpoch,
			PartitionEpoch: st.PartitionEpoch, ISR: isr})
	}
	if got := outOfSync(img, 1); !strings.HasPrefix(got, "2 partitions hosted here are not back in their ISR yet (t-1, t-2)") {
		t.Fatalf("node 1 out of two ISRs: %q", got)
	}
	if got := outOfSync(img, 2); got != "" {
		t.Fatalf("node 2 in every ISR: %q", got)
	}
}

// threeBrokerImage is an image of brokers 1, 2 and 3 and a topic "t" with the given replicas.
func threeBrokerImage(t *testing.T, replicas [][]int32) *controller.Image {
	t.Helper()
	img := controller.NewImage("c", 1)
	for id := int32(1); id <= 3; id++ {
		img = applyTo(t, img, controller.RegisterBroker{Broker: controller.Broker{NodeID: id, Host: "h", Port: 9000 + id, Incarnation: "a"}})
	}
	return applyTo(t, img, controller.CreateTopic{Name: "t", ID: controller.TopicID{1}, Partitions: int32(len(replicas)), Replicas: replicas})
}

// applyTo applies cmd to img, failing the test when Apply refuses it.
func applyTo(t *testing.T, img *controller.Image, cmd controller.Command) *controller.Image {
	t.Helper()
	next, err := controller.Apply(img, cmd)
	if err != nil {
		t.Fatalf("apply %T: %v", cmd, err)
	}
	return next
}
