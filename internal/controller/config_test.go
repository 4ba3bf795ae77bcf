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
