package controller

import (
	"encoding/base64"
	"fmt"
	"sort"
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
	n, err := base64.RawURLEncoding.Decode(dst[:], b)
	if err != nil || n != len(dst) || base64.RawURLEncoding.DecodedLen(len(b)) != len(dst) {
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
}

// Image is the cluster metadata at one point. An Image that has been published (returned by
// Store.Image or by Apply) is never modified; Apply builds a new one.
type Image struct {
	// Version counts the commands applied; it grows by one with every successful Apply.
	Version int64
	// ClusterID is Kafka's cluster id, a base64 UUID chosen when the metadata was created.
	ClusterID    string
	ControllerID int32
	// Brokers is sorted by NodeID.
	Brokers []Broker
	// Topics maps a topic name to its topic.
	Topics map[string]*Topic
	// BrokerConfigs holds the cluster-wide broker configs set dynamically (keys as Kafka's broker
	// configs name them, e.g. log.retention.ms); unset keys take their static defaults.
	BrokerConfigs map[string]string
	// NextProducerID is the first producer id not yet handed out.
	NextProducerID int64

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

// CheckReplicationFactor reports whether a topic with replication factor rf can be placed: -1 asks
// for the default, any other value must be between 1 and the number of brokers. It returns
// ErrInvalidReplication otherwise.
func (img *Image) CheckReplicationFactor(rf int16) error {
	if rf == -1 {
		return nil
	}
	if rf < 1 || int(rf) > len(img.Brokers) {
		return fmt.Errorf("%w: %d with %d brokers", ErrInvalidReplication, rf, len(img.Brokers))
	}
	return nil
}
