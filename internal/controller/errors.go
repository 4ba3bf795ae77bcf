package controller

import "errors"

// Errors returned by Apply and by the Store. The Kafka API layer maps each to a Kafka error code;
// returned errors wrap one of these with %w and add detail.
var (
	// ErrTopicExists is returned when creating a topic whose name is taken.
	ErrTopicExists = errors.New("controller: topic already exists")
	// ErrUnknownTopic is returned for a command naming a topic that does not exist.
	ErrUnknownTopic = errors.New("controller: unknown topic")
	// ErrInvalidTopicName is returned for a name that is empty, too long, ".", "..", uses a character
	// outside [a-zA-Z0-9._-], or collides with an existing topic once '.' and '_' are treated alike.
	ErrInvalidTopicName = errors.New("controller: invalid topic name")
	// ErrInvalidPartitions is returned for a partition count below 1, above MaxPartitions, or (for
	// CreatePartitions) not above the current count.
	ErrInvalidPartitions = errors.New("controller: invalid number of partitions")
	// ErrInvalidReplication is returned for a replication factor the cluster cannot place.
	ErrInvalidReplication = errors.New("controller: invalid replication factor")
	// ErrInvalidConfig is returned for an unknown config key or a value out of range or malformed.
	ErrInvalidConfig = errors.New("controller: invalid config")
	// ErrInternalTopic is returned when a client tries to delete an internal topic.
	ErrInternalTopic = errors.New("controller: internal topic")
	// ErrInvalidCommand is returned by Apply for a command it does not know or with impossible fields
	// (a zero topic id, a non-positive producer-id count).
	ErrInvalidCommand = errors.New("controller: invalid command")
	// ErrProducerIDsExhausted is returned when the producer-id counter would overflow.
	ErrProducerIDsExhausted = errors.New("controller: producer ids exhausted")
	// ErrCorruptMetadata is returned by OpenLocal when the metadata file fails its checksum or does not
	// decode into a valid image.
	ErrCorruptMetadata = errors.New("controller: corrupt metadata file")
	// ErrFailed is returned by every Store command after a write of the metadata file failed; the
	// node must restart to learn which image is on disk.
	ErrFailed = errors.New("controller: metadata store failed")
	// ErrClosed is returned by Store methods after Close.
	ErrClosed = errors.New("controller: store closed")
)
