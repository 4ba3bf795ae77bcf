package controller

import (
	"errors"
	"strings"
	"testing"
)

// TestControllerKafkaTopicConfigs checks the topic configs of Kafka 4.x weir accepts without acting
// on them: a good value is stored in canonical form, a bad one is ErrInvalidConfig naming the config.
func TestControllerKafkaTopicConfigs(t *testing.T) {
	tests := []struct {
		key, value string
		want       string
		bad        bool
	}{
		{"compression.type", "lz4", "lz4", false},
		{"compression.type", "uncompressed", "uncompressed", false},
		{"compression.type", "LZ4", "", true},
		{"compression.gzip.level", "-1", "-1", false},
		{"compression.gzip.level", "9", "9", false},
		{"compression.gzip.level", "0", "", true},
		{"compression.gzip.level", "10", "", true},
		{"compression.lz4.level", "17", "17", false},
		{"compression.lz4.level", "0", "", true},
		{"compression.zstd.level", "-131072", "-131072", false},
		{"compression.zstd.level", "23", "", true},
		{"file.delete.delay.ms", "0", "0", false},
		{"file.delete.delay.ms", "-1", "", true},
		{"flush.messages", "1", "1", false},
		{"flush.messages", "0", "", true},
		{"follower.replication.throttled.replicas", " * ", "*", false},
		{"follower.replication.throttled.replicas", "0:1, 1:2", "0:1,1:2", false},
		{"follower.replication.throttled.replicas", "", "", false},
		{"leader.replication.throttled.replicas", "0:1,x:2", "", true},
		{"leader.replication.throttled.replicas", "0", "", true},
		{"index.interval.bytes", "0", "0", false},
		{"index.interval.bytes", "2147483648", "", true},
		{"local.retention.bytes", "-2", "-2", false},
		{"local.retention.ms", "-3", "", true},
		{"max.compaction.lag.ms", "60000", "60000", false},
		{"max.compaction.lag.ms", "0", "", true},
		{"message.downconversion.enable", "False", "false", false},
		{"message.timestamp.after.max.ms", "0", "0", false},
		{"message.timestamp.before.max.ms", "86400000", "86400000", false},
		{"message.timestamp.before.max.ms", "-1", "", true},
		{"message.timestamp.difference.max.ms", "1000", "1000", false},
		{"min.cleanable.dirty.ratio", "0.5", "0.5", false},
		{"min.cleanable.dirty.ratio", " 1 ", "1", false},
		{"min.cleanable.dirty.ratio", "1.5", "", true},
		{"min.cleanable.dirty.ratio", "NaN", "", true},
		{"min.cleanable.dirty.ratio", "half", "", true},
		{"min.compaction.lag.ms", "0", "0", false},
		{"preallocate", "false", "false", false},
		{"preallocate", "yes", "", true},
		{"remote.log.copy.disable", "true", "true", false},
		{"remote.log.delete.on.disable", "false", "false", false},
		{"remote.storage.enable", "false", "false", false},
		{"remote.storage.enable", "true", "", true},
		{"segment.index.bytes", "4", "4", false},
		{"segment.index.bytes", "3", "", true},
		{"segment.jitter.ms", "0", "0", false},
		{"segment.jitter.ms", "-1", "", true},
		{"confluent.placement.constraints", "{}", "", true},
	}
	for _, tt := range tests {
		got, err := ValidateTopicConfigs(map[string]string{tt.key: tt.value})
		if tt.bad {
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.key) {
				t.Errorf("%s=%q: %v, %v; want ErrInvalidConfig naming it", tt.key, tt.value, got, err)
			}
			continue
		}
		if err != nil || got[tt.key] != tt.want {
			t.Errorf("%s=%q: %q, %v; want %q", tt.key, tt.value, got[tt.key], err, tt.want)
		}
	}
}

// TestControllerTopicConfigSynonyms checks DescribeTopicConfigs for a config with a broker synonym
// and one without: the chain is topic, broker, default, and a config Kafka gives no broker synonym
// lists only its topic value.
func TestControllerTopicConfigSynonyms(t *testing.T) {
	img, err := applyAll(
		AlterBrokerConfigs{Set: map[string]string{"log.cleaner.min.compaction.lag.ms": "5"}},
		CreateTopic{Name: "a", ID: idA, Partitions: 1,
			Configs: map[string]string{"preallocate": "true", "leader.replication.throttled.replicas": "*"}})
	if err != nil {
		t.Fatal(err)
	}
	entries, err := img.DescribeTopicConfigs("a")
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]ConfigEntry{}
	for _, e := range entries {
		by[e.Name] = e
	}
	for _, d := range topicDefs {
		if _, ok := by[d.name]; !ok {
			t.Errorf("%s not described", d.name)
		}
	}
	check := func(name, value string, src ConfigSource, typ ConfigType, synonyms ...ConfigSynonym) {
		t.Helper()
		e := by[name]
		if e.Value != value || e.Source != src || e.Type != typ || len(e.Synonyms) != len(synonyms) {
			t.Fatalf("%s: %+v; want %q from %v, type %v, synonyms %v", name, e, value, src, typ, synonyms)
		}
		for i, s := range synonyms {
			if e.Synonyms[i] != s {
				t.Fatalf("%s synonym %d: %+v, want %+v", name, i, e.Synonyms[i], s)
			}
		}
	}
	check("preallocate", "true", SourceTopic, ConfigTypeBoolean,
		ConfigSynonym{"preallocate", "true", SourceTopic},
		ConfigSynonym{"log.preallocate", "false", SourceDefault})
	check("min.compaction.lag.ms", "5", SourceDynamicBrokerDefault, ConfigTypeLong,
		ConfigSynonym{"log.cleaner.min.compaction.lag.ms", "5", SourceDynamicBrokerDefault},
		ConfigSynonym{"log.cleaner.min.compaction.lag.ms", "0", SourceDefault})
	check("leader.replication.throttled.replicas", "*", SourceTopic, ConfigTypeList,
		ConfigSynonym{"leader.replication.throttled.replicas", "*", SourceTopic})
	check("follower.replication.throttled.replicas", "", SourceDefault, ConfigTypeList)
	check("min.cleanable.dirty.ratio", "0.5", SourceDefault, ConfigTypeDouble,
		ConfigSynonym{"log.cleaner.min.cleanable.ratio", "0.5", SourceDefault})
	if IsBrokerConfig("") {
		t.Fatal("a config without a broker synonym made \"\" a broker config")
	}
}

// TestControllerListEdits: APPEND and SUBTRACT start from the topic's value, else the broker default,
// else weir's default; they refuse configs that are not lists and keys also set or removed.
func TestControllerListEdits(t *testing.T) {
	img := NewImage("c", 1)
	apply := func(cmd Command) error {
		t.Helper()
		next, err := Apply(img, cmd)
		if err == nil {
			img = next
		}
		return err
	}
	if err := apply(RegisterBroker{Broker: Broker{NodeID: 1, Host: "h", Port: 9092, Incarnation: "a"}}); err != nil {
		t.Fatal(err)
	}
	if err := apply(CreateTopic{Name: "t", ID: TopicID{1}, Partitions: 1, Replicas: [][]int32{{1}}}); err != nil {
		t.Fatal(err)
	}
	policy := func() string { return img.Topics["t"].Configs[ConfigCleanupPolicy] }
	if err := apply(AlterBrokerConfigs{ListEdits: ListEdits{Append: map[string][]string{"log.cleanup.policy": {"compact"}}}}); err != nil {
		t.Fatal(err)
	}
	if got := img.BrokerConfigs["log.cleanup.policy"]; got != "compact,delete" {
		t.Fatalf("broker default after APPEND compact: %q", got)
	}
	if err := apply(AlterTopicConfigs{Name: "t", ListEdits: ListEdits{Subtract: map[string][]string{ConfigCleanupPolicy: {"delete"}}}}); err != nil {
		t.Fatal(err)
	}
	if got := policy(); got != "compact" {
		t.Fatalf("topic after SUBTRACT delete from the broker default: %q, want compact", got)
	}
	bad := []ListEdits{
		{Append: map[string][]string{ConfigRetentionMs: {"1"}}},
		{Append: map[string][]string{"no.such.config": {"1"}}},
		{Subtract: map[string][]string{ConfigCleanupPolicy: {"compact"}}},
	}
	for _, e := range bad {
		if err := apply(AlterTopicConfigs{Name: "t", ListEdits: e}); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("edit %+v: %v, want ErrInvalidConfig", e, err)
		}
	}
	both := AlterTopicConfigs{Name: "t", Set: map[string]string{ConfigCleanupPolicy: "delete"},
		ListEdits: ListEdits{Append: map[string][]string{ConfigCleanupPolicy: {"compact"}}}}
	if err := apply(both); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("set and edited: %v, want ErrInvalidConfig", err)
	}
	if got := policy(); got != "compact" {
		t.Fatalf("refused edits changed the topic: %q", got)
	}
}

// TestControllerConfigRules: min.compaction.lag.ms above max.compaction.lag.ms is refused for the
// topic or broker default a change touches, and an older violation does not block other changes.
func TestControllerConfigRules(t *testing.T) {
	img := NewImage("c", 1)
	img.Topics["old"] = &Topic{Name: "old", Configs: map[string]string{ConfigMinCompactionLagMs: "9", ConfigMaxCompactionLagMs: "5"}}
	next := img.clone()
	next.Topics["new"] = &Topic{Name: "new", Configs: map[string]string{ConfigMinCompactionLagMs: "1", ConfigMaxCompactionLagMs: "5"}}
	if err := CheckConfigRules(img, next); err != nil {
		t.Fatalf("a valid new topic beside an old violation: %v", err)
	}
	next.Topics["new"] = &Topic{Name: "new", Configs: map[string]string{ConfigMinCompactionLagMs: "6", ConfigMaxCompactionLagMs: "5"}}
	if err := CheckConfigRules(img, next); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "topic new") {
		t.Fatalf("min above max: %v, want ErrInvalidConfig naming topic new", err)
	}
	broker := img.clone()
	broker.BrokerConfigs = map[string]string{"log.cleaner.min.compaction.lag.ms": "10", "log.cleaner.max.compaction.lag.ms": "2"}
	if err := CheckConfigRules(img, broker); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("broker defaults min above max: %v, want ErrInvalidConfig", err)
	}
}

// TestControllerDelayTarget: weir.delay.target.topic must name an existing topic that is neither
// internal, nor the topic itself, nor a delay topic; a delay topic's produce checks the weir.*
// delivery headers.
func TestControllerDelayTarget(t *testing.T) {
	img := NewImage("c", 1)
	img.Topics["out"] = &Topic{Name: "out"}
	img.Topics["__consumer_offsets"] = &Topic{Name: "__consumer_offsets", Internal: true}
	img.Topics["d1"] = &Topic{Name: "d1", Configs: map[string]string{ConfigDelayTargetTopic: "out"}}
	for target, want := range map[string]string{
		"out":                "",
		"missing":            "no topic missing",
		"d":                  "names the topic itself",
		"__consumer_offsets": "is internal",
		"d1":                 "is a delay topic itself",
	} {
		next := img.clone()
		next.Topics["d"] = &Topic{Name: "d", Configs: map[string]string{ConfigDelayTargetTopic: target}}
		err := CheckConfigRules(img, next)
		if want == "" && err != nil || want != "" && (!errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), want)) {
			t.Errorf("target %s: %v, want %q", target, err, want)
		}
	}
	if _, err := ValidateTopicConfigs(map[string]string{ConfigDelayTargetTopic: "a/b"}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("target a/b: %v, want ErrInvalidConfig", err)
	}
	if pc := img.ProduceConfig(img.Topics["d1"]); !pc.DeliveryHeaders {
		t.Errorf("a delay topic's produce config does not check the delivery headers: %+v", pc)
	}
}
