package controller

import (
	"math"
	"testing"
)

// TestControllerProduceConfig resolves compression.type with its level and the timestamp window,
// message.timestamp.difference.max.ms standing in only for a direction whose own limit is set nowhere,
// and weir.delivery.delay.max.ms only for a topic whose delivery headers are on.
func TestControllerProduceConfig(t *testing.T) {
	tests := []struct {
		name   string
		broker map[string]string
		topic  map[string]string
		want   ProduceConfig
	}{
		{name: "defaults", want: ProduceConfig{Compression: "producer", MaxMessageBytes: 1048588,
			TimestampBeforeMaxMs: math.MaxInt64, TimestampAfterMaxMs: 3600000}},
		{name: "zstd with its default level", topic: map[string]string{"compression.type": "zstd"},
			want: ProduceConfig{Compression: "zstd", CompressionLevel: 3, MaxMessageBytes: 1048588,
				TimestampBeforeMaxMs: math.MaxInt64, TimestampAfterMaxMs: 3600000}},
		{name: "lz4 level from the broker", broker: map[string]string{"compression.type": "lz4", "compression.lz4.level": "12"},
			want: ProduceConfig{Compression: "lz4", CompressionLevel: 12, MaxMessageBytes: 1048588,
				TimestampBeforeMaxMs: math.MaxInt64, TimestampAfterMaxMs: 3600000}},
		{name: "gzip's level is not lz4's",
			topic: map[string]string{"compression.type": "gzip", "compression.lz4.level": "12"},
			want: ProduceConfig{Compression: "gzip", CompressionLevel: -1, MaxMessageBytes: 1048588,
				TimestampBeforeMaxMs: math.MaxInt64, TimestampAfterMaxMs: 3600000}},
		{name: "before and after", topic: map[string]string{"message.timestamp.before.max.ms": "60000",
			"message.timestamp.after.max.ms": "5000", "max.message.bytes": "2000"},
			want: ProduceConfig{Compression: "producer", MaxMessageBytes: 2000,
				TimestampBeforeMaxMs: 60000, TimestampAfterMaxMs: 5000, TimestampWindowSet: true}},
		{name: "difference bounds both", topic: map[string]string{"message.timestamp.difference.max.ms": "1000"},
			want: ProduceConfig{Compression: "producer", MaxMessageBytes: 1048588,
				TimestampBeforeMaxMs: 1000, TimestampAfterMaxMs: 1000, TimestampWindowSet: true}},
		{name: "difference under a set after",
			broker: map[string]string{"log.message.timestamp.after.max.ms": "7"},
			topic:  map[string]string{"message.timestamp.difference.max.ms": "1000"},
			want: ProduceConfig{Compression: "producer", MaxMessageBytes: 1048588,
				TimestampBeforeMaxMs: 1000, TimestampAfterMaxMs: 7, TimestampWindowSet: true}},
		{name: "delivery headers",
			topic: map[string]string{"weir.delivery.headers.enable": "true", "weir.delivery.delay.max.ms": "60000"},
			want: ProduceConfig{Compression: "producer", MaxMessageBytes: 1048588,
				TimestampBeforeMaxMs: math.MaxInt64, TimestampAfterMaxMs: 3600000,
				DeliveryHeaders: true, DeliveryDelayMaxMs: 60000}},
		{name: "delivery limit without headers", topic: map[string]string{"weir.delivery.delay.max.ms": "60000"},
			want: ProduceConfig{Compression: "producer", MaxMessageBytes: 1048588,
				TimestampBeforeMaxMs: math.MaxInt64, TimestampAfterMaxMs: 3600000}},
		{name: "log append time", topic: map[string]string{"message.timestamp.type": "LogAppendTime"},
			want: ProduceConfig{Compression: "producer", MaxMessageBytes: 1048588, LogAppendTime: true,
				TimestampBeforeMaxMs: math.MaxInt64, TimestampAfterMaxMs: 3600000}},
	}
	for _, tt := range tests {
		img, err := applyAll(AlterBrokerConfigs{Set: tt.broker},
			CreateTopic{Name: "a", ID: idA, Partitions: 1, Configs: tt.topic})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		tp, _ := img.Topic("a")
		if got := img.ProduceConfig(tp); got != tt.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.name, got, tt.want)
		}
		// The produce path resolves it for every batch.
		if allocs := testing.AllocsPerRun(20, func() { img.ProduceConfig(tp) }); allocs != 0 {
			t.Errorf("%s: %v allocations per ProduceConfig, want 0", tt.name, allocs)
		}
	}
}

// TestControllerFlushMessagesPolicy maps flush.messages and flush.ms onto weir.flush.policy level by
// level and checks that DescribeConfigs shows the policy in effect, with the level it came from.
func TestControllerFlushMessagesPolicy(t *testing.T) {
	tests := []struct {
		name   string
		broker map[string]string
		topic  map[string]string
		want   FlushPolicy
		source ConfigSource
	}{
		{name: "default", want: FlushAlways, source: SourceDefault},
		{name: "flush.messages=1", topic: map[string]string{"flush.messages": "1"}, want: FlushAlways, source: SourceTopic},
		{name: "flush.messages=1 over a broker interval",
			broker: map[string]string{"weir.log.flush.policy": "interval"},
			topic:  map[string]string{"flush.messages": "1"}, want: FlushAlways, source: SourceTopic},
		{name: "flush.messages>1", topic: map[string]string{"flush.messages": "100"}, want: FlushInterval, source: SourceTopic},
		{name: "flush.ms", topic: map[string]string{"flush.ms": "200"}, want: FlushInterval, source: SourceTopic},
		{name: "the policy at the same level wins",
			topic: map[string]string{"flush.messages": "1", "weir.flush.policy": "never"}, want: FlushNever, source: SourceTopic},
		{name: "broker flush messages", broker: map[string]string{"log.flush.interval.messages": "1"},
			want: FlushAlways, source: SourceDynamicBrokerDefault},
		{name: "broker flush.ms under a topic policy",
			broker: map[string]string{"log.flush.interval.ms": "10"},
			topic:  map[string]string{"weir.flush.policy": "always"}, want: FlushAlways, source: SourceTopic},
		{name: "broker flush.ms", broker: map[string]string{"log.flush.interval.ms": "10"},
			want: FlushInterval, source: SourceDynamicBrokerDefault},
	}
	for _, tt := range tests {
		img, err := applyAll(AlterBrokerConfigs{Set: tt.broker},
			CreateTopic{Name: "a", ID: idA, Partitions: 1, Configs: tt.topic})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		tp, _ := img.Topic("a")
		if got := img.LogConfig(tp).FlushPolicy; got != tt.want {
			t.Errorf("%s: LogConfig's policy %s, want %s", tt.name, got, tt.want)
		}
		entries, err := img.DescribeTopicConfigs("a")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Name == ConfigFlushPolicy && (e.Value != string(tt.want) || e.Source != tt.source) {
				t.Errorf("%s: described as %s from %v, want %s from %v", tt.name, e.Value, e.Source, tt.want, tt.source)
			}
		}
	}
}

// TestControllerDeliveryConfig resolves the delivery configs a share-partition's leader acts on, with
// or without the headers on, the broker's own values between the topic's and the cluster's.
func TestControllerDeliveryConfig(t *testing.T) {
	img, err := applyAll(AlterBrokerConfigs{Set: map[string]string{"weir.priority.aging.ms": "500"}},
		AlterPerBrokerConfigs{Broker: 1, Set: map[string]string{"weir.priority.aging.ms": "700"}},
		CreateTopic{Name: "a", ID: idA, Partitions: 1, Configs: map[string]string{"weir.priority.default": "7",
			"weir.delivery.delay.ms": "2000", "weir.delivery.delay.max.ms": "60000"}})
	if err != nil {
		t.Fatal(err)
	}
	tp, _ := img.Topic("a")
	want := DeliveryConfig{DelayMs: 2000, DelayMaxMs: 60000, PriorityDefault: 7, AgingMs: 500}
	if got := img.DeliveryConfigOn(tp, 2); got != want {
		t.Errorf("on broker 2: got %+v, want %+v", got, want)
	}
	want.AgingMs = 700
	if got := img.DeliveryConfigOn(tp, 1); got != want {
		t.Errorf("on broker 1: got %+v, want %+v", got, want)
	}
	if got, want := img.DeliveryConfig(nil), (DeliveryConfig{DelayMaxMs: 7 * 24 * 3600 * 1000, AgingMs: 500}); got != want {
		t.Errorf("broker defaults: got %+v, want %+v", got, want)
	}
}
