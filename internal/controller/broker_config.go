package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"strconv"
)

// Broker configs have three levels, as in Kafka: a value set for one broker (PerBrokerConfigs, Kafka's
// DYNAMIC_BROKER_CONFIG), the cluster-wide value (BrokerConfigs, DYNAMIC_DEFAULT_BROKER_CONFIG), and the
// node's own, from its command line (STATIC_BROKER_CONFIG) or built in (DEFAULT_CONFIG). The first two
// live in the image and change at run time; the node's static configs (staticDefs) are read-only.

// SourceDynamicBroker is a value set at run time for one broker (PerBrokerConfigs).
const SourceDynamicBroker ConfigSource = 10

// SourceStaticBroker is a value given on the node's command line (a read-only broker config).
const SourceStaticBroker ConfigSource = 11

// Read-only broker config keys: set on each node's command line (docs/cli.md), described with their
// value, never changed at run time.
const (
	BrokerConfigNodeID            = "node.id"
	BrokerConfigBrokerID          = "broker.id"
	BrokerConfigRack              = "broker.rack"
	BrokerConfigLogDirs           = "log.dirs"
	BrokerConfigListeners         = "listeners"
	BrokerConfigAdvertised        = "advertised.listeners"
	BrokerConfigReplicaLagMaxMs   = "replica.lag.time.max.ms"
	BrokerConfigOffsetsPartitions = "offsets.topic.num.partitions"
	BrokerConfigOffsetsRF         = "offsets.topic.replication.factor"
	BrokerConfigOffsetsRetention  = "offsets.retention.minutes"
	BrokerConfigGroupInitialDelay = "group.initial.rebalance.delay.ms"
	BrokerConfigTxnPartitions     = "transaction.state.log.num.partitions"
	BrokerConfigTxnRF             = "transaction.state.log.replication.factor"
	BrokerConfigTxnMaxTimeout     = "transaction.max.timeout.ms"
	BrokerConfigTxnIDExpiration   = "transactional.id.expiration.ms"
	BrokerConfigTxnVerification   = "transaction.partition.verification.enable"
	// The share groups' broker defaults and their state topic (docs/queues.md, "Configuration").
	BrokerConfigShareLockDurationMs  = "group.share.record.lock.duration.ms"
	BrokerConfigShareDeliveryLimit   = "group.share.delivery.count.limit"
	BrokerConfigShareRecordLocksMax  = "group.share.partition.max.record.locks"
	BrokerConfigShareSessionTimeout  = "group.share.session.timeout.ms"
	BrokerConfigShareHeartbeat       = "group.share.heartbeat.interval.ms"
	BrokerConfigShareStatePartitions = "share.coordinator.state.topic.num.partitions"
	BrokerConfigShareStateRF         = "share.coordinator.state.topic.replication.factor"
	// Kafka's bounds of the share group configs, fixed at Kafka's defaults in weir.
	BrokerConfigShareLockDurationMin = "group.share.min.record.lock.duration.ms"
	BrokerConfigShareLockDurationMax = "group.share.max.record.lock.duration.ms"
	BrokerConfigShareSessionMin      = "group.share.min.session.timeout.ms"
	BrokerConfigShareSessionMax      = "group.share.max.session.timeout.ms"
	BrokerConfigShareHeartbeatMin    = "group.share.min.heartbeat.interval.ms"
	BrokerConfigShareHeartbeatMax    = "group.share.max.heartbeat.interval.ms"
)

// DefaultDeadLetterPrefix is Kafka's default of errors.deadletterqueue.topic.name.prefix.
const DefaultDeadLetterPrefix = "dlq."

// ErrReadOnlyConfig is returned for a change to a broker config that cannot change at run time (a
// read-only one), or to one weir decides cluster-wide, for a single broker (Kafka answers both
// INVALID_REQUEST).
var ErrReadOnlyConfig = errors.New("controller: broker config not changeable at run time")

// staticDefs are the read-only broker configs, with Kafka's defaults (weir's where it has its own).
var staticDefs = []configDef{
	{brokerName: BrokerConfigAdvertised, typ: ConfigTypeString, doc: "the address Metadata gives clients for this broker"},
	{brokerName: BrokerConfigBrokerID, typ: ConfigTypeInt, def: "-1", doc: "this broker's id (node.id)"},
	{brokerName: BrokerConfigRack, typ: ConfigTypeString, doc: "this broker's rack, for rack-aware placement"},
	{brokerName: BrokerConfigGroupInitialDelay, typ: ConfigTypeInt, def: "3000", doc: "how long a new classic group waits for more members before its first rebalance"},
	{brokerName: BrokerConfigListeners, typ: ConfigTypeString, doc: "where the Kafka protocol listens"},
	{brokerName: BrokerConfigLogDirs, typ: ConfigTypeString, doc: "the data directory holding the partition logs"},
	{brokerName: BrokerConfigNodeID, typ: ConfigTypeInt, def: "-1", doc: "this broker's id"},
	{brokerName: BrokerConfigOffsetsRetention, typ: ConfigTypeInt, def: "10080", doc: "how long committed offsets of an empty group are kept"},
	{brokerName: BrokerConfigOffsetsPartitions, typ: ConfigTypeInt, def: "50", doc: "partitions of __consumer_offsets"},
	{brokerName: BrokerConfigOffsetsRF, typ: ConfigTypeInt, def: "3", doc: "replication factor of __consumer_offsets (capped at the brokers there are)"},
	{brokerName: BrokerConfigReplicaLagMaxMs, typ: ConfigTypeLong, def: "30000", doc: "how long a follower may lag before the leader drops it from the ISR"},
	{brokerName: BrokerConfigTxnMaxTimeout, typ: ConfigTypeInt, def: "900000", doc: "the longest transaction timeout a producer may ask for"},
	{brokerName: BrokerConfigTxnVerification, typ: ConfigTypeBoolean, def: "true", doc: "leaders ask the coordinator before appending a transaction's first batch (KIP-890)"},
	{brokerName: BrokerConfigTxnPartitions, typ: ConfigTypeInt, def: "50", doc: "partitions of __transaction_state"},
	{brokerName: BrokerConfigTxnRF, typ: ConfigTypeInt, def: "3", doc: "replication factor of __transaction_state (capped at the brokers there are)"},
	{brokerName: BrokerConfigTxnIDExpiration, typ: ConfigTypeInt, def: "604800000", doc: "how long an idle transactional id is kept"},
	{brokerName: BrokerConfigShareLockDurationMs, typ: ConfigTypeInt, def: "30000", doc: "a share group's acquisition lock unless the group sets share.record.lock.duration.ms"},
	{brokerName: BrokerConfigShareDeliveryLimit, typ: ConfigTypeInt, def: "5", doc: "a share group's delivery count limit unless the group sets share.delivery.count.limit"},
	{brokerName: BrokerConfigShareRecordLocksMax, typ: ConfigTypeInt, def: "2000", doc: "the most records in flight in one share-partition unless the group sets share.partition.max.record.locks"},
	{brokerName: BrokerConfigShareSessionTimeout, typ: ConfigTypeInt, def: "45000", doc: "how long a share group member may go without a heartbeat unless the group sets share.session.timeout.ms"},
	{brokerName: BrokerConfigShareHeartbeat, typ: ConfigTypeInt, def: "5000", doc: "how often share group members heartbeat unless the group sets share.heartbeat.interval.ms"},
	{brokerName: BrokerConfigShareLockDurationMin, typ: ConfigTypeInt, def: strconv.Itoa(ShareLockDurationMinMs), doc: "the shortest share.record.lock.duration.ms a group may set"},
	{brokerName: BrokerConfigShareLockDurationMax, typ: ConfigTypeInt, def: strconv.Itoa(ShareLockDurationMaxMs), doc: "the longest share.record.lock.duration.ms a group may set"},
	{brokerName: BrokerConfigShareSessionMin, typ: ConfigTypeInt, def: strconv.Itoa(ShareSessionTimeoutMinMs), doc: "the shortest share.session.timeout.ms a group may set"},
	{brokerName: BrokerConfigShareSessionMax, typ: ConfigTypeInt, def: strconv.Itoa(ShareSessionTimeoutMaxMs), doc: "the longest share.session.timeout.ms a group may set"},
	{brokerName: BrokerConfigShareHeartbeatMin, typ: ConfigTypeInt, def: strconv.Itoa(ShareHeartbeatIntervalMinMs), doc: "the shortest share.heartbeat.interval.ms a group may set"},
	{brokerName: BrokerConfigShareHeartbeatMax, typ: ConfigTypeInt, def: strconv.Itoa(ShareHeartbeatIntervalMaxMs), doc: "the longest share.heartbeat.interval.ms a group may set"},
	{brokerName: BrokerConfigShareStatePartitions, typ: ConfigTypeInt, def: "50", doc: "partitions of __share_group_state"},
	{brokerName: BrokerConfigShareStateRF, typ: ConfigTypeInt, def: "3", doc: "replication factor of __share_group_state (capped at the brokers there are)"},
}

var staticDefByName = map[string]*configDef{}

func init() {
	for i := range staticDefs {
		staticDefByName[staticDefs[i].brokerName] = &staticDefs[i]
	}
}

// IsStaticBrokerConfig reports whether key is a read-only broker config.
func IsStaticBrokerConfig(key string) bool { _, ok := staticDefByName[key]; return ok }

// perBrokerAllowed reports whether a broker config may be set for one broker: the topic configs'
// broker synonyms, which each broker applies to the logs it hosts. The broker-only configs are
// decided by the controller for the whole cluster (num.partitions, the partition limits, ...), and
// unclean.leader.election.enable and min.insync.replicas by the controller and every leader alike,
// so a value for one broker would mislead.
func perBrokerAllowed(d *configDef) bool {
	return d.name != "" && d.name != ConfigUncleanLeaderElection && d.name != ConfigMinInsyncReplicas
}

// CheckBrokerConfigChange refuses with ErrReadOnlyConfig the keys a change of broker configs may not
// name: read-only ones, and, for one broker (perBroker), the ones weir decides cluster-wide.
func CheckBrokerConfigChange(keys []string, perBroker bool) error {
	for _, k := range keys {
		if IsStaticBrokerConfig(k) {
			return fmt.Errorf("%w: %s is read-only (set on the node's command line)", ErrReadOnlyConfig, k)
		}
		if d, ok := brokerDefByName[k]; ok && perBroker && !perBrokerAllowed(d) {
			return fmt.Errorf("%w: %s is cluster-wide only: set it on the default broker resource (empty name)", ErrReadOnlyConfig, k)
		}
	}
	return nil
}

// AlterPerBrokerConfigs sets and removes broker configs of one broker (Kafka's DYNAMIC_BROKER_CONFIG).
// A key in both is set.
type AlterPerBrokerConfigs struct {
	Broker int32
	Set    map[string]string
	Remove []string
	ListEdits
}

func (AlterPerBrokerConfigs) command() {}

func (img *Image) alterPerBrokerConfigs(c AlterPerBrokerConfigs) error {
	if _, ok := img.Broker(c.Broker); !ok {
		return fmt.Errorf("%w: %d", ErrUnknownBroker, c.Broker)
	}
	keys := append(sortedKeys(c.Set), c.Remove...)
	keys = append(keys, sortedKeys(listKeys(c.Append))...)
	keys = append(keys, sortedKeys(listKeys(c.Subtract))...)
	if err := CheckBrokerConfigChange(keys, true); err != nil {
		return err
	}
	cur := img.PerBrokerConfigs[c.Broker]
	set, err := c.ListEdits.apply(c.Set, c.Remove, brokerDefByName, "broker", func(d *configDef) string {
		v, _ := img.brokerValue(d, c.Broker)
		return v
	})
	if err != nil {
		return err
	}
	configs, err := alterConfigs(cur, set, c.Remove, brokerDefByName, "broker")
	if err != nil {
		return err
	}
	m := maps.Clone(img.PerBrokerConfigs)
	if m == nil {
		m = map[int32]map[string]string{}
	}
	if len(configs) == 0 {
		delete(m, c.Broker)
	} else {
		m[c.Broker] = configs
	}
	img.PerBrokerConfigs = m
	return nil
}

// brokerValue resolves a dynamic broker config for one broker: its own value, the cluster-wide one,
// then the default.
func (img *Image) brokerValue(d *configDef, broker int32) (string, ConfigSource) {
	if v, ok := img.PerBrokerConfigs[broker][d.brokerName]; ok {
		return v, SourceDynamicBroker
	}
	if v, ok := img.BrokerConfigs[d.brokerName]; ok {
		return v, SourceDynamicBrokerDefault
	}
	return d.def, SourceDefault
}

// checkPerBrokerConfigs validates the per-broker configs of an image read from disk.
func (img *Image) checkPerBrokerConfigs() error {
	for id, configs := range img.PerBrokerConfigs {
		valid, err := ValidateBrokerConfigs(configs)
		if err != nil {
			return fmt.Errorf("broker %d: %w", id, err)
		}
		img.PerBrokerConfigs[id] = valid
	}
	return nil
}

// DescribeBrokerConfigsOf describes every broker config as broker sees it, sorted by name: the dynamic
// ones resolved per broker, cluster-wide, default; the read-only ones from static (the node's command
// line, when broker is this node) or their default. Each synonym chain lists every level that has a
// value, the most specific first. The read-only configs are left out when static is nil (another
// broker's, which only that broker knows).
func (img *Image) DescribeBrokerConfigsOf(broker int32, static map[string]string) []ConfigEntry {
	out := make([]ConfigEntry, 0, len(brokerDefByName)+len(staticDefs))
	for name, d := range brokerDefByName {
		v, src := img.brokerValue(d, broker)
		sv, static := static[name]
		if static && src == SourceDefault {
			v, src = sv, SourceStaticBroker
		}
		e := ConfigEntry{Name: name, Value: v, Source: src, Type: d.typ, Doc: d.doc}
		if pv, ok := img.PerBrokerConfigs[broker][name]; ok {
			e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: name, Value: pv, Source: SourceDynamicBroker})
		}
		if cv, ok := img.BrokerConfigs[name]; ok {
			e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: name, Value: cv, Source: SourceDynamicBrokerDefault})
		}
		if static {
			e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: name, Value: sv, Source: SourceStaticBroker})
		}
		e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: name, Value: d.def, Source: SourceDefault})
		out = append(out, e)
	}
	if static != nil {
		for i := range staticDefs {
			d := &staticDefs[i]
			e := ConfigEntry{Name: d.brokerName, Value: d.def, Source: SourceDefault, Type: d.typ, ReadOnly: true, Doc: d.doc}
			if v, ok := static[d.brokerName]; ok {
				e.Value, e.Source = v, SourceStaticBroker
				e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: d.brokerName, Value: v, Source: SourceStaticBroker})
			}
			e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: d.brokerName, Value: d.def, Source: SourceDefault})
			out = append(out, e)
		}
	}
	sortEntries(out)
	return out
}

// DescribeBrokerDefaultConfigs describes the cluster-wide broker configs set at run time (the default
// broker resource, named ""), as Kafka lists only those there.
func (img *Image) DescribeBrokerDefaultConfigs() []ConfigEntry {
	out := make([]ConfigEntry, 0, len(img.BrokerConfigs))
	for _, name := range sortedKeys(img.BrokerConfigs) {
		d := brokerDefByName[name]
		v := img.BrokerConfigs[name]
		out = append(out, ConfigEntry{Name: name, Value: v, Source: SourceDynamicBrokerDefault, Type: d.typ, Doc: d.doc,
			Synonyms: []ConfigSynonym{{Name: name, Value: v, Source: SourceDynamicBrokerDefault}}})
	}
	return out
}

// DescribeTopicConfigsOn describes a topic's configs as broker resolves them: DescribeTopicConfigs with
// the broker's own values (PerBrokerConfigs) between the topic's and the cluster-wide ones.
func (img *Image) DescribeTopicConfigsOn(name string, broker int32) ([]ConfigEntry, error) {
	entries, err := img.DescribeTopicConfigs(name)
	if err != nil {
		return nil, err
	}
	own := img.PerBrokerConfigs[broker]
	if len(own) == 0 {
		return entries, nil
	}
	for i := range entries {
		e := &entries[i]
		d := topicDefByName[e.Name]
		v, ok := own[d.brokerName]
		if d.brokerName == "" || !ok {
			continue
		}
		at := 0
		if e.Source == SourceTopic {
			at = 1
		} else {
			e.Value, e.Source = v, SourceDynamicBroker
		}
		e.Synonyms = append(e.Synonyms[:at:at], append([]ConfigSynonym{{Name: d.brokerName, Value: v, Source: SourceDynamicBroker}}, e.Synonyms[at:]...)...)
	}
	return entries, nil
}

// LogConfigOn resolves t's configs as broker applies them to its logs: topic value, the broker's own
// value, the cluster-wide value, the default. LogConfig is the cluster-wide resolution the controller
// decides with.
func (img *Image) LogConfigOn(t *Topic, broker int32) LogConfig {
	return img.viewOn(broker).LogConfig(t)
}

// ProduceConfigOn resolves the configs of t that broker's produce path acts on as LogConfigOn does:
// the broker's own values come between the topic's and the cluster-wide ones.
func (img *Image) ProduceConfigOn(t *Topic, broker int32) ProduceConfig {
	return img.viewOn(broker).ProduceConfig(t)
}

// DeliveryConfigOn resolves the delivery configs of t as broker does, as ProduceConfigOn does.
func (img *Image) DeliveryConfigOn(t *Topic, broker int32) DeliveryConfig {
	return img.viewOn(broker).DeliveryConfig(t)
}

// viewOn is img as broker resolves configs: its own values (PerBrokerConfigs) stand in for the
// cluster-wide ones they name. It is img itself when broker has none.
func (img *Image) viewOn(broker int32) *Image {
	own := img.PerBrokerConfigs[broker]
	if len(own) == 0 {
		return img
	}
	view := *img
	view.BrokerConfigs = copyConfigs(img.BrokerConfigs)
	maps.Copy(view.BrokerConfigs, own)
	return &view
}

// EditPerBrokerConfigs sets, removes and edits the configs of one broker (IncrementalAlterConfigs and
// AlterConfigs on a broker resource named by its id).
func (s *Store) EditPerBrokerConfigs(ctx context.Context, broker int32, set map[string]string, remove []string, edits ListEdits, validateOnly bool) error {
	build := func(*Image) Command {
		return AlterPerBrokerConfigs{Broker: broker, Set: set, Remove: remove, ListEdits: edits}
	}
	if err := s.checkConfigs(build); err != nil {
		return err
	}
	_, _, err := s.propose(ctx, build, validateOnly)
	return err
}

// ParseBrokerID parses a broker config resource name: a broker id, or -1 for "" (the cluster-wide
// default resource).
func ParseBrokerID(name string) (int32, error) {
	if name == "" {
		return -1, nil
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil || id < 0 || id > math.MaxInt32 {
		return 0, fmt.Errorf("%w: %q is not a broker id", ErrUnknownBroker, name)
	}
	return int32(id), nil
}
