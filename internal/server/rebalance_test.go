package server

import (
	"reflect"
	"testing"

	"github.com/weir-mq/weir/internal/controller"
)

// TestServerPreferredMoves: a broker that was fenced and came back takes back its preferred
// leaderships only once it is in the ISR again.
func TestServerPreferredMoves(t *testing.T) {
	img := threeBrokerImage(t, [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}})
	apply := func(cmd controller.Command) { img = applyTo(t, img, cmd) }
	if moves := preferredMoves(img, heardAll); len(moves) != 0 {
		t.Fatalf("fresh topic: moves %v, want none", moves)
	}
	apply(controller.FenceBroker{NodeID: 1})
	apply(controller.UnfenceBroker{NodeID: 1})
	if moves := preferredMoves(img, heardAll); len(moves) != 0 {
		t.Fatalf("broker 1 back but out of the ISR: moves %v, want none", moves)
	}
	st := img.Topics["t"].States[0]
	if st.Leader == 1 {
		t.Fatalf("partition 0 still led by fenced broker 1: %+v", st)
	}
	apply(controller.AlterPartition{Topic: "t", Partition: 0, Leader: st.Leader, LeaderEpoch: st.LeaderEpoch,
		PartitionEpoch: st.PartitionEpoch, ISR: append([]int32{1}, st.ISR...)})
	want := []controller.TopicPartition{{Topic: "t", Partition: 0}}
	if moves := preferredMoves(img, heardAll); !reflect.DeepEqual(moves, want) {
		t.Fatalf("broker 1 back in the ISR: moves %v, want %v", moves, want)
	}
	silent := func(id int32) bool { return id != st.Leader }
	if moves := preferredMoves(img, silent); len(moves) != 0 {
		t.Fatalf("leader %d not heard from lately: moves %v, want none", st.Leader, moves)
	}
	apply(controller.ElectPreferredLeaders{Partitions: want})
	if moves := preferredMoves(img, heardAll); len(moves) != 0 || img.Topics["t"].States[0].Leader != 1 {
		t.Fatalf("after the election: moves %v, leader %d", moves, img.Topics["t"].States[0].Leader)
	}
}

// heardAll is a controller that has just heard from every broker.
func heardAll(int32) bool { return true }
