package controller

import "math"

// Topic config keys the produce path acts on (ProduceConfig) and the ones that decide the flush
// policy with weir.flush.policy (LogConfig.FlushPolicy).
const (
	ConfigCompressionGzipLevel         = "compression.gzip.level"
	ConfigCompressionLZ4Level          = "compression.lz4.level"
	ConfigCompressionZstdLevel         = "compression.zstd.level"
	ConfigMessageTimestampBeforeMaxMs  = "message.timestamp.before.max.ms"
	ConfigMessageTimestampAfterMaxMs   = "message.timestamp.after.max.ms"
	ConfigMessageTimestampDifferenceMs = "message.timestamp.difference.max.ms"
	ConfigFlushMessages                = "flush.messages"
)

// CompressionProducer is the compression.type that stores batches as the producer compressed them.
const CompressionProducer = "producer"

// ProduceConfig is what a leader checks and converts a topic's produced batches by, resolved as
// LogConfig is (topic value, else broker value, else default).
type ProduceConfig struct {
	// Compression is compression.type: producer (store each batch as sent), uncompressed, gzip,
	// snappy, lz4 or zstd.
	Compression string
	// CompressionLevel is the level of Compression's codec (compression.gzip.level, .lz4.level or
	// .zstd.level); 0 for producer, uncompressed and snappy, which have none.
	CompressionLevel int
	// MaxMessageBytes is max.message.bytes, the limit a recompressed batch must keep too.
	MaxMessageBytes int32
	// LogAppendTime is message.timestamp.type=LogAppendTime: the broker's time replaces the
	// records', so their timestamps are not checked.
	LogAppendTime bool
	// TimestampBeforeMaxMs and TimestampAfterMaxMs bound a CreateTime record's timestamp to
	// [now - before, now + after] (math.MaxInt64 for no bound), message.timestamp.difference.max.ms
	// standing in for a direction whose own limit is set nowhere.
	TimestampBeforeMaxMs, TimestampAfterMaxMs int64
	// TimestampWindowSet reports that one of the three timestamp limits is set on the topic or the
	// broker rather than left at its default: the produce path then checks every record of a
	// compressed batch it keeps, not only the batch header's maximum timestamp.
	TimestampWindowSet bool
	// DeliveryHeaders is weir.delivery.headers.enable: the weir.* delivery headers of the topic's
	// records are checked (docs/queues.md).
	DeliveryHeaders bool
	// DeliveryDelayMaxMs is weir.delivery.delay.max.ms, the furthest a header may delay a record;
	// resolved only under DeliveryHeaders, 0 otherwise.
	DeliveryDelayMaxMs int64
}

// ProduceConfig resolves the configs of t that the produce path acts on; t nil gives the broker
// defaults.
func (img *Image) ProduceConfig(t *Topic) ProduceConfig {
	var configs map[string]string
	if t != nil {
		configs = t.Configs
	}
	value := func(key string) (string, ConfigSource) { return img.topicValue(topicDefByName[key], configs) }
	long := func(key string) (int64, bool) { return img.topicLong(key, configs) }
	pc := ProduceConfig{}
	pc.Compression, _ = value(ConfigCompressionType)
	switch pc.Compression {
	case "gzip":
		n, _ := long(ConfigCompressionGzipLevel)
		pc.CompressionLevel = int(n)
	case "lz4":
		n, _ := long(ConfigCompressionLZ4Level)
		pc.CompressionLevel = int(n)
	case "zstd":
		n, _ := long(ConfigCompressionZstdLevel)
		pc.CompressionLevel = int(n)
	}
	maxBytes, _ := long(ConfigMaxMessageBytes)
	pc.MaxMessageBytes = int32(maxBytes)
	tsType, _ := value(ConfigMessageTimestampType)
	pc.LogAppendTime = tsType == string(LogAppendTime)
	before, beforeSet := long(ConfigMessageTimestampBeforeMaxMs)
	after, afterSet := long(ConfigMessageTimestampAfterMaxMs)
	diff, diffSet := long(ConfigMessageTimestampDifferenceMs)
	if diffSet && !beforeSet {
		before = diff
	}
	if diffSet && !afterSet {
		after = diff
	}
	pc.TimestampBeforeMaxMs, pc.TimestampAfterMaxMs = before, after
	pc.TimestampWindowSet = beforeSet || afterSet || diffSet
	headers, _ := value(ConfigDeliveryHeaders)
	target, _ := value(ConfigDelayTargetTopic)
	if pc.DeliveryHeaders = headers == "true" || target != ""; pc.DeliveryHeaders {
		pc.DeliveryDelayMaxMs, _ = long(ConfigDeliveryDelayMaxMs)
	}
	return pc
}

// topicLong resolves the numeric config key of a topic with configs (topic value, else broker value,
// else default) and reports whether the topic or the broker sets it.
func (img *Image) topicLong(key string, configs map[string]string) (int64, bool) {
	v, src := img.topicValue(topicDefByName[key], configs)
	return parseLong(v, parseLong(topicDefByName[key].def, 0)), src != SourceDefault
}

// flushPolicy is the weir.flush.policy a topic with configs runs under (flushPolicySource).
func (img *Image) flushPolicy(configs map[string]string) FlushPolicy {
	p, _ := img.flushPolicySource(configs)
	return FlushPolicy(p)
}

// flushPolicySource resolves weir.flush.policy with Kafka's flush.messages and flush.ms, level by
// level, the topic's first, then the broker's: at a level that sets weir.flush.policy, that value;
// else at a level that sets flush.messages or flush.ms, always for flush.messages=1 (a sync after
// every batch, as Kafka syncs after every message) and interval (a sync every flush.ms) for any other
// value; else the next level, and always at the end. It returns the policy and the level it came from.
func (img *Image) flushPolicySource(configs map[string]string) (string, ConfigSource) {
	policy := topicDefByName[ConfigFlushPolicy]
	messages := topicDefByName[ConfigFlushMessages]
	period := topicDefByName[ConfigFlushMs]
	levels := []struct {
		values map[string]string
		key    func(*configDef) string
		source ConfigSource
	}{
		{configs, func(d *configDef) string { return d.name }, SourceTopic},
		{img.BrokerConfigs, func(d *configDef) string { return d.brokerName }, SourceDynamicBrokerDefault},
	}
	for _, l := range levels {
		if v, ok := l.values[l.key(policy)]; ok {
			return v, l.source
		}
		n, nSet := l.values[l.key(messages)]
		_, msSet := l.values[l.key(period)]
		switch {
		case nSet && parseLong(n, math.MaxInt64) == 1:
			return string(FlushAlways), l.source
		case nSet || msSet:
			return string(FlushInterval), l.source
		}
	}
	return policy.def, SourceDefault
}

// Topic configs of delayed delivery and priority for share groups (docs/queues.md).
const (
	ConfigDeliveryDelayMs    = "weir.delivery.delay.ms"
	ConfigDeliveryDelayMaxMs = "weir.delivery.delay.max.ms"
	ConfigDeliveryHeaders    = "weir.delivery.headers.enable"
	ConfigPriorityDefault    = "weir.priority.default"
	ConfigPriorityAgingMs    = "weir.priority.aging.ms"
	// ConfigDelayTargetTopic declares a delay topic: its records are released into the named topic
	// at their due times (docs/queues.md, "Delay topics (as built)"); "" for none.
	ConfigDelayTargetTopic = "weir.delay.target.topic"
)

// DeliveryConfig is what a share-partition's leader reads the weir.* delivery headers by and gives
// records without them, resolved as ProduceConfig is.
type DeliveryConfig struct {
	// Headers is weir.delivery.headers.enable: whether the weir.* delivery headers are checked at
	// produce and acted on by share groups.
	Headers bool
	// DelayMs is weir.delivery.delay.ms, DelayMaxMs weir.delivery.delay.max.ms.
	DelayMs, DelayMaxMs int64
	// PriorityDefault is weir.priority.default.
	PriorityDefault int8
	// AgingMs is weir.priority.aging.ms.
	AgingMs int64
}

// DeliveryConfig resolves the delivery configs of t; t nil gives the broker defaults.
func (img *Image) DeliveryConfig(t *Topic) DeliveryConfig {
	var configs map[string]string
	if t != nil {
		configs = t.Configs
	}
	long := func(key string) int64 {
		n, _ := img.topicLong(key, configs)
		return n
	}
	headers, _ := img.topicValue(topicDefByName[ConfigDeliveryHeaders], configs)
	return DeliveryConfig{
		Headers:         headers == "true",
		DelayMs:         long(ConfigDeliveryDelayMs),
		DelayMaxMs:      long(ConfigDeliveryDelayMaxMs),
		PriorityDefault: int8(long(ConfigPriorityDefault)),
		AgingMs:         long(ConfigPriorityAgingMs),
	}
}
