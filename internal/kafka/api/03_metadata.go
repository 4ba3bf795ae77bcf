package api

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
)

// metadata answers Metadata (key 3) from this node's image: the unfenced brokers, the controller, and
// the topics asked for (all of them for v0's empty list and v1+'s null), creating missing ones when
// allowed. Brokers are given at their endpoints of listener, the one the request came in on. Every
// node answers alike once it has applied the same metadata.
// Versions 0–3 carry no AllowAutoTopicCreation flag and imply it (kmsg decodes it as false there).
func (b *Broker) metadata(ctx context.Context, req *kmsg.MetadataRequest, listener string) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	img := b.meta.Image()
	resp.Brokers = b.brokers(img, listener)
	resp.ClusterID = &img.ClusterID
	resp.ControllerID = img.ControllerID
	live := liveBrokerIDs(img)

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, name := range img.TopicNames() {
			t, _ := img.Topic(name)
			resp.Topics = append(resp.Topics, b.topicMetadata(t, live))
		}
		return resp
	}
	autoCreate := (req.Version < 4 || req.AllowAutoTopicCreation) && img.AutoCreateTopics()
	for _, rt := range req.Topics {
		t, err := b.lookupTopic(img, rt.Topic, rt.TopicID)
		if errors.Is(err, errUnknownTopicOrPartition) && autoCreate && rt.Topic != nil {
			t, err = b.autoCreate(ctx, *rt.Topic, nil)
			img = b.meta.Image()
			live = liveBrokerIDs(img)
		}
		if err != nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
			mt.ErrorCode = errorCode(err)
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, b.topicMetadata(t, live))
	}
	return resp
}

// lookupTopic finds a topic by name or, when name is nil (Metadata v10+), by id.
func (b *Broker) lookupTopic(img *controller.Image, name *string, id [16]byte) (*controller.Topic, error) {
	if name == nil {
		if t, ok := img.TopicByID(id); ok {
			return t, nil
		}
		return nil, errUnknownTopicID
	}
	if t, ok := img.Topic(*name); ok {
		return t, nil
	}
	return nil, errUnknownTopicOrPartition
}

// autoCreate creates a topic a client asked for with the cluster's default partitions and configs,
// and configs of its own (nil for none). A concurrent creation of the same topic is not an error.
func (b *Broker) autoCreate(ctx context.Context, name string, configs map[string]string) (*controller.Topic, error) {
	t, err := b.meta.CreateTopic(ctx, name, -1, configs, false)
	if errors.Is(err, controller.ErrTopicExists) {
		if t, ok := b.meta.Image().Topic(name); ok {
			return t, nil
		}
		return nil, fmt.Errorf("%w: %s", errTopicNotReady, name)
	}
	if err != nil {
		return nil, err
	}
	b.log.Info("api: topic auto-created", "topic", name, "partitions", t.Partitions)
	b.reconcile()
	return t, nil
}

// brokers lists the brokers Metadata returns: every unfenced broker of the image at the address it
// registered for listener. A fenced broker is left out, as Kafka leaves out brokers whose session
// expired (its replicas are reported offline), and so is a broker without that listener, as Kafka
// does.
func (b *Broker) brokers(img *controller.Image, listener string) []kmsg.MetadataResponseBroker {
	live := img.LiveBrokers()
	out := make([]kmsg.MetadataResponseBroker, 0, len(live))
	for _, br := range live {
		host, port, ok := br.Endpoint(listener)
		if !ok {
			continue
		}
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = br.NodeID, host, port
		if br.Rack != "" {
			rack := br.Rack
			mb.Rack = &rack
		}
		out = append(out, mb)
	}
	return out
}

// topicMetadata describes t as the image has it: per partition the leader (LEADER_NOT_AVAILABLE
// when there is none, or when it is this broker and the broker has lost its controller lease), leader epoch (see leaderEpoch), replicas, ISR, and the replicas whose broker
// is not in live (fenced or unknown) as offline.
func (b *Broker) topicMetadata(t *controller.Topic, live map[int32]bool) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = t.Internal
	mt.Partitions = make([]kmsg.MetadataResponseTopicPartition, len(t.States))
	// A broker without its controller lease names no partition as its own: the controller may have
	// elected other leaders that this broker has not heard of.
	leased := b.meta.LeaseHeld()
	for p, st := range t.States {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = int32(p)
		mp.Leader = st.Leader
		mp.LeaderEpoch = b.leaderEpoch(t.Name, int32(p), st)
		if st.Leader == b.nodeID && !leased {
			mp.Leader = controller.NoLeader
		}
		if mp.Leader == controller.NoLeader {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mp.Replicas, mp.ISR = st.Replicas, st.ISR
		mp.OfflineReplicas = offlineReplicas(live, st.Replicas)
		mt.Partitions[p] = mp
	}
	return mt
}

// liveBrokerIDs returns the node ids of img's unfenced brokers, built once per request: looking
// each replica up among the brokers instead took most of an all-topics Metadata at 100,000
// partitions (docs/scaling.md).
func liveBrokerIDs(img *controller.Image) map[int32]bool {
	brokers := img.LiveBrokers()
	live := make(map[int32]bool, len(brokers))
	for _, br := range brokers {
		live[br.NodeID] = true
	}
	return live
}

// offlineReplicas returns the replicas whose broker is not in live: fenced or not registered.
func offlineReplicas(live map[int32]bool, replicas []int32) []int32 {
	var out []int32
	for _, id := range replicas {
		if !live[id] {
			out = append(out, id)
		}
	}
	return out
}

// leaderEpoch is the leader epoch Metadata gives for a partition: the image's, except where this
// node leads the partition and hosts its replica, which answers with the epoch the replica enforces
// on fetches (the image's, once the replica has applied it), so a client is never sent to this
// node with an epoch it would refuse.
func (b *Broker) leaderEpoch(topic string, p int32, st *controller.PartitionState) int32 {
	if st.Leader == b.nodeID {
		if r, ok := b.replicas.Replica(topic, p); ok {
			return r.LeaderEpoch()
		}
	}
	return st.LeaderEpoch
}
