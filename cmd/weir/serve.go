package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/httpapi"
	"github.com/weir-mq/weir/internal/kafka/api"
	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/server"
	"github.com/weir-mq/weir/internal/vfs"
)

func newServeCmd() *cobra.Command {
	cfg := server.DefaultConfig()
	verifyTxn := true
	var sec securityFlags
	var superUsers string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a weir node (broker, and controller when it is a voter)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := loadSettings(cmd.LocalNonPersistentFlags()); err != nil {
				return err
			}
			cfg.TxnVerificationDisabled = !verifyTxn
			if err := applySecurity(cmd, &cfg, sec); err != nil {
				return err
			}
			cfg.SuperUsers = splitSuperUsers(superUsers)
			if err := checkServeConfig(cfg); err != nil {
				return err
			}
			created, err := missingRoot(cfg.DataDir)
			if err != nil {
				return err
			}
			if err := checkDataDir(cfg.DataDir); err != nil {
				if created != "" {
					removeFailedStart(cmd.ErrOrStderr(), cfg.DataDir, created)
				}
				return err
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			// SIGTERM or SIGINT cancels ctx: the node drains and closes its logs cleanly. A second
			// signal, once stop has restored the default handling, kills the process at once.
			ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
			defer stop()
			go func() {
				<-ctx.Done()
				stop()
			}()
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
			err = listenError(cfg, server.Run(ctx, cfg))
			if err != nil && created != "" {
				removeFailedStart(cmd.ErrOrStderr(), cfg.DataDir, created)
			}
			if errors.Is(err, server.ErrStorageFailed) {
				// The exit status is non-zero: a supervisor must not take this for a clean stop.
				return fmt.Errorf("%w\nrepair the disk under %s, then restart the node: its logs recover on open",
					err, cfg.DataDir)
			}
			return err
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return flagValueError(err) })
	f := cmd.Flags()
	f.String("config", "", "a file of key = value lines, keys as these flags' names; flags and WEIR_* win over it")
	f.Int32Var(&cfg.NodeID, "node-id", cfg.NodeID, "this node's id")
	f.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "where the node keeps its data")
	f.BoolVar(&cfg.StorageJournal, "storage-journal", false, "make durable appends (weir.flush.policy=always) durable through one journal of the data directory, one fdatasync per round for every partition")
	f.StringVar(&cfg.KafkaAddr, "kafka-addr", cfg.KafkaAddr, "Kafka protocol listen address")
	f.StringVar(&cfg.AdvertisedKafkaAddr, "advertised-kafka-addr", "", "Kafka address given to clients (default: --kafka-addr)")
	f.StringVar(&cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, "HTTP listen address (/healthz, /readyz, /metrics, /v1/cluster/status, /debug/pprof/)")
	f.IntVar(&cfg.HTTPMembersMax, "http-members-max", httpapi.DefaultMembersMax, "most HTTP API group members this node serves at once (past it a new member's poll is 429 too_many_members)")
	f.StringVar(&cfg.ControllerAddr, "controller-addr", cfg.ControllerAddr, "controller listen address (Raft and the controller RPC)")
	f.StringVar(&cfg.ControllerVoters, "controller-voters", "", "controller voters as id@host:port,... (default: this node alone)")
	f.StringVar(&cfg.Rack, "rack", "", "this broker's rack, for rack-aware replica placement")
	f.DurationVar(&cfg.DrainTimeout, "drain-timeout", server.DefaultShutdownTimeout,
		"how long SIGTERM lets in-flight requests finish before their connections are cut and the node exits non-zero")
	f.DurationVar(&cfg.BrokerSessionTimeout, "broker-session-timeout", 0,
		"how long the controller waits for a broker's heartbeat before fencing it (default 6s)")
	f.DurationVar(&cfg.BrokerHeartbeatInterval, "broker-heartbeat-interval", 0,
		"how often a broker heartbeats to the controller (default 500ms)")
	f.DurationVar(&cfg.ControllerRaftTimeout, "controller-raft-timeout", 0,
		"Raft heartbeat and election timeout of the controller quorum (default 500ms)")
	f.DurationVar(&cfg.LeaderRebalanceInterval, "leader-rebalance-interval", 0,
		"how often the controller moves leadership back to preferred replicas; negative disables (default 30s)")
	f.Int32Var(&cfg.Groups.OffsetsPartitions, "offsets-topic-num-partitions", 0,
		"partitions __consumer_offsets is created with (offsets.topic.num.partitions; default 50)")
	f.Int16Var(&cfg.Groups.OffsetsReplicationFactor, "offsets-topic-replication-factor", 0,
		"replication factor __consumer_offsets is created with, capped at the live brokers (offsets.topic.replication.factor; default 3)")
	f.DurationVar(&cfg.Groups.InitialRebalanceDelay, "group-initial-rebalance-delay", cfg.Groups.InitialRebalanceDelay,
		"how long a new group waits for more members before its first generation; 0 for none (group.initial.rebalance.delay.ms)")
	f.DurationVar(&cfg.Groups.SessionTimeoutMin, "group-min-session-timeout", 0,
		"smallest session timeout a group member may ask for (group.min.session.timeout.ms; default 6s)")
	f.DurationVar(&cfg.Groups.SessionTimeoutMax, "group-max-session-timeout", 0,
		"largest session timeout a group member may ask for (group.max.session.timeout.ms; default 30m)")
	f.DurationVar(&cfg.Groups.ConsumerSessionTimeout, "group-consumer-session-timeout", 0,
		"how long a consumer-protocol (KIP-848) group member may go without a heartbeat (group.consumer.session.timeout.ms; default 45s)")
	f.DurationVar(&cfg.Groups.ConsumerHeartbeatInterval, "group-consumer-heartbeat-interval", 0,
		"how often consumer-protocol (KIP-848) group members heartbeat (group.consumer.heartbeat.interval.ms; default 5s)")
	f.DurationVar(&cfg.Groups.OffsetsRetention, "offsets-retention", 0,
		"how long the offsets of a group without members are kept (offsets.retention.minutes; default 168h)")
	f.Int32Var(&cfg.Txn.StatePartitions, "transaction-state-log-num-partitions", 0,
		"partitions __transaction_state is created with (transaction.state.log.num.partitions; default 50)")
	f.Int16Var(&cfg.Txn.StateReplicationFactor, "transaction-state-log-replication-factor", 0,
		"replication factor __transaction_state is created with, capped at the live brokers (transaction.state.log.replication.factor; default 3)")
	f.DurationVar(&cfg.Txn.TimeoutMax, "transaction-max-timeout", 0,
		"largest transaction timeout a producer may ask for (transaction.max.timeout.ms; default 15m)")
	f.DurationVar(&cfg.Txn.IDExpiration, "transactional-id-expiration", 0,
		"how long an idle transactional id is kept (transactional.id.expiration.ms; default 168h)")
	f.DurationVar(&cfg.Txn.AbortInterval, "transaction-abort-timed-out-interval", 0,
		"how often transactions past their timeout are aborted (transaction.abort.timed.out.transaction.cleanup.interval.ms; default 10s)")
	f.BoolVar(&cfg.ShareGroups, "share-groups", false,
		"serve share groups (KIP-932, preview: a share group's members are held in memory, so they join again when its coordinator moves; the group itself is recorded; docs/queues.md)")
	f.DurationVar(&cfg.SharePartition.LockDuration, "share-record-lock-duration", 0,
		"how long a share consumer holds a record it fetched, for groups that do not set share.record.lock.duration.ms (group.share.record.lock.duration.ms; 15s to 60s, default 30s)")
	f.IntVar(&cfg.SharePartition.DeliveryCountLimit, "share-delivery-count-limit", 0,
		"deliveries of a record before a release archives it, for groups that do not set share.delivery.count.limit (group.share.delivery.count.limit; 2 to 10, default 5)")
	f.IntVar(&cfg.SharePartition.RecordLocksMax, "share-partition-max-record-locks", 0,
		"most records in flight in one share-partition, for groups that do not set share.partition.max.record.locks (group.share.partition.max.record.locks; 100 to 10000, default 2000)")
	f.DurationVar(&cfg.ShareGroup.SessionTimeout, "share-session-timeout", 0,
		"how long a share group member may go without a heartbeat, for groups that do not set share.session.timeout.ms (group.share.session.timeout.ms; 45s to 60s, default 45s)")
	f.DurationVar(&cfg.ShareGroup.HeartbeatInterval, "share-heartbeat-interval", 0,
		"how often share group members heartbeat, for groups that do not set share.heartbeat.interval.ms (group.share.heartbeat.interval.ms; 5s to 15s, default 5s)")
	f.StringVar(&cfg.DeadLetterTopicPrefix, "dlq-topic-name-prefix", cfg.DeadLetterTopicPrefix,
		"what a share group's dead-letter topic (errors.deadletterqueue.topic.name) must start with, until the cluster-wide errors.deadletterqueue.topic.name.prefix is set, which overrides it; empty allows any name")
	f.Int32Var(&cfg.ShareState.StatePartitions, "share-state-topic-num-partitions", 0,
		"partitions __share_group_state is created with (share.coordinator.state.topic.num.partitions; default 50)")
	f.Int16Var(&cfg.ShareState.StateReplicationFactor, "share-state-topic-replication-factor", 0,
		"replication factor __share_group_state is created with, capped at the live brokers (share.coordinator.state.topic.replication.factor; default 3)")
	f.Int16Var(&cfg.TransactionVersion, "transaction-version", server.DefaultTransactionVersion,
		"finalized feature transaction.version: 2 lets clients use KIP-890 part 2 (implicit adds, an epoch bump per transaction), 1 the classic protocol")
	f.BoolVar(&verifyTxn, "transaction-partition-verification-enable", true,
		"partition leaders ask the transaction coordinator before the first batch of a transaction (transaction.partition.verification.enable, KIP-890)")
	f.StringVar(&cfg.Authorizer, "authorizer", "none",
		"acl checks every request against the cluster's ACLs (weir acl), none allows everything (authorizer.class.name)")
	f.StringVar(&superUsers, "super-users", "",
		"principals allowed everything whatever the ACLs say, separated by ';' (super.users), e.g. 'User:admin;User:ops'")
	f.BoolVar(&cfg.AllowEveryoneIfNoACLFound, "allow-everyone-if-no-acl-found", false,
		"with --authorizer acl, allow an action on a resource that no ACL names (allow.everyone.if.no.acl.found)")
	f.IntVar(&cfg.QuotaWindowNum, "quota-window-num", api.DefaultQuotaWindowNum,
		"samples over which client byte rates and request times are measured for quotas (quota.window.num)")
	f.DurationVar(&cfg.QuotaWindowSize, "quota-window-size", api.DefaultQuotaWindowSize,
		"the span of each quota sample (quota.window.size.seconds)")
	f.DurationVar(&cfg.ReplicaLagMax, "replica-lag-time-max", partition.DefaultReplicaLagMax,
		"how long an in-sync follower may lag its leader before it leaves the ISR (replica.lag.time.max.ms)")
	addSecurityFlags(f, &cfg, &sec)
	return cmd
}

// Defaults of the controller's broker sessions, as --broker-heartbeat-interval and
// --broker-session-timeout state them.
const (
	defaultBrokerHeartbeatInterval = 500 * time.Millisecond
	defaultBrokerSessionTimeout    = 6 * time.Second
	// raftTimeoutMin is the smallest --controller-raft-timeout Raft accepts: its leader lease, half the
	// timeout, must be at least 5ms.
	raftTimeoutMin = 10 * time.Millisecond
)

// checkServeConfig checks every serve flag before anything is created, so a bad value ends the start
// with one line instead of a node that starts and fails, or retries, forever.
func checkServeConfig(cfg server.Config) error {
	if cfg.NodeID < 0 {
		return fmt.Errorf("%w: --node-id %d: want a node id of 0 or more", errUsage, cfg.NodeID)
	}
	if strings.TrimSpace(cfg.DataDir) == "" {
		return fmt.Errorf("%w: --data-dir is empty", errUsage)
	}
	if err := checkAuthorizer(cfg); err != nil {
		return err
	}
	if cfg.QuotaWindowNum < 1 || cfg.QuotaWindowSize < time.Millisecond {
		return fmt.Errorf("%w: --quota-window-num %d, --quota-window-size %s: want at least 1 sample of at least 1ms",
			errUsage, cfg.QuotaWindowNum, cfg.QuotaWindowSize)
	}
	if cfg.HTTPMembersMax < 1 {
		return fmt.Errorf("%w: --http-members-max %d: want at least 1", errUsage, cfg.HTTPMembersMax)
	}
	if cfg.TransactionVersion != 1 && cfg.TransactionVersion != 2 {
		return fmt.Errorf("%w: --transaction-version %d: want 1 or 2", errUsage, cfg.TransactionVersion)
	}
	for _, a := range []struct{ flag, addr string }{
		{"kafka-addr", cfg.KafkaAddr}, {"http-addr", cfg.HTTPAddr}, {"controller-addr", cfg.ControllerAddr},
	} {
		if a.addr == "" && len(cfg.Listeners) > 0 {
			continue // --listeners replaced --kafka-addr
		}
		if err := checkAddr("--"+a.flag, a.addr, true); err != nil {
			return err
		}
	}
	if cfg.AdvertisedKafkaAddr != "" {
		if err := checkAddr("--advertised-kafka-addr", cfg.AdvertisedKafkaAddr, true); err != nil {
			return err
		}
	}
	if err := checkListenersApart(cfg); err != nil {
		return err
	}
	if err := checkVoters(cfg); err != nil {
		return err
	}
	return checkServeDurations(cfg)
}

// checkAddr checks that addr is host:port with a port from 1 to 65535, or 0 (any free port) when
// anyPort is set; an empty host is every interface.
func checkAddr(what, addr string, anyPort bool) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: %s %q: want host:port", errUsage, what, addr)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 && !anyPort {
		lowest := 1
		if anyPort {
			lowest = 0
		}
		return fmt.Errorf("%w: %s %q: the port must be a number from %d to 65535", errUsage, what, addr, lowest)
	}
	return nil
}

// checkListenersApart refuses two listeners on one address (a fixed port; port 0 picks a free one).
func checkListenersApart(cfg server.Config) error {
	seen := map[string]string{}
	for _, a := range []struct{ flag, addr string }{
		{"--kafka-addr", cfg.KafkaAddr}, {"--http-addr", cfg.HTTPAddr}, {"--controller-addr", cfg.ControllerAddr},
	} {
		if _, port, _ := net.SplitHostPort(a.addr); port == "0" {
			continue
		}
		if other, ok := seen[a.addr]; ok {
			return fmt.Errorf("%w: %s and %s are both %s", errUsage, other, a.flag, a.addr)
		}
		seen[a.addr] = a.flag
	}
	return nil
}

// checkVoters checks --controller-voters: id@host:port entries with distinct ids and addresses, and,
// when --controller-addr is one of those addresses, that it is this node's own entry.
func checkVoters(cfg server.Config) error {
	if strings.TrimSpace(cfg.ControllerVoters) == "" {
		return nil
	}
	ids := map[int64]string{}
	addrs := map[string]string{}
	self := false
	for entry := range strings.SplitSeq(cfg.ControllerVoters, ",") {
		entry = strings.TrimSpace(entry)
		idText, addr, ok := strings.Cut(entry, "@")
		if !ok {
			return fmt.Errorf("%w: --controller-voters entry %q: want id@host:port", errUsage, entry)
		}
		id, err := strconv.ParseInt(idText, 10, 32)
		if err != nil || id < 0 {
			return fmt.Errorf("%w: --controller-voters entry %q: the id must be a node id of 0 or more", errUsage, entry)
		}
		what := fmt.Sprintf("--controller-voters entry %q", entry)
		if err := checkAddr(what, addr, false); err != nil {
			return err
		}
		if host, _, _ := net.SplitHostPort(addr); host == "" {
			return fmt.Errorf("%w: %s: the host is empty; other nodes dial it", errUsage, what)
		}
		if other, dup := ids[id]; dup {
			return fmt.Errorf("%w: --controller-voters names node %d twice (%q and %q)", errUsage, id, other, entry)
		}
		if other, dup := addrs[addr]; dup {
			return fmt.Errorf("%w: --controller-voters gives %s to two voters (%q and %q)", errUsage, addr, other, entry)
		}
		ids[id], addrs[addr] = entry, entry
		self = self || id == int64(cfg.NodeID)
	}
	other, ok := addrs[cfg.ControllerAddr]
	switch {
	case ok && !self:
		return fmt.Errorf("%w: --controller-voters gives this node's --controller-addr %s to %q, but --node-id is %d "+
			"and not among the voters: add %d@%s or use another --controller-addr", errUsage, cfg.ControllerAddr, other,
			cfg.NodeID, cfg.NodeID, cfg.ControllerAddr)
	case ok && other != ids[int64(cfg.NodeID)]:
		return fmt.Errorf("%w: --controller-addr %s is voter %q's in --controller-voters, not this node's own entry %q",
			errUsage, cfg.ControllerAddr, other, ids[int64(cfg.NodeID)])
	}
	return nil
}

// checkServeDurations refuses negative timeouts and periods (zero takes the default), a Raft timeout
// Raft refuses, and bounds that contradict each other once defaults are filled in.
func checkServeDurations(cfg server.Config) error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"--broker-session-timeout", cfg.BrokerSessionTimeout},
		{"--broker-heartbeat-interval", cfg.BrokerHeartbeatInterval},
		{"--controller-raft-timeout", cfg.ControllerRaftTimeout},
		{"--replica-lag-time-max", cfg.ReplicaLagMax},
		{"--group-initial-rebalance-delay", cfg.Groups.InitialRebalanceDelay},
		{"--group-min-session-timeout", cfg.Groups.SessionTimeoutMin},
		{"--group-max-session-timeout", cfg.Groups.SessionTimeoutMax},
		{"--group-consumer-session-timeout", cfg.Groups.ConsumerSessionTimeout},
		{"--group-consumer-heartbeat-interval", cfg.Groups.ConsumerHeartbeatInterval},
		{"--offsets-retention", cfg.Groups.OffsetsRetention},
		{"--transaction-max-timeout", cfg.Txn.TimeoutMax},
		{"--transactional-id-expiration", cfg.Txn.IDExpiration},
		{"--transaction-abort-timed-out-interval", cfg.Txn.AbortInterval},
	} {
		if d.v < 0 {
			return fmt.Errorf("%w: %s %s is negative", errUsage, d.flag, d.v)
		}
	}
	switch {
	case cfg.Groups.OffsetsPartitions < 0:
		return fmt.Errorf("%w: --offsets-topic-num-partitions %d is negative", errUsage, cfg.Groups.OffsetsPartitions)
	case cfg.Groups.OffsetsReplicationFactor < 0:
		return fmt.Errorf("%w: --offsets-topic-replication-factor %d is negative", errUsage, cfg.Groups.OffsetsReplicationFactor)
	case cfg.Txn.StatePartitions < 0:
		return fmt.Errorf("%w: --transaction-state-log-num-partitions %d is negative", errUsage, cfg.Txn.StatePartitions)
	case cfg.Txn.StateReplicationFactor < 0:
		return fmt.Errorf("%w: --transaction-state-log-replication-factor %d is negative", errUsage, cfg.Txn.StateReplicationFactor)
	case cfg.ControllerRaftTimeout > 0 && cfg.ControllerRaftTimeout < raftTimeoutMin:
		return fmt.Errorf("%w: --controller-raft-timeout %s: want at least %s", errUsage, cfg.ControllerRaftTimeout, raftTimeoutMin)
	}
	heartbeat := cmp.Or(cfg.BrokerHeartbeatInterval, defaultBrokerHeartbeatInterval)
	session := cmp.Or(cfg.BrokerSessionTimeout, defaultBrokerSessionTimeout)
	if heartbeat >= session {
		return fmt.Errorf("%w: --broker-heartbeat-interval %s must be shorter than --broker-session-timeout %s", errUsage, heartbeat, session)
	}
	sessionMin := cmp.Or(cfg.Groups.SessionTimeoutMin, group.DefaultSessionTimeoutMin)
	sessionMax := cmp.Or(cfg.Groups.SessionTimeoutMax, group.DefaultSessionTimeoutMax)
	if sessionMin > sessionMax {
		return fmt.Errorf("%w: --group-min-session-timeout %s is above --group-max-session-timeout %s", errUsage, sessionMin, sessionMax)
	}
	if err := checkShareFlags(cfg); err != nil {
		return err
	}
	consumerHeartbeat := cmp.Or(cfg.Groups.ConsumerHeartbeatInterval, group.DefaultConsumerHeartbeatInterval)
	consumerSession := cmp.Or(cfg.Groups.ConsumerSessionTimeout, group.DefaultConsumerSessionTimeout)
	if consumerHeartbeat >= consumerSession {
		return fmt.Errorf("%w: --group-consumer-heartbeat-interval %s must be shorter than --group-consumer-session-timeout %s",
			errUsage, consumerHeartbeat, consumerSession)
	}
	return nil
}

// checkShareFlags refuses share-group settings outside Kafka's bounds for them; zero takes the default.
func checkShareFlags(cfg server.Config) error {
	sp, ss, sg := cfg.SharePartition, cfg.ShareState, cfg.ShareGroup
	switch {
	case sp.LockDuration != 0 && (sp.LockDuration < 15*time.Second || sp.LockDuration > time.Minute):
		return fmt.Errorf("%w: --share-record-lock-duration %s: want 15s to 60s", errUsage, sp.LockDuration)
	case sp.DeliveryCountLimit != 0 && (sp.DeliveryCountLimit < 2 || sp.DeliveryCountLimit > 10):
		return fmt.Errorf("%w: --share-delivery-count-limit %d: want 2 to 10", errUsage, sp.DeliveryCountLimit)
	case sp.RecordLocksMax != 0 && (sp.RecordLocksMax < 100 || sp.RecordLocksMax > 10000):
		return fmt.Errorf("%w: --share-partition-max-record-locks %d: want 100 to 10000", errUsage, sp.RecordLocksMax)
	case sg.SessionTimeout != 0 && (sg.SessionTimeout < 45*time.Second || sg.SessionTimeout > time.Minute):
		return fmt.Errorf("%w: --share-session-timeout %s: want 45s to 60s", errUsage, sg.SessionTimeout)
	case sg.HeartbeatInterval != 0 && (sg.HeartbeatInterval < 5*time.Second || sg.HeartbeatInterval > 15*time.Second):
		return fmt.Errorf("%w: --share-heartbeat-interval %s: want 5s to 15s", errUsage, sg.HeartbeatInterval)
	case ss.StatePartitions < 0:
		return fmt.Errorf("%w: --share-state-topic-num-partitions %d is negative", errUsage, ss.StatePartitions)
	case ss.StateReplicationFactor < 0:
		return fmt.Errorf("%w: --share-state-topic-replication-factor %d is negative", errUsage, ss.StateReplicationFactor)
	}
	return nil
}

// missingRoot returns the outermost directory on the way to dir that does not exist yet (dir itself, or
// a parent the start will create with it), or "" when dir exists: what a failed start removes.
func missingRoot(dataDir string) (string, error) {
	dir := filepath.Clean(dataDir)
	missing := ""
	for {
		_, err := vfs.OS.Stat(dir)
		if err == nil {
			return missing, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("serve: --data-dir %s: %w", dataDir, pathProblem(err))
		}
		missing = dir
		parent := filepath.Dir(dir)
		if parent == dir {
			return missing, nil
		}
		dir = parent
	}
}

// removeFailedStart removes created, the directories a start made for dataDir, unless the node got as
// far as recording its identity (meta.properties, written once it joined the cluster): a start that
// failed before then leaves nothing behind, a node that served keeps its data.
func removeFailedStart(errOut io.Writer, dataDir, created string) {
	if _, err := vfs.OS.Stat(filepath.Join(dataDir, "meta.properties")); !errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err := vfs.OS.RemoveAll(created); err != nil {
		fmt.Fprintf(errOut, "weir: serve: removing %s after the failed start: %v\n", created, err)
	}
}
