package server

import (
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/weir-mq/weir/internal/controller"
)

// staticBrokerConfigs names the node's command-line settings by their Kafka broker config keys, for
// DescribeConfigs on this broker (STATIC_BROKER_CONFIG, read-only). Settings left at zero, which take
// Kafka's default, are left out and described as DEFAULT_CONFIG.
func staticBrokerConfigs(cfg Config, lns []boundListener) map[string]string {
	listeners := make([]string, len(lns))
	advertised := make([]string, len(lns))
	for i, l := range lns {
		listeners[i] = l.Name + "://" + l.Addr
		advertised[i] = l.Name + "://" + net.JoinHostPort(l.endpoint.Host, strconv.Itoa(int(l.endpoint.Port)))
	}
	m := map[string]string{
		controller.BrokerConfigLogDirs:           cfg.DataDir,
		controller.BrokerConfigListeners:         strings.Join(listeners, ","),
		controller.BrokerConfigAdvertised:        strings.Join(advertised, ","),
		controller.BrokerConfigGroupInitialDelay: millis(cfg.Groups.InitialRebalanceDelay),
	}
	set := func(key, v string, ok bool) {
		if ok {
			m[key] = v
		}
	}
	set(controller.BrokerConfigRack, cfg.Rack, cfg.Rack != "")
	set(controller.BrokerConfigReplicaLagMaxMs, millis(cfg.ReplicaLagMax), cfg.ReplicaLagMax > 0)
	set(controller.BrokerConfigOffsetsPartitions, strconv.Itoa(int(cfg.Groups.OffsetsPartitions)), cfg.Groups.OffsetsPartitions > 0)
	set(controller.BrokerConfigOffsetsRF, strconv.Itoa(int(cfg.Groups.OffsetsReplicationFactor)), cfg.Groups.OffsetsReplicationFactor > 0)
	set(controller.BrokerConfigOffsetsRetention, strconv.FormatInt(int64(cfg.Groups.OffsetsRetention/time.Minute), 10), cfg.Groups.OffsetsRetention > 0)
	set(controller.BrokerConfigTxnPartitions, strconv.Itoa(int(cfg.Txn.StatePartitions)), cfg.Txn.StatePartitions > 0)
	set(controller.BrokerConfigTxnRF, strconv.Itoa(int(cfg.Txn.StateReplicationFactor)), cfg.Txn.StateReplicationFactor > 0)
	set(controller.BrokerConfigTxnMaxTimeout, millis(cfg.Txn.TimeoutMax), cfg.Txn.TimeoutMax > 0)
	set(controller.BrokerConfigTxnIDExpiration, millis(cfg.Txn.IDExpiration), cfg.Txn.IDExpiration > 0)
	set(controller.BrokerConfigTxnVerification, "false", cfg.TxnVerificationDisabled)
	sp, ss := cfg.SharePartition, cfg.ShareState
	set(controller.BrokerConfigShareLockDurationMs, millis(sp.LockDuration), sp.LockDuration > 0)
	set(controller.BrokerConfigShareDeliveryLimit, strconv.Itoa(sp.DeliveryCountLimit), sp.DeliveryCountLimit > 0)
	set(controller.BrokerConfigShareRecordLocksMax, strconv.Itoa(sp.RecordLocksMax), sp.RecordLocksMax > 0)
	set(controller.BrokerConfigShareSessionTimeout, millis(cfg.ShareGroup.SessionTimeout), cfg.ShareGroup.SessionTimeout > 0)
	set(controller.BrokerConfigShareHeartbeat, millis(cfg.ShareGroup.HeartbeatInterval), cfg.ShareGroup.HeartbeatInterval > 0)
	set(controller.BrokerConfigShareStatePartitions, strconv.Itoa(int(ss.StatePartitions)), ss.StatePartitions > 0)
	set(controller.BrokerConfigShareStateRF, strconv.Itoa(int(ss.StateReplicationFactor)), ss.StateReplicationFactor > 0)
	set(controller.BrokerConfigDeadLetterPrefix, cfg.DeadLetterTopicPrefix, cfg.DeadLetterTopicPrefix != controller.DefaultDeadLetterPrefix)
	return m
}

func millis(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
