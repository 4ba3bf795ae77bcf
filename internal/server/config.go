package server

import (
	"log/slog"
	"time"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/share"
	"github.com/weir-mq/weir/internal/sharestate"
	"github.com/weir-mq/weir/internal/txn"
	"github.com/weir-mq/weir/internal/vfs"
)

// Config is what a node is built from: the command-line contract of `weir serve` (docs/cli.md).
type Config struct {
	// NodeID is this node's broker id (and controller id when it is a voter).
	NodeID int32
	// DataDir holds meta.properties, the controller's state and one folder per hosted replica.
	DataDir string
	// StorageJournal makes durable appends go through one journal of DataDir
	// (partition.ManagerOptions.Journal).
	StorageJournal bool
	// KafkaAddr is where the Kafka protocol listens; AdvertisedKafkaAddr is what Metadata tells
	// clients (KafkaAddr when empty).
	KafkaAddr           string
	AdvertisedKafkaAddr string
	// Security (docs/security.md). Listeners, when set, replace KafkaAddr and AdvertisedKafkaAddr
	// (which must then be empty): the node's Kafka listeners. InterBrokerListener names the one that
	// followers, transaction markers and the HTTP API use (the first when empty). TLS serves the
	// SSL and SASL_SSL listeners. SASLMechanisms, SASLFailureDelay and SASLSessionLifetime
	// configure the SASL listeners (api.SASLOptions). BootstrapUser,
	// "NAME:PASSWORD", is a user whose SCRAM credentials the node creates at start when the
	// cluster has none for NAME.
	Listeners           []Listener
	InterBrokerListener string
	TLS                 TLSConfig
	SASLMechanisms      []string
	SASLFailureDelay    time.Duration
	SASLSessionLifetime time.Duration
	BootstrapUser       string
	// Node to node (docs/security.md). ControllerTLS puts the controller listener under mutual TLS
	// with the TLS files (--tls-ca is the cluster's CA). InterBrokerSASLUser and
	// InterBrokerSASLPassword are the node's SCRAM-SHA-512 credentials on a SASL inter-broker
	// listener.
	ControllerTLS           bool
	InterBrokerSASLUser     string
	InterBrokerSASLPassword string
	// HTTPAddr serves /healthz and /v1/cluster/status.
	HTTPAddr string
	// HTTPMembersMax caps the HTTP API's group members on this node (--http-members-max); zero
	// means httpapi.DefaultMembersMax.
	HTTPMembersMax int
	// ControllerAddr is where this node's controller listens (Raft and the controller RPC);
	// ControllerVoters names every voter as id@host:port. Empty voters means the embedded
	// single-node default: this node alone is the one voter. A node not among the voters joins as a
	// Raft non-voter and is a broker only.
	ControllerAddr   string
	ControllerVoters string
	// Rack is the broker's rack, used by rack-aware replica placement; empty means none.
	Rack string
	// BrokerSessionTimeout is how long the controller leader waits for a heartbeat before it fences
	// a broker; BrokerHeartbeatInterval is how often brokers heartbeat. Zero takes the controller's
	// defaults (6 s and 500 ms).
	BrokerSessionTimeout    time.Duration
	BrokerHeartbeatInterval time.Duration
	// ControllerRaftTimeout is Raft's heartbeat and election timeout; zero is the controller's
	// default (500 ms).
	ControllerRaftTimeout time.Duration
	// LeaderRebalanceInterval is how often the controller leader moves leadership back to each
	// partition's preferred replica (Kafka's auto.leader.rebalance.enable); zero means
	// DefaultLeaderRebalanceInterval, negative disables it.
	LeaderRebalanceInterval time.Duration
	// ReplicaLagMax is replica.lag.time.max.ms: how long an ISR follower may go without catching up
	// to its leader's log end before the leader drops it from the ISR; zero means
	// partition.DefaultReplicaLagMax (30 s).
	ReplicaLagMax time.Duration
	// Groups configures the group coordinator (offsets.topic.num.partitions,
	// offsets.topic.replication.factor, offsets.retention.minutes, offset.metadata.max.bytes,
	// group.initial.rebalance.delay.ms, ...); zero fields take Kafka's defaults, except
	// InitialRebalanceDelay, where zero is no delay.
	Groups group.CoordinatorConfig
	// Txn configures the transaction coordinator (transaction.state.log.num.partitions,
	// transaction.state.log.replication.factor, transaction.max.timeout.ms,
	// transactional.id.expiration.ms, transaction.abort.timed.out.transaction.cleanup.interval.ms);
	// zero fields take Kafka's defaults.
	Txn txn.Config
	// ShareGroups turns share groups on (KIP-932, a preview: docs/queues.md): the share-state
	// coordinator runs and the share keys (76-79) and share.version are advertised. Off by default,
	// since a share-partition is served only where its data partition's leader also leads its
	// __share_group_state partition, which a single node always does and a cluster often does not.
	ShareGroups bool
	// ShareState configures the share-state coordinator (share.coordinator.state.topic.num.partitions,
	// share.coordinator.state.topic.replication.factor; docs/queues.md); zero values are Kafka's.
	ShareState sharestate.Config
	// SharePartition holds the share-partitions' settings, the group.share.* broker defaults
	// (group.share.record.lock.duration.ms, group.share.delivery.count.limit,
	// group.share.partition.max.record.locks); zero fields are Kafka's.
	SharePartition share.Config
	// ShareGroup holds the share groups' membership settings, the broker defaults
	// group.share.session.timeout.ms and group.share.heartbeat.interval.ms; zero fields are Kafka's.
	ShareGroup share.GroupConfig
	// DeadLetterTopicPrefix is the node's static errors.deadletterqueue.topic.name.prefix (KIP-1191):
	// what a share group's dead-letter topic name must start with, at IncrementalAlterConfigs and at
	// each dead-letter write, until the cluster-wide config is set, which overrides it; empty lets a
	// group name any topic. DefaultConfig sets Kafka's "dlq.".
	DeadLetterTopicPrefix string
	// ShareOwnerIdle is how long a share-partition's owner may go without work before it stops and
	// frees its window, when no record is held and no share session names it (docs/queues.md); zero
	// means api.DefaultShareOwnerIdle. No flag sets it: tests shorten it.
	ShareOwnerIdle time.Duration
	// TxnVerificationDisabled turns off KIP-890 part 1 (Kafka's
	// transaction.partition.verification.enable=false): partition leaders then append the first
	// transactional batch of a transaction without asking its coordinator whether the partition is in
	// it.
	TxnVerificationDisabled bool
	// TransactionVersion is the finalized feature transaction.version the node advertises: 2 lets
	// clients use KIP-890 part 2 (TV2), 1 keeps them on the classic protocol; zero means
	// DefaultTransactionVersion.
	TransactionVersion int16
	// Authorizer is --authorizer: "acl" checks every request against the cluster's ACLs
	// (docs/security.md); "" or "none" allows everything. SuperUsers (--super-users, Kafka's
	// super.users) bypass the ACLs; AllowEveryoneIfNoACLFound allows an action on a resource no ACL
	// names (allow.everyone.if.no.acl.found).
	Authorizer                string
	SuperUsers                []string
	AllowEveryoneIfNoACLFound bool
	// QuotaWindowNum and QuotaWindowSize are --quota-window-num and --quota-window-size: client byte
	// rates and request times are measured over that many samples of that size (quota.window.num,
	// quota.window.size.seconds); zero means Kafka's 11 samples of 1s.
	QuotaWindowNum  int
	QuotaWindowSize time.Duration
	// DrainTimeout is how long Run and Node.Close let in-flight requests finish before their
	// connections are cut; zero means DefaultShutdownTimeout.
	DrainTimeout time.Duration
	// Logger receives the node's logs; slog.Default() when nil.
	Logger *slog.Logger
	// FS is the filesystem of the data directory (meta.properties and the partition logs); nil
	// means vfs.OS. Tests pass a vfs.NewFaulty wrapper to fail the disk. The controller's Raft files
	// are written by raft-boltdb directly, outside it.
	FS vfs.FS

	// Clock is the time of the node's controller (broker sessions and leases), partitions and logs
	// (retention), group and transaction coordinators and HTTP API; nil means clock.System. Tests
	// pass one whose wall clock jumps. Raft, network deadlines and the metrics keep the system clock.
	Clock Clock
}

// Clock is a node's time source: Now reads it, After waits on it.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// DefaultTransactionVersion is the transaction.version a node finalizes by default: 2, since franz-go,
// the Java client, Kafka Streams, sarama and librdkafka all pass their tests with it
// (docs/transactions.md, "TV2").
const DefaultTransactionVersion = 2

// DefaultLeaderRebalanceInterval is the default period of the preferred-leader rebalance.
const DefaultLeaderRebalanceInterval = 30 * time.Second

// DefaultConfig is the single durable node that `weir serve` runs with no flags.
func DefaultConfig() Config {
	return Config{
		NodeID:         1,
		DataDir:        "./weir-data",
		KafkaAddr:      "localhost:9092",
		HTTPAddr:       "localhost:8080",
		ControllerAddr: "localhost:9093",
		Groups:         group.CoordinatorConfig{InitialRebalanceDelay: group.DefaultInitialRebalanceDelay},

		DeadLetterTopicPrefix: controller.DefaultDeadLetterPrefix,
	}
}

func (c Config) drainTimeout() time.Duration {
	if c.DrainTimeout > 0 {
		return c.DrainTimeout
	}
	return DefaultShutdownTimeout
}
