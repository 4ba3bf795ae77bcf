package api

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
)

// electLeaders answers ElectLeaders (key 43) through the controller quorum, one ElectLeader per
// partition (docs/reassignment.md): preferred (type 0, and every v0 request) moves leadership to the
// first replica when it is live and in the ISR, unclean (type 1) elects any live replica of a partition
// without a leader. The errors are Kafka's: ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
// ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST for an unknown type.
// Null topics ask for every partition; the answer then names only the partitions an election was
// needed for.
func (b *Broker) electLeaders(ctx context.Context, req *kmsg.ElectLeadersRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	unclean := req.Version >= 1 && req.ElectionType == 1
	if req.Version >= 1 && req.ElectionType != 0 && req.ElectionType != 1 {
		resp.ErrorCode = errorCode(errInvalidRequest)
		return resp
	}
	all := req.Topics == nil
	targets := req.Topics
	if all {
		targets = electionCandidates(b.meta.Image(), unclean)
	}
	changed := false
	for _, rt := range targets {
		st := kmsg.NewElectLeadersResponseTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			err := b.meta.ElectLeader(ctx, controller.ElectLeader{Topic: rt.Topic, Partition: p, Unclean: unclean})
			if all && errors.Is(err, controller.ErrElectionNotNeeded) {
				continue
			}
			sp := kmsg.NewElectLeadersResponseTopicPartition()
			sp.Partition = p
			if err != nil {
				sp.ErrorCode, sp.ErrorMessage = errorCode(err), errorMessage(err)
			} else {
				changed = true
			}
			st.Partitions = append(st.Partitions, sp)
		}
		if !all || len(st.Partitions) > 0 {
			resp.Topics = append(resp.Topics, st)
		}
	}
	if changed {
		b.reconcile()
	}
	return resp
}

// electionCandidates lists the partitions an election over every partition concerns: those not led
// by their preferred replica, or (unclean) those without a leader.
func electionCandidates(img *controller.Image, unclean bool) []kmsg.ElectLeadersRequestTopic {
	var out []kmsg.ElectLeadersRequestTopic
	for _, name := range img.TopicNames() {
		t, _ := img.Topic(name)
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic = name
		for p, st := range t.States {
			if unclean && st.Leader == controller.NoLeader || !unclean && st.Leader != st.Replicas[0] {
				rt.Partitions = append(rt.Partitions, int32(p))
			}
		}
		if len(rt.Partitions) > 0 {
			out = append(out, rt)
		}
	}
	return out
}
