package api

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
)

// metadata answers Metadata (key 3): this node as the only broker and the controller, and the topics
// asked for (all of them for v0's empty list and v1+'s null), creating missing ones when allowed.
// Versions 0–3 carry no AllowAutoTopicCreation flag and imply it (kmsg decodes it as false there).
func (b *Broker) metadata(ctx context.Context, req *kmsg.MetadataRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	img := b.meta.Image()
	resp.Brokers = b.brokers(img)
	resp.ClusterID = &img.ClusterID
	resp.ControllerID = img.ControllerID

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, name := range img.TopicNames() {
			t, _ := img.Topic(name)
			resp.Topics = append(resp.Topics, b.topicMetadata(t))
		}
		return resp
	}
	autoCreate := (req.Version < 4 || req.AllowAutoTopicCreation) && img.AutoCreateTopics()
	for _, rt := range req.Topics {
		t, err := b.lookupTopic(img, rt.Topic, rt.TopicID)
		if errors.Is(err, errUnknownTopicOrPartition) && autoCreate && rt.Topic != nil {
			t, err = b.autoCreate(ctx, *rt.Topic)
			img = b.meta.Image()
		}
		if err != nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
			mt.ErrorCode = errorCode(err)
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, b.topicMetadata(t))
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

// autoCreate creates a topic a client asked for with the cluster's default partitions and configs.
// A concurrent creation of the same topic is not an error.
func (b *Broker) autoCreate(ctx context.Context, name string) (*controller.Topic, error) {
	t, err := b.meta.CreateTopic(ctx, name, -1, nil, false)
	if errors.Is(err, controller.ErrTopicExists) {
		if t, ok := b.meta.Image().Topic(name); ok {
			return t, nil
		}
	}
	if err != nil {
		return nil, err
	}
	b.log.Info("api: topic auto-created", "topic", name, "partitions", t.Partitions)
	b.reconcile()
	return t, nil
}

// brokers lists the brokers Metadata returns: this node at its advertised address.
func (b *Broker) brokers(img *controller.Image) []kmsg.MetadataResponseBroker {
	mb := kmsg.NewMetadataResponseBroker()
	mb.NodeID, mb.Host, mb.Port = b.nodeID, b.host, b.port
	if self, ok := img.Broker(b.nodeID); ok && self.Rack != "" {
		rack := self.Rack
		mb.Rack = &rack
	}
	return []kmsg.MetadataResponseBroker{mb}
}

// topicMetadata describes t with this node as leader, only replica and only ISR member of every
// partition.
func (b *Broker) topicMetadata(t *controller.Topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = t.Internal
	mt.Partitions = make([]kmsg.MetadataResponseTopicPartition, t.Partitions)
	nodes := []int32{b.nodeID}
	for p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p
		mp.Leader = b.nodeID
		mp.LeaderEpoch = b.leaderEpoch(t.Name, p)
		mp.Replicas, mp.ISR = nodes, nodes
		mt.Partitions[p] = mp
	}
	return mt
}

// leaderEpoch is the current leader epoch of a local replica, 0 when it is not open yet.
func (b *Broker) leaderEpoch(topic string, p int32) int32 {
	if r, ok := b.replicas.Replica(topic, p); ok {
		return r.LeaderEpoch()
	}
	return 0
}
