package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/server"
)

func newServeCmd() *cobra.Command {
	cfg := server.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a weir node (broker, and controller when it is a voter)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := flagsFromEnv(cmd.LocalNonPersistentFlags()); err != nil {
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
			err := server.Run(ctx, cfg)
			if errors.Is(err, server.ErrStorageFailed) {
				// The exit status is non-zero: a supervisor must not take this for a clean stop.
				return fmt.Errorf("%w\nthe node fenced itself and its partitions moved to other replicas; repair the disk "+
					"under %s, then restart the node: its logs recover on open", err, cfg.DataDir)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.Int32Var(&cfg.NodeID, "node-id", cfg.NodeID, "this node's id")
	f.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "where the node keeps its data")
	f.StringVar(&cfg.KafkaAddr, "kafka-addr", cfg.KafkaAddr, "Kafka protocol listen address")
	f.StringVar(&cfg.AdvertisedKafkaAddr, "advertised-kafka-addr", "", "Kafka address given to clients (default: --kafka-addr)")
	f.StringVar(&cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, "HTTP listen address (/healthz, /metrics, /v1/cluster/status, /debug/pprof/)")
	f.StringVar(&cfg.ControllerAddr, "controller-addr", cfg.ControllerAddr, "controller listen address (Raft and the controller RPC)")
	f.StringVar(&cfg.ControllerVoters, "controller-voters", "", "controller voters as id@host:port,... (default: this node alone)")
	f.StringVar(&cfg.Rack, "rack", "", "this broker's rack, for rack-aware replica placement")
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
	f.DurationVar(&cfg.Groups.OffsetsRetention, "offsets-retention", 0,
		"how long the offsets of a group without members are kept (offsets.retention.minutes; default 168h)")
	f.DurationVar(&cfg.ReplicaLagMax, "replica-lag-time-max", partition.DefaultReplicaLagMax,
		"how long an in-sync follower may lag its leader before it leaves the ISR (replica.lag.time.max.ms)")
	return cmd
}

// flagsFromEnv sets every flag not given on the command line from WEIR_<FLAG> (upper case, dashes as
// underscores), so `WEIR_DATA_DIR=/var/lib/weir weir serve` works like --data-dir.
func flagsFromEnv(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		name := "WEIR_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			if serr := f.Value.Set(v); serr != nil {
				err = fmt.Errorf("%s=%q: %w", name, v, serr)
			}
		}
	})
	return err
}
