package server

import (
	"log/slog"

	"github.com/weir-mq/weir/internal/group"
)

// Config is what a node is built from: the command-line contract of `weir serve` (ARCHITECTURE.md).
type Config struct {
	// NodeID is this node's broker id (and controller id when it is a voter).
	NodeID int32
	// DataDir holds meta.properties, the controller's state and one folder per hosted replica.
	DataDir string
	// KafkaAddr is where the Kafka protocol listens; AdvertisedKafkaAddr is what Metadata tells
	// clients (KafkaAddr when empty).
	KafkaAddr           string
	AdvertisedKafkaAddr string
	// HTTPAddr serves /healthz (and later /metrics and the JSON API).
	HTTPAddr string
	// ControllerAddr is where this node's controller listens; ControllerVoters names every voter as
	// id@host:port. Empty voters means the embedded single-node default: this node alone.
	ControllerAddr   string
	ControllerVoters string
	// Groups configures the group coordinator (offsets.topic.num.partitions, offsets.retention.minutes,
	// offset.metadata.max.bytes, group.initial.rebalance.delay.ms, ...); zero fields take Kafka's
	// defaults, except InitialRebalanceDelay, where zero is no delay.
	Groups group.CoordinatorConfig
	// Logger receives the node's logs; slog.Default() when nil.
	Logger *slog.Logger
}

// DefaultConfig is the single durable node that `weir serve` runs with no flags.
func DefaultConfig() Config {
	return Config{
		NodeID:         1,
		DataDir:        "./weir-data",
		KafkaAddr:      "localhost:9092",
		HTTPAddr:       "localhost:8080",
		ControllerAddr: "localhost:9093",
		Groups:         group.CoordinatorConfig{InitialRebalanceDelay: group.DefaultInitialRebalanceDelay},
	}
}
