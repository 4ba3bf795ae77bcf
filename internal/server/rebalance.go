package server

import (
	"context"
	"slices"
	"time"

	"github.com/weir-mq/weir/internal/controller"
)

// startRebalancer runs the preferred-leader rebalance (Kafka's auto.leader.rebalance.enable): every
// LeaderRebalanceInterval the node whose image names it the controller leader asks the quorum to
// move leadership back to each partition's preferred replica (Replicas[0]) wherever that replica is
// live, in the ISR and not already leading. A broker that returns after a failure thus takes back
// its leaderships within one interval of rejoining the ISR. Proposing from a node that has just
// lost leadership is harmless: the command is forwarded and Apply skips what is already in place.
func (n *Node) startRebalancer() {
	ctx, cancel := context.WithCancel(context.Background())
	n.bgStop = cancel
	every := n.cfg.LeaderRebalanceInterval
	if every == 0 {
		every = DefaultLeaderRebalanceInterval
	}
	if every < 0 {
		return
	}
	n.bgWG.Add(1)
	go func() {
		defer n.bgWG.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-n.clock.After(every):
			}
			n.rebalance(ctx, every)
		}
	}()
}

// rebalance proposes one ElectPreferredLeaders for the partitions that need it, if this node is
// the controller leader in its image.
func (n *Node) rebalance(ctx context.Context, timeout time.Duration) {
	img := n.store.Image()
	if img.ControllerID != n.cfg.NodeID {
		return
	}
	moves := preferredMoves(img, n.store.Heard)
	if len(moves) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := n.store.ElectPreferredLeaders(ctx, moves); err != nil {
		n.logger.Warn("preferred leader election", "partitions", len(moves), "err", err)
		return
	}
	n.logger.Info("moved leadership back to preferred replicas", "partitions", len(moves))
}

// preferredMoves lists the partitions whose preferred replica is live, in the ISR and not the
// leader, and whose leader the controller has just heard from (heard; a leader cut off from the
// controller keeps leading until its lease ends, so moving away from it could give the partition two
// leaders that take acks=1 writes): those an ElectPreferredLeaders should change.
func preferredMoves(img *controller.Image, heard func(int32) bool) []controller.TopicPartition {
	var out []controller.TopicPartition
	for _, name := range img.TopicNames() {
		for p, st := range img.Topics[name].States {
			pref := st.Replicas[0]
			if st.Leader == pref || !slices.Contains(st.ISR, pref) {
				continue
			}
			if st.Leader != controller.NoLeader && !heard(st.Leader) {
				continue
			}
			if b, ok := img.Broker(pref); !ok || b.Fenced {
				continue
			}
			out = append(out, controller.TopicPartition{Topic: name, Partition: int32(p)})
		}
	}
	return out
}
