package controller

import (
	"encoding/base64"
	"fmt"
	"slices"
	"sort"

	"github.com/weir-mq/weir/internal/acl"
)

// TopicID is a topic's UUID. It converts to and from kmsg's [16]byte fields by assignment. Its text
// form is Kafka's: unpadded URL-safe base64.
type TopicID [16]byte

// String returns the id as Kafka prints it.
func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// MarshalText encodes the id as String does.
func (id TopicID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText decodes the form String produces.
func (id *TopicID) UnmarshalText(b []byte) error {
	var dst [16]byte
	if base64.RawURLEncoding.DecodedLen(len(b)) != len(dst) {
		return fmt.Errorf("%w: topic id %q", ErrCorruptMetadata, b)
	}
	n, err := base64.RawURLEncoding.Decode(dst[:], b)
	if err != nil || n != len(dst) {
		return fmt.Errorf("%w: topic id %q", ErrCorruptMetadata, b)
	}
	*id = dst
	return nil
}

// IsZero reports whether id is the reserved all-zero id, which no topic has.
func (id TopicID) IsZero() bool { return id == TopicID{} }

// Broker is a node that hosts replicas.
type Broker struct {
	NodeID int32
	Host   string
	Port   int32
	// Rack is empty when the broker names none.
	Rack string
	// Incarnation is chosen at random by the broker process each time it starts; the single-node
	// store leaves it empty.
	Incarnation string
	// Epoch is the image Version that registered this incarnation (Kafka's broker epoch).
	Epoch int64
	// Fenced is set when the broker's session expired: it leads nothing and is in no ISR it could
	// leave without emptying it.
	Fenced bool

	// Listeners are the broker's advertised Kafka listeners by name; Host and Port are the
	// inter-broker one's. A broker registered before listeners existed has none: its Host and Port
	// are then its one PLAINTEXT listener (Endpoint).
	Listeners []Endpoint `json:",omitempty"`
}

// Endpoint is one advertised Kafka listener of a broker.
type Endpoint struct {
	Name string
	Host string
	Port int32
}

// Endpoint returns the broker's advertised address on the listener called name.
func (b Broker) Endpoint(name string) (host string, port int32, ok bool) {
	if len(b.Listeners) == 0 {
		return b.Host, b.Port, name == "PLAINTEXT" || name == ""
	}
	for _, e := range b.Listeners {
		if e.Name == name {
			return e.Host, e.Port, true
		}
	}
	return "", 0, false
}

// NoLeader is the Leader of a partition that has none.
const NoLeader int32 = -1

// PartitionState is the replica set and leadership of one partition. A PartitionState reachable
// from a published Image is never modified.
type PartitionState struct {
	// Replicas lists the brokers hosting the partition in preference order; Replicas[0] is the
	// preferred leader.
	Replicas []int32
	// Leader is the leading broker, or NoLeader.
	Leader int32
	// LeaderEpoch grows by one every time leadership changes hands (or the leader restarts).
	LeaderEpoch int32
	// ISR is the in-sync replica set; it is never empty.
	ISR []int32
	// ELR holds replicas outside the ISR that still have every acknowledged record and may be
	// elected cleanly (KIP-966's eligible leader replicas; see docs/controller.md).
	ELR []int32
	// PartitionEpoch grows by one with every change of this state.
	PartitionEpoch int32

	// AddingReplicas and RemovingReplicas describe a move in progress (KIP-455; docs/reassignment.md):
	// Replicas is then the target followed by the replicas being removed. Both are empty otherwise.
	AddingReplicas   []int32 `json:",omitempty"`
	RemovingReplicas []int32 `json:",omitempty"`
}

func (st *PartitionState) clone() *PartitionState {
	n := *st
	n.Replicas = append([]int32(nil), st.Replicas...)
	n.ISR = append([]int32(nil), st.ISR...)
	if st.ELR != nil {
		n.ELR = append([]int32(nil), st.ELR...)
	}
	n.AddingReplicas = slices.Clone(st.AddingReplicas)
	n.RemovingReplicas = slices.Clone(st.RemovingReplicas)
	return &n
}

// Topic is one topic. A Topic reachable from a published Image is never modified.
type Topic struct {
	Name       string
	ID         TopicID
	Partitions int32
	// Configs holds only the keys set on the topic; Image.LogConfig resolves defaults.
	Configs map[string]string
	// Internal marks weir's own topics (__consumer_offsets, __transaction_state).
	Internal bool
	// CreatedMs is the creation time in Unix milliseconds, as stamped by the proposer.
	CreatedMs int64
	// States holds one entry per partition, indexed by partition number.
	States []*PartitionState
}

// Partition returns the state of partition p.
func (t *Topic) Partition(p int32) (*PartitionState, bool) {
	if p < 0 || int(p) >= len(t.States) {
		return nil, false
	}
	return t.States[p], true
}

// ReplicationFactor is the number of replicas of the topic's first partition.
func (t *Topic) ReplicationFactor() int16 {
	if len(t.States) == 0 {
		return 0
	}
	return int16(len(t.States[0].Replicas))
}

// Image is the cluster metadata at one point. An Image that has been published (returned by
// Store.Image or by Apply) is never modified; Apply builds a new one.
type Image struct {
	// Version counts the commands applied; it grows by one with every successful Apply.
	Version int64
	// ClusterID is Kafka's cluster id, a base64 UUID chosen when the metadata was created.
	ClusterID string
	// ControllerID is the controller leader whose BecomeController committed last (the node itself
	// in the single-node store).
	ControllerID int32
	// ControllerEpoch is the Raft term of that leader; 0 in the single-node store.
	ControllerEpoch int64
	// Brokers is sorted by NodeID.
	Brokers []Broker
	// Topics maps a topic name to its topic.
	Topics map[string]*Topic
	// BrokerConfigs holds the cluster-wide broker configs set dynamically (keys as Kafka's broker
	// configs name them, e.g. log.retention.ms); unset keys take their static defaults.
	BrokerConfigs map[string]string
	// PerBrokerConfigs holds broker configs set dynamically for one broker, by broker id; they come
	// before BrokerConfigs for that broker's logs (broker_config.go).
	PerBrokerConfigs map[int32]map[string]string `json:",omitempty"`
	// GroupConfigs holds the configs set on groups, by group id (group_config.go); a map reachable
	// from a published Image is never modified.
	GroupConfigs map[string]map[string]string `json:",omitempty"`
	// NextProducerID is the first producer id not yet handed out.
	NextProducerID int64

	// ScramCredentials holds the SCRAM credentials by user and mechanism; a map reachable from a
	// published Image is never modified.
	ScramCredentials map[string]map[int8]ScramCredential `json:",omitempty"`
	// ACLs are the access control bindings, in the order they were created. An image written before
	// ACLs existed has none. The slice is never modified: an ACL command gives the next image a new
	// one, any other command shares it, so its identity tells a reader whether the ACLs changed.
	ACLs []acl.Binding `json:",omitempty"`

	// ClientQuotas are the client quotas by entity, sorted by entity; an image written before quotas
	// existed has none. Like ACLs, the slice is never modified: a quota command gives the next image
	// a new one, so its identity tells a reader whether the quotas changed.
	ClientQuotas []ClientQuota `json:",omitempty"`

	byID map[TopicID]*Topic
}

// NewImage returns the image of a cluster that has just been formatted: no topics, no brokers.
func NewImage(clusterID string, controllerID int32) *Image {
	img := &Image{
		ClusterID:     clusterID,
		ControllerID:  controllerID,
		Topics:        map[string]*Topic{},
		BrokerConfigs: map[string]string{},
	}
	img.index()
	return img
}

func (img *Image) index() {
	img.byID = make(map[TopicID]*Topic, len(img.Topics))
	for _, t := range img.Topics {
		img.byID[t.ID] = t
	}
}

// Topic returns the topic named name.
func (img *Image) Topic(name string) (*Topic, bool) {
	t, ok := img.Topics[name]
	return t, ok
}

// TopicByID returns the topic whose id is id.
func (img *Image) TopicByID(id TopicID) (*Topic, bool) {
	t, ok := img.byID[id]
	return t, ok
}

// TopicNames returns every topic name, sorted.
func (img *Image) TopicNames() []string {
	names := make([]string, 0, len(img.Topics))
	for n := range img.Topics {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Broker returns the broker with node id id.
func (img *Image) Broker(id int32) (Broker, bool) {
	for _, b := range img.Brokers {
		if b.NodeID == id {
			return b, true
		}
	}
	return Broker{}, false
}

// LiveBrokers returns the brokers that are not fenced, sorted by NodeID.
func (img *Image) LiveBrokers() []Broker {
	out := make([]Broker, 0, len(img.Brokers))
	for _, b := range img.Brokers {
		if !b.Fenced {
			out = append(out, b)
		}
	}
	return out
}

// live reports whether id is a registered broker that is not fenced.
func (img *Image) live(id int32) bool {
	b, ok := img.Broker(id)
	return ok && !b.Fenced
}

// LeaderCounts returns how many partitions each broker leads.
func (img *Image) LeaderCounts() map[int32]int {
	out := make(map[int32]int, len(img.Brokers))
	for _, t := range img.Topics {
		for _, st := range t.States {
			if st.Leader != NoLeader {
				out[st.Leader]++
			}
		}
	}
	return out
}

// CheckReplicationFactor reports whether a topic with replication factor rf can be placed: -1 asks
// for the default, any other value must be between 1 and the number of live brokers. It returns
// ErrInvalidReplication otherwise.
func (img *Image) CheckReplicationFactor(rf int16) error {
	if rf == -1 {
		return nil
	}
	if n := len(img.LiveBrokers()); rf < 1 || int(rf) > n {
		return fmt.Errorf("%w: %d with %d live brokers", ErrInvalidReplication, rf, n)
	}
	return nil
}
