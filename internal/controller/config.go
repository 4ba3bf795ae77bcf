package controller

import (
	"fmt"
	"maps"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Topic config keys weir acts on (with those of the produce path in config_produce.go). Each has a
// broker-level synonym (BrokerConfigs) that sets the cluster-wide default. topicDefs holds every topic
// config of Kafka 4.x; the few weir does not act on say so in their docs (compat, notApplicable).
const (
	ConfigRetentionMs           = "retention.ms"
	ConfigRetentionBytes        = "retention.bytes"
	ConfigSegmentBytes          = "segment.bytes"
	ConfigSegmentMs             = "segment.ms"
	ConfigCleanupPolicy         = "cleanup.policy"
	ConfigMaxMessageBytes       = "max.message.bytes"
	ConfigMinInsyncReplicas     = "min.insync.replicas"
	ConfigMessageTimestampType  = "message.timestamp.type"
	ConfigDeleteRetentionMs     = "delete.retention.ms"
	ConfigFlushPolicy           = "weir.flush.policy"
	ConfigFlushMs               = "flush.ms"
	ConfigUncleanLeaderElection = "unclean.leader.election.enable"
	ConfigCompressionType       = "compression.type"
	// ConfigDeadLetterGroupEnable opts a topic in as a share group's dead-letter topic (KIP-1191): a
	// group's errors.deadletterqueue.topic.name may name only a topic that sets it to true.
	ConfigDeadLetterGroupEnable = "errors.deadletterqueue.group.enable"
)

// Topic config keys weir checks against each other (CheckConfigRules).
const (
	ConfigMinCompactionLagMs = "min.compaction.lag.ms"
	ConfigMaxCompactionLagMs = "max.compaction.lag.ms"
)

// Topic config keys of the compactor and the storage engine (docs/storage.md).
const (
	ConfigMinCleanableDirtyRatio = "min.cleanable.dirty.ratio"
	ConfigSegmentJitterMs        = "segment.jitter.ms"
	ConfigFileDeleteDelayMs      = "file.delete.delay.ms"
	ConfigIndexIntervalBytes     = "index.interval.bytes"
	ConfigSegmentIndexBytes      = "segment.index.bytes"
	ConfigPreallocate            = "preallocate"
)

// Broker-only config keys (no topic-level synonym).
const (
	BrokerConfigNumPartitions            = "num.partitions"
	BrokerConfigDefaultReplicationFactor = "default.replication.factor"
	BrokerConfigAutoCreateTopics         = "auto.create.topics.enable"
	BrokerConfigMaxPartitionsPerBroker   = "weir.max.partitions.per.broker"
	BrokerConfigMaxPartitions            = "weir.max.partitions"
	BrokerConfigFollowerThrottleRate     = "follower.replication.throttled.rate"
	BrokerConfigLeaderThrottleRate       = "leader.replication.throttled.rate"
	// BrokerConfigDeadLetterAutoCreate decides whether a share group's dead-letter topic that does not
	// exist is created on its first dead letter (KIP-1191).
	BrokerConfigDeadLetterAutoCreate = "errors.deadletterqueue.auto.create.topics.enable"
	// BrokerConfigDeadLetterPrefix is what a share group's dead-letter topic name must start with
	// (KIP-1191); empty: any name. A node's --dlq-topic-name-prefix is its static value, which the
	// cluster-wide one overrides.
	BrokerConfigDeadLetterPrefix = "errors.deadletterqueue.topic.name.prefix"
)

// MaxPartitions bounds the partition count of one topic, so that one request cannot ask a node to
// create millions of logs.
const MaxPartitions = 100_000

// ConfigType is the type a config reports in DescribeConfigs.
type ConfigType int8

// Config types, as DescribeConfigs names them.
const (
	ConfigTypeString ConfigType = iota + 1
	ConfigTypeInt
	ConfigTypeLong
	ConfigTypeBoolean
	ConfigTypeList
	ConfigTypeDouble
)

// ConfigSource says where a described config value comes from.
type ConfigSource int8

// Config sources, most specific first.
const (
	// SourceTopic is a value set on the topic.
	SourceTopic ConfigSource = iota + 1
	// SourceDynamicBrokerDefault is a cluster-wide broker value set at runtime (BrokerConfigs).
	SourceDynamicBrokerDefault
	// SourceDefault is weir's built-in default.
	SourceDefault
)

// ConfigSynonym is one level of a config's resolution chain.
type ConfigSynonym struct {
	Name   string
	Value  string
	Source ConfigSource
}

// ConfigEntry describes one config for DescribeConfigs.
type ConfigEntry struct {
	Name     string
	Value    string
	Source   ConfigSource
	Type     ConfigType
	ReadOnly bool
	// Sensitive is always false today; no weir config is secret.
	Sensitive bool
	Doc       string
	// Synonyms lists the resolution chain, the entry's own level first.
	Synonyms []ConfigSynonym
}

// FlushPolicy is when a log makes appended bytes durable before they are acknowledged.
type FlushPolicy string

// Flush policies (the weir.flush.policy values).
const (
	// FlushAlways syncs before acknowledging (group commit): the default, and the only policy under
	// which an acknowledged record survives power loss.
	FlushAlways FlushPolicy = "always"
	// FlushInterval syncs every flush.ms; a crash may lose up to that much acknowledged data.
	FlushInterval FlushPolicy = "interval"
	// FlushNever leaves syncing to the operating system.
	FlushNever FlushPolicy = "never"
)

// TimestampType is a topic's message.timestamp.type.
type TimestampType string

// Timestamp types.
const (
	CreateTime    TimestampType = "CreateTime"
	LogAppendTime TimestampType = "LogAppendTime"
)

// LogConfig is a topic's configs resolved and parsed: topic value, else the cluster-wide broker value,
// else the default. The partition manager turns it into the storage engine's config.
type LogConfig struct {
	// RetentionMs is -1 for no time limit.
	RetentionMs int64
	// RetentionBytes is -1 for no size limit.
	RetentionBytes        int64
	SegmentBytes          int32
	SegmentMs             int64
	CleanupDelete         bool
	CleanupCompact        bool
	MaxMessageBytes       int32
	MinInsyncReplicas     int32
	TimestampType         TimestampType
	DeleteRetentionMs     int64
	FlushPolicy           FlushPolicy
	FlushMs               int64
	UncleanLeaderElection bool
	// The compactor's and the storage engine's configs (docs/storage.md); MaxCompactionLagMs is
	// math.MaxInt64 for no limit.
	MinCompactionLagMs     int64
	MaxCompactionLagMs     int64
	MinCleanableDirtyRatio float64
	SegmentJitterMs        int64
	FileDeleteDelayMs      int64
	IndexIntervalBytes     int32
	SegmentIndexBytes      int32
	Preallocate            bool
}

type configDef struct {
	name string
	// brokerName is the broker-level synonym that sets the cluster-wide default; "" for the topic
	// configs Kafka gives none.
	brokerName string
	typ        ConfigType
	def        string
	// check validates a value and returns its canonical form.
	check func(string) (string, error)
	doc   string
}

func longRange(lo, hi int64) func(string) (string, error) {
	return func(v string) (string, error) {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return "", fmt.Errorf("not an integer: %q", v)
		}
		if n < lo || n > hi {
			return "", fmt.Errorf("%d outside [%d, %d]", n, lo, hi)
		}
		return strconv.FormatInt(n, 10), nil
	}
}

func doubleRange(lo, hi float64) func(string) (string, error) {
	return func(v string) (string, error) {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return "", fmt.Errorf("not a number: %q", v)
		}
		if f < lo || f > hi {
			return "", fmt.Errorf("%s outside [%s, %s]", strconv.FormatFloat(f, 'f', -1, 64),
				strconv.FormatFloat(lo, 'f', -1, 64), strconv.FormatFloat(hi, 'f', -1, 64))
		}
		return strconv.FormatFloat(f, 'f', -1, 64), nil
	}
}

// gzipLevel is Kafka's rule for compression.gzip.level: 1 to 9, or -1 for the codec's default.
func gzipLevel(v string) (string, error) {
	s, err := longRange(-1, 9)(v)
	if err != nil || s == "0" {
		return "", fmt.Errorf("%q is not in [1, 9] or -1", v)
	}
	return s, nil
}

// throttledReplicas is Kafka's rule for the replication-throttle lists: the literal "*", or a
// comma-separated list of partition:broker pairs (empty for none).
func throttledReplicas(v string) (string, error) {
	if strings.TrimSpace(v) == "*" {
		return "*", nil
	}
	if strings.TrimSpace(v) == "" {
		return "", nil
	}
	items := strings.Split(v, ",")
	for i, item := range items {
		item = strings.TrimSpace(item)
		p, b, ok := strings.Cut(item, ":")
		if !ok || !digits(p) || !digits(b) {
			return "", fmt.Errorf("%q is not the literal '*' or a list of [partitionId]:[brokerId]", v)
		}
		items[i] = item
	}
	return strings.Join(items, ","), nil
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// remoteStorage accepts remote.storage.enable=false only: weir has no tiered storage, and taking
// true would promise copies that are never made.
func remoteStorage(v string) (string, error) {
	b, err := boolean(v)
	if err == nil && b == "true" {
		return "", fmt.Errorf("weir has no tiered storage")
	}
	return b, err
}

func oneOf(values ...string) func(string) (string, error) {
	return func(v string) (string, error) {
		v = strings.TrimSpace(v)
		for _, ok := range values {
			if v == ok {
				return v, nil
			}
		}
		return "", fmt.Errorf("%q is not one of %s", v, strings.Join(values, ", "))
	}
}

func boolean(v string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true":
		return "true", nil
	case "false":
		return "false", nil
	}
	return "", fmt.Errorf("%q is not true or false", v)
}

// delayTarget checks weir.delay.target.topic's value alone: empty or a legal topic name.
// CheckConfigRules checks the topic it names.
func delayTarget(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	if err := ValidateTopicName(v); err != nil {
		return "", err
	}
	return v, nil
}

func cleanupPolicy(v string) (string, error) {
	var deleteSet, compact bool
	for _, p := range strings.Split(v, ",") {
		switch strings.TrimSpace(p) {
		case "delete":
			deleteSet = true
		case "compact":
			compact = true
		default:
			return "", fmt.Errorf("%q is not a list of delete, compact", v)
		}
	}
	switch {
	case deleteSet && compact:
		return "compact,delete", nil
	case compact:
		return "compact", nil
	}
	return "delete", nil
}

// compat prefixes the doc of a config weir accepts, stores and describes but does not act on.
const compat = "accepted for compatibility, changes nothing in weir: "

// notApplicable prefixes the doc of a config weir accepts, stores and describes and never will act on,
// because weir has no such mechanism (tiered storage, down-conversion).
const notApplicable = "not applicable to weir, accepted and ignored: "

// topicDefs is every topic config of Kafka 4.x (and the two 3.x ones tools still send,
// message.timestamp.difference.max.ms and message.downconversion.enable) with Kafka's type, default,
// range and broker synonym, plus weir.flush.policy. flush.ms keeps weir's default of 1000, the period
// of weir.flush.policy=interval (Kafka's is Long.MAX_VALUE), and segment.bytes weir's minimum of 14.
var topicDefs = []configDef{
	{ConfigCleanupPolicy, "log.cleanup.policy", ConfigTypeList, "delete", cleanupPolicy,
		"delete (drop old segments), compact (keep the latest record per key), or both"},
	{ConfigCompressionType, "compression.type", ConfigTypeString, "producer",
		oneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
		"the codec batches are stored in: a produced batch of another codec is recompressed by the leader; producer keeps each as sent"},
	{"compression.gzip.level", "compression.gzip.level", ConfigTypeInt, "-1", gzipLevel,
		"gzip level for compression.type=gzip"},
	{"compression.lz4.level", "compression.lz4.level", ConfigTypeInt, "9", longRange(1, 17),
		"lz4 level for compression.type=lz4: 1 to 9 with lz4's fast compressor, 10 to 17 in its slower high-compression mode"},
	{"compression.zstd.level", "compression.zstd.level", ConfigTypeInt, "3", longRange(-131072, 22),
		"zstd level for compression.type=zstd"},
	{ConfigDeleteRetentionMs, "log.cleaner.delete.retention.ms", ConfigTypeLong, "86400000", longRange(0, math.MaxInt64),
		"how long tombstones are kept in a compacted topic"},
	{ConfigDeadLetterGroupEnable, "", ConfigTypeBoolean, "false", boolean,
		"lets share groups name the topic as their errors.deadletterqueue.topic.name (KIP-1191); a dead-letter topic the broker creates has it set, and while it is false the broker writes no dead letters to the topic"},
	{ConfigFileDeleteDelayMs, "log.segment.delete.delay.ms", ConfigTypeLong, "60000", longRange(0, math.MaxInt64),
		"delay before the files of a segment deleted by retention are removed (renamed .deleted meanwhile)"},
	{"flush.messages", "log.flush.interval.messages", ConfigTypeLong, "9223372036854775807", longRange(1, math.MaxInt64),
		"1 makes weir.flush.policy always, another value interval (every flush.ms), unless weir.flush.policy is set at the same level"},
	{ConfigFlushMs, "log.flush.interval.ms", ConfigTypeLong, "1000", longRange(0, math.MaxInt64),
		"sync period under weir.flush.policy=interval; set without weir.flush.policy at its level, it makes the policy interval"},
	{"follower.replication.throttled.replicas", "", ConfigTypeList, "", throttledReplicas,
		"replicas a broker copies under follower.replication.throttled.rate, '*' or partition:broker pairs (besides a move's new replicas)"},
	{ConfigIndexIntervalBytes, "log.index.interval.bytes", ConfigTypeInt, "4096", longRange(0, math.MaxInt32),
		"bytes between offset index entries"},
	{"leader.replication.throttled.replicas", "", ConfigTypeList, "", throttledReplicas,
		"leaders that send their out-of-sync followers' copies under leader.replication.throttled.rate, '*' or partition:broker pairs (besides a move's new replicas)"},
	{"local.retention.bytes", "log.local.retention.bytes", ConfigTypeLong, "-2", longRange(-2, math.MaxInt64),
		notApplicable + "local size limit under tiered storage, which weir does not have"},
	{"local.retention.ms", "log.local.retention.ms", ConfigTypeLong, "-2", longRange(-2, math.MaxInt64),
		notApplicable + "local age limit under tiered storage, which weir does not have"},
	{ConfigMaxCompactionLagMs, "log.cleaner.max.compaction.lag.ms", ConfigTypeLong, "9223372036854775807", longRange(1, math.MaxInt64),
		"longest a record may stay uncompacted: a dirty segment older than this is compacted whatever the dirty ratio"},
	{ConfigMaxMessageBytes, "message.max.bytes", ConfigTypeInt, "1048588", longRange(0, math.MaxInt32),
		"largest record batch accepted"},
	{"message.downconversion.enable", "", ConfigTypeBoolean, "true", boolean,
		notApplicable + "weir never down-converts (a no-op in Kafka 4 too)"},
	{"message.timestamp.after.max.ms", "log.message.timestamp.after.max.ms", ConfigTypeLong, "3600000", longRange(0, math.MaxInt64),
		"how far in the future a CreateTime record's timestamp may be, else INVALID_TIMESTAMP"},
	{"message.timestamp.before.max.ms", "log.message.timestamp.before.max.ms", ConfigTypeLong, "9223372036854775807", longRange(0, math.MaxInt64),
		"how far in the past a CreateTime record's timestamp may be, else INVALID_TIMESTAMP"},
	{"message.timestamp.difference.max.ms", "log.message.timestamp.difference.max.ms", ConfigTypeLong, "9223372036854775807", longRange(0, math.MaxInt64),
		"removed in Kafka 4.0; when set, the bound of either direction whose before/after limit is not set"},
	{ConfigMessageTimestampType, "log.message.timestamp.type", ConfigTypeString, string(CreateTime),
		oneOf(string(CreateTime), string(LogAppendTime)), "CreateTime or LogAppendTime"},
	{ConfigMinCleanableDirtyRatio, "log.cleaner.min.cleanable.ratio", ConfigTypeDouble, "0.5", doubleRange(0, 1),
		"dirty share of the cleanable log above which it is compacted"},
	{ConfigMinCompactionLagMs, "log.cleaner.min.compaction.lag.ms", ConfigTypeLong, "0", longRange(0, math.MaxInt64),
		"shortest a record stays uncompacted"},
	{ConfigMinInsyncReplicas, "min.insync.replicas", ConfigTypeInt, "1", longRange(1, math.MaxInt32),
		"in-sync replicas required for acks=all"},
	{ConfigPreallocate, "log.preallocate", ConfigTypeBoolean, "false", boolean,
		"reserve segment.bytes of disk for a new segment's file (fallocate, keeping its size)"},
	{"remote.log.copy.disable", "", ConfigTypeBoolean, "false", boolean,
		notApplicable + "stop copying to tiered storage, which weir does not have"},
	{"remote.log.delete.on.disable", "", ConfigTypeBoolean, "false", boolean,
		notApplicable + "delete tiered data when tiered storage is disabled"},
	{"remote.storage.enable", "", ConfigTypeBoolean, "false", remoteStorage,
		"tiered storage; weir has none, so only false is accepted"},
	{ConfigRetentionBytes, "log.retention.bytes", ConfigTypeLong, "-1", longRange(-1, math.MaxInt64),
		"size above which old segments are deleted, -1 for no limit"},
	{ConfigRetentionMs, "log.retention.ms", ConfigTypeLong, "604800000", longRange(-1, math.MaxInt64),
		"age after which old segments are deleted, -1 for no limit"},
	{ConfigSegmentBytes, "log.segment.bytes", ConfigTypeInt, "1073741824", longRange(14, math.MaxInt32),
		"size at which a segment is rolled"},
	{ConfigSegmentIndexBytes, "log.index.size.max.bytes", ConfigTypeInt, "10485760", longRange(4, math.MaxInt32),
		"largest offset or time index of a segment; a segment whose index is full rolls"},
	{ConfigSegmentJitterMs, "log.roll.jitter.ms", ConfigTypeLong, "0", longRange(0, math.MaxInt64),
		"random jitter, drawn per segment, subtracted from segment.ms"},
	{ConfigSegmentMs, "log.roll.ms", ConfigTypeLong, "604800000", longRange(1, math.MaxInt64),
		"age at which a segment is rolled"},
	{ConfigUncleanLeaderElection, "unclean.leader.election.enable", ConfigTypeBoolean, "false", boolean,
		"allow a replica outside the ISR to become leader"},
	{ConfigDelayTargetTopic, "", ConfigTypeString, "", delayTarget,
		"declares a delay topic: its records are released into this topic, at acks=all and by key, at their due times (weir.deliver-at, weir.delay-ms or weir.delivery.delay.ms), whose headers produce then checks; an existing topic that is neither internal, nor this one, nor a delay topic; empty: not a delay topic"},
	{ConfigDeliveryDelayMs, "", ConfigTypeLong, "0", longRange(0, math.MaxInt64),
		"share groups hand out a record without a weir.deliver-at or weir.delay-ms header this long after its timestamp"},
	{ConfigDeliveryDelayMaxMs, "", ConfigTypeLong, "604800000", longRange(0, math.MaxInt64),
		"longest delay a produced record may ask for (weir.deliver-at beyond now + this, or weir.delay-ms above it, is INVALID_RECORD)"},
	{ConfigDeliveryHeaders, "", ConfigTypeBoolean, "false", boolean,
		"share groups act on the weir.priority, weir.deliver-at and weir.delay-ms headers of the topic's records, and produce refuses malformed ones; off, they are ordinary headers and produce does not decode batches for them"},
	{ConfigFlushPolicy, "weir.log.flush.policy", ConfigTypeString, string(FlushAlways),
		oneOf(string(FlushAlways), string(FlushInterval), string(FlushNever)),
		"always (sync before acknowledging), interval (every flush.ms) or never (leave it to the OS); flush.messages and flush.ms set at a level where this is not set decide it"},
	{ConfigPriorityAgingMs, ConfigPriorityAgingMs, ConfigTypeLong, "10000", longRange(1, math.MaxInt64),
		"a record waiting, available, in a share-partition gains one priority level per this many ms (up to 9), so that low priorities are not starved"},
	{ConfigPriorityDefault, "", ConfigTypeInt, "0", longRange(0, 9),
		"share-group priority, 0 to 9, of a record without a weir.priority header"},
}

var brokerOnlyDefs = []configDef{
	{brokerName: BrokerConfigAutoCreateTopics, typ: ConfigTypeBoolean, def: "true", check: boolean,
		doc: "create a topic when a client asks for its metadata"},
	{brokerName: BrokerConfigDeadLetterAutoCreate, typ: ConfigTypeBoolean, def: "false", check: boolean,
		doc: "create a share group's dead-letter topic that does not exist on its first dead letter, with errors.deadletterqueue.group.enable=true; off, those dead letters are dropped and counted"},
	{brokerName: BrokerConfigDeadLetterPrefix, typ: ConfigTypeString, def: DefaultDeadLetterPrefix, check: deadLetterPrefix,
		doc: "what a share group's errors.deadletterqueue.topic.name must start with; empty: any name. A node's --dlq-topic-name-prefix applies while this is not set"},
	{brokerName: BrokerConfigDefaultReplicationFactor, typ: ConfigTypeInt, def: "1", check: longRange(1, math.MaxInt16),
		doc: "replication factor of automatically created topics"},
	{brokerName: BrokerConfigNumPartitions, typ: ConfigTypeInt, def: "1", check: longRange(1, MaxPartitions),
		doc: "partitions of a topic created without a count"},
	{brokerName: BrokerConfigMaxPartitionsPerBroker, typ: ConfigTypeInt, def: "10000", check: longRange(1, math.MaxInt32),
		doc: "partition replicas one broker may host; a create that would put more on a broker is refused"},
	{brokerName: BrokerConfigMaxPartitions, typ: ConfigTypeInt, def: "200000", check: longRange(1, math.MaxInt32),
		doc: "partitions the whole cluster may hold; a create that would make more is refused"},
	{brokerName: BrokerConfigFollowerThrottleRate, typ: ConfigTypeLong, def: "9223372036854775807", check: longRange(1, math.MaxInt64),
		doc: "bytes per second a broker copies for throttled replicas: a move's new ones and those follower.replication.throttled.replicas names"},
	{brokerName: BrokerConfigLeaderThrottleRate, typ: ConfigTypeLong, def: "9223372036854775807", check: longRange(1, math.MaxInt64),
		doc: "bytes per second a leader sends for throttled replicas out of the ISR: a move's new ones and those leader.replication.throttled.replicas names"},
}

var (
	topicDefByName  = map[string]*configDef{}
	brokerDefByName = map[string]*configDef{}
)

func init() {
	for i := range topicDefs {
		d := &topicDefs[i]
		topicDefByName[d.name] = d
		if d.brokerName != "" {
			brokerDefByName[d.brokerName] = d
		}
	}
	for i := range brokerOnlyDefs {
		brokerDefByName[brokerOnlyDefs[i].brokerName] = &brokerOnlyDefs[i]
	}
}

// ValidateTopicConfigs checks every key and value of a topic's configs and returns them in canonical
// form. It returns ErrInvalidConfig naming the first bad entry.
func ValidateTopicConfigs(set map[string]string) (map[string]string, error) {
	return validate(set, topicDefByName, "topic")
}

// ValidateBrokerConfigs checks cluster-wide broker configs as ValidateTopicConfigs does.
func ValidateBrokerConfigs(set map[string]string) (map[string]string, error) {
	return validate(set, brokerDefByName, "broker")
}

func validate(set map[string]string, defs map[string]*configDef, kind string) (map[string]string, error) {
	out := make(map[string]string, len(set))
	for _, k := range sortedKeys(set) {
		d, ok := defs[k]
		if !ok {
			return nil, fmt.Errorf("%w: unknown %s config %q", ErrInvalidConfig, kind, k)
		}
		v, err := d.check(set[k])
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalidConfig, k, err)
		}
		out[k] = v
	}
	return out, nil
}

func checkKnown(keys []string, defs map[string]*configDef, kind string) error {
	for _, k := range keys {
		if _, ok := defs[k]; !ok {
			return fmt.Errorf("%w: unknown %s config %q", ErrInvalidConfig, kind, k)
		}
	}
	return nil
}

// CheckConfigRules checks the rules between configs that a change from cur to next touches, as Kafka
// does: a topic's min.compaction.lag.ms may not exceed its max.compaction.lag.ms, nor the broker
// defaults' one the other's. It returns ErrInvalidConfig naming both. A topic's
// weir.delay.target.topic must name a topic of next that is not internal, not the topic itself and
// not a delay topic (so that releases never loop). A group's errors.deadletterqueue.topic.name may
// name a topic that exists only if it sets errors.deadletterqueue.group.enable=true (KIP-1191; one
// that does not exist yet is checked when a dead letter is written). Only the topics and groups next
// changed (and the broker defaults, when they changed) are checked, so an older violation does not
// block unrelated changes.
func CheckConfigRules(cur, next *Image) error {
	minLag, maxLag := topicDefByName[ConfigMinCompactionLagMs], topicDefByName[ConfigMaxCompactionLagMs]
	check := func(where string, configs map[string]string) error {
		lo, _ := next.topicValue(minLag, configs)
		hi, _ := next.topicValue(maxLag, configs)
		if parseLong(lo, 0) > parseLong(hi, math.MaxInt64) {
			return fmt.Errorf("%w: %s: %s (%s) is above %s (%s)", ErrInvalidConfig, where, minLag.name, lo, maxLag.name, hi)
		}
		return nil
	}
	if !maps.Equal(cur.BrokerConfigs, next.BrokerConfigs) {
		if err := check("broker defaults", nil); err != nil {
			return err
		}
	}
	for _, name := range next.TopicNames() {
		t := next.Topics[name]
		if ct, ok := cur.Topics[name]; ok && ct == t {
			continue
		}
		if err := check("topic "+name, t.Configs); err != nil {
			return err
		}
		if err := checkDelayTarget(next, t); err != nil {
			return err
		}
	}
	for group, configs := range next.GroupConfigs {
		topic := configs[GroupConfigDeadLetterTopic]
		if topic == "" || topic == cur.GroupConfigs[group][GroupConfigDeadLetterTopic] {
			continue
		}
		if _, ok := next.Topics[topic]; ok && !next.DeadLetterEnabled(topic) {
			return fmt.Errorf("%w: %s of group %s: topic %s does not set %s=true, which a dead-letter topic must",
				ErrInvalidConfig, GroupConfigDeadLetterTopic, group, topic, ConfigDeadLetterGroupEnable)
		}
	}
	return nil
}

// DeadLetterEnabled reports whether topic exists and may take share groups' dead letters: it sets
// errors.deadletterqueue.group.enable=true.
func (img *Image) DeadLetterEnabled(topic string) bool {
	t, ok := img.Topics[topic]
	return ok && t.Configs[ConfigDeadLetterGroupEnable] == "true"
}

// checkDelayTarget checks the topic t's weir.delay.target.topic names in img.
func checkDelayTarget(img *Image, t *Topic) error {
	name := t.Configs[ConfigDelayTargetTopic]
	if name == "" {
		return nil
	}
	target, ok := img.Topics[name]
	switch {
	case name == t.Name:
		return fmt.Errorf("%w: %s of topic %s names the topic itself", ErrInvalidConfig, ConfigDelayTargetTopic, t.Name)
	case !ok:
		return fmt.Errorf("%w: %s of topic %s: no topic %s", ErrInvalidConfig, ConfigDelayTargetTopic, t.Name, name)
	case target.Internal:
		return fmt.Errorf("%w: %s of topic %s: %s is internal", ErrInvalidConfig, ConfigDelayTargetTopic, t.Name, name)
	case target.Configs[ConfigDelayTargetTopic] != "":
		return fmt.Errorf("%w: %s of topic %s: %s is a delay topic itself", ErrInvalidConfig, ConfigDelayTargetTopic, t.Name, name)
	}
	return nil
}

// IsTopicConfig reports whether key is a topic config weir knows.
func IsTopicConfig(key string) bool { _, ok := topicDefByName[key]; return ok }

// IsBrokerConfig reports whether key is a broker config weir knows.
func IsBrokerConfig(key string) bool { _, ok := brokerDefByName[key]; return ok }

// topicValue resolves one topic config: topic, then broker-level, then default.
func (img *Image) topicValue(d *configDef, topic map[string]string) (string, ConfigSource) {
	if v, ok := topic[d.name]; ok {
		return v, SourceTopic
	}
	if v, ok := img.BrokerConfigs[d.brokerName]; ok {
		return v, SourceDynamicBrokerDefault
	}
	return d.def, SourceDefault
}

// BrokerConfig returns the effective value of a broker config key (set value or default) and false if
// the key is unknown.
func (img *Image) BrokerConfig(key string) (string, bool) {
	d, ok := brokerDefByName[key]
	if !ok {
		return "", false
	}
	if v, ok := img.BrokerConfigs[key]; ok {
		return v, true
	}
	return d.def, true
}

// AutoCreateTopics reports whether Metadata requests may create missing topics.
func (img *Image) AutoCreateTopics() bool {
	v, _ := img.BrokerConfig(BrokerConfigAutoCreateTopics)
	return v == "true"
}

// DeadLetterPrefix returns errors.deadletterqueue.topic.name.prefix as the cluster sets it, else
// static, the node's own value (its --dlq-topic-name-prefix).
func (img *Image) DeadLetterPrefix(static string) string {
	if v, ok := img.BrokerConfigs[BrokerConfigDeadLetterPrefix]; ok {
		return v
	}
	return static
}

// deadLetterPrefix accepts a prefix of a dead-letter topic's name: empty, or what a valid topic name
// may start with.
func deadLetterPrefix(v string) (string, error) {
	if v != "" && ValidateTopicName(v+"x") != nil {
		return "", fmt.Errorf("%q is not the start of a valid topic name", v)
	}
	return v, nil
}

// DeadLetterAutoCreate reports whether a share group's missing dead-letter topic is created on its
// first dead letter (errors.deadletterqueue.auto.create.topics.enable).
func (img *Image) DeadLetterAutoCreate() bool {
	v, _ := img.BrokerConfig(BrokerConfigDeadLetterAutoCreate)
	return v == "true"
}

// DefaultPartitions is the partition count of a topic created without one (num.partitions).
func (img *Image) DefaultPartitions() int32 {
	v, _ := img.BrokerConfig(BrokerConfigNumPartitions)
	return int32(parseLong(v, 1))
}

// DefaultReplicationFactor is the replication factor of a topic created without one.
func (img *Image) DefaultReplicationFactor() int16 {
	v, _ := img.BrokerConfig(BrokerConfigDefaultReplicationFactor)
	return int16(parseLong(v, 1))
}

// DescribeTopicConfigs describes every topic config of the named topic, sorted by name.
func (img *Image) DescribeTopicConfigs(name string) ([]ConfigEntry, error) {
	t, ok := img.Topics[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	out := make([]ConfigEntry, 0, len(topicDefs))
	for i := range topicDefs {
		d := &topicDefs[i]
		v, src := img.topicValue(d, t.Configs)
		if d.name == ConfigFlushPolicy {
			v, src = img.flushPolicySource(t.Configs)
		}
		e := ConfigEntry{Name: d.name, Value: v, Source: src, Type: d.typ, Doc: d.doc}
		if tv, ok := t.Configs[d.name]; ok {
			e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: d.name, Value: tv, Source: SourceTopic})
		}
		if d.brokerName != "" {
			if bv, ok := img.BrokerConfigs[d.brokerName]; ok {
				e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: d.brokerName, Value: bv, Source: SourceDynamicBrokerDefault})
			}
			e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: d.brokerName, Value: d.def, Source: SourceDefault})
		}
		out = append(out, e)
	}
	sortEntries(out)
	return out, nil
}

// DescribeBrokerConfigs describes every broker config, sorted by name.
func (img *Image) DescribeBrokerConfigs() []ConfigEntry {
	out := make([]ConfigEntry, 0, len(brokerDefByName))
	for name, d := range brokerDefByName {
		e := ConfigEntry{Name: name, Value: d.def, Source: SourceDefault, Type: d.typ, Doc: d.doc}
		if v, ok := img.BrokerConfigs[name]; ok {
			e.Value, e.Source = v, SourceDynamicBrokerDefault
			e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: name, Value: v, Source: SourceDynamicBrokerDefault})
		}
		e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: name, Value: d.def, Source: SourceDefault})
		out = append(out, e)
	}
	sortEntries(out)
	return out
}

// LogConfig resolves the configs of t (topic value, broker value, default) into typed values.
func (img *Image) LogConfig(t *Topic) LogConfig {
	var configs map[string]string
	if t != nil {
		configs = t.Configs
	}
	get := func(key string) string {
		v, _ := img.topicValue(topicDefByName[key], configs)
		return v
	}
	defLong := func(key string) int64 { return parseLong(topicDefByName[key].def, 0) }
	long := func(key string) int64 { return parseLong(get(key), defLong(key)) }
	policy := get(ConfigCleanupPolicy)
	return LogConfig{
		RetentionMs:           long(ConfigRetentionMs),
		RetentionBytes:        long(ConfigRetentionBytes),
		SegmentBytes:          int32(long(ConfigSegmentBytes)),
		SegmentMs:             long(ConfigSegmentMs),
		CleanupDelete:         strings.Contains(policy, "delete"),
		CleanupCompact:        strings.Contains(policy, "compact"),
		MaxMessageBytes:       int32(long(ConfigMaxMessageBytes)),
		MinInsyncReplicas:     int32(long(ConfigMinInsyncReplicas)),
		TimestampType:         TimestampType(get(ConfigMessageTimestampType)),
		DeleteRetentionMs:     long(ConfigDeleteRetentionMs),
		FlushPolicy:           img.flushPolicy(configs),
		FlushMs:               long(ConfigFlushMs),
		UncleanLeaderElection: get(ConfigUncleanLeaderElection) == "true",

		MinCompactionLagMs:     long(ConfigMinCompactionLagMs),
		MaxCompactionLagMs:     long(ConfigMaxCompactionLagMs),
		MinCleanableDirtyRatio: parseDouble(get(ConfigMinCleanableDirtyRatio), 0.5),
		SegmentJitterMs:        long(ConfigSegmentJitterMs),
		FileDeleteDelayMs:      long(ConfigFileDeleteDelayMs),
		IndexIntervalBytes:     int32(long(ConfigIndexIntervalBytes)),
		SegmentIndexBytes:      int32(long(ConfigSegmentIndexBytes)),
		Preallocate:            get(ConfigPreallocate) == "true",
	}
}

// parseDouble parses a value already validated, as parseLong does.
func parseDouble(v string, def float64) float64 {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return def
	}
	return f
}

// parseLong parses a value already validated; def covers values that never were (a hand-edited file).
func parseLong(v string, def int64) int64 {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return def
	}
	return n
}

func sortEntries(es []ConfigEntry) {
	sort.Slice(es, func(i, j int) bool { return es[i].Name < es[j].Name })
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
