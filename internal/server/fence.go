package server

import (
	"fmt"
	"slices"

	"github.com/weir-mq/weir/internal/controller"
)

// fenceOutcome is what fencing a broker does to the partitions it hosts.
type fenceOutcome struct {
	// elsewhere counts the partitions another replica leads.
	elsewhere int
	// offline counts the partitions no other replica can lead (on a single node, all of them): they
	// are offline until this broker is back.
	offline int
}

// fenceOutcomeOf reads what fencing self does, or did, to its partitions from img: an image in which
// self is not fenced yet is first fenced the way the controller does it.
func fenceOutcomeOf(img *controller.Image, self int32) fenceOutcome {
	if b, ok := img.Broker(self); ok && !b.Fenced {
		if next, err := controller.Apply(img, controller.FenceBroker{NodeID: self}); err == nil {
			img = next
		}
	}
	var o fenceOutcome
	for _, t := range img.Topics {
		for _, st := range t.States {
			switch {
			case !slices.Contains(st.Replicas, self):
			case st.Leader == controller.NoLeader || st.Leader == self:
				o.offline++
			default:
				o.elsewhere++
			}
		}
	}
	return o
}

func (o fenceOutcome) String() string {
	const repair = "offline until the data directory is repaired and the node restarted"
	switch {
	case o.offline == 0 && o.elsewhere == 0:
		return "it hosted no partitions"
	case o.offline == 0:
		return fmt.Sprintf("other replicas lead its partitions (%d)", o.elsewhere)
	case o.elsewhere == 0:
		return fmt.Sprintf("no other replica can lead its partitions (%d): they are %s", o.offline, repair)
	default:
		return fmt.Sprintf("other replicas lead %d of its partitions; no other replica can lead the remaining %d: they are %s",
			o.elsewhere, o.offline, repair)
	}
}
