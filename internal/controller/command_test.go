package controller

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestControllerValidateTopicName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"orders", true},
		{"a.b_c-D9", true},
		{"__consumer_offsets", true},
		{strings.Repeat("x", 249), true},
		{strings.Repeat("x", 250), false},
		{"", false},
		{".", false},
		{"..", false},
		{"...", true},
		{"with space", false},
		{"slash/", false},
		{"ümlaut", false},
		{"tab\t", false},
	}
	for _, tt := range tests {
		err := ValidateTopicName(tt.name)
		if tt.ok != (err == nil) {
			t.Errorf("ValidateTopicName(%q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidTopicName) {
			t.Errorf("ValidateTopicName(%q) = %v, not ErrInvalidTopicName", tt.name, err)
		}
	}
	// the message names the character, not its first byte, whatever the name's length in bytes
	if err := ValidateTopicName(strings.Repeat("ü", 200)); err == nil || !strings.Contains(err.Error(), "'ü'") {
		t.Errorf("a name of 200 'ü': %v, want the character named", err)
	}
}

func TestControllerValidateTopicConfigs(t *testing.T) {
	tests := []struct {
		set  map[string]string
		want map[string]string // nil: invalid
	}{
		{map[string]string{}, map[string]string{}},
		{map[string]string{"retention.ms": "-1"}, map[string]string{"retention.ms": "-1"}},
		{map[string]string{"retention.ms": " 1000 "}, map[string]string{"retention.ms": "1000"}},
		{map[string]string{"retention.ms": "-2"}, nil},
		{map[string]string{"retention.ms": "1h"}, nil},
		{map[string]string{"retention.bytes": "-1"}, map[string]string{"retention.bytes": "-1"}},
		{map[string]string{"segment.bytes": "13"}, nil},
		{map[string]string{"segment.bytes": "1048576"}, map[string]string{"segment.bytes": "1048576"}},
		{map[string]string{"segment.bytes": "4294967296"}, nil},
		{map[string]string{"segment.ms": "0"}, nil},
		{map[string]string{"cleanup.policy": "delete, compact"}, map[string]string{"cleanup.policy": "compact,delete"}},
		{map[string]string{"cleanup.policy": "compact"}, map[string]string{"cleanup.policy": "compact"}},
		{map[string]string{"cleanup.policy": "purge"}, nil},
		{map[string]string{"max.message.bytes": "0"}, map[string]string{"max.message.bytes": "0"}},
		{map[string]string{"max.message.bytes": "-1"}, nil},
		{map[string]string{"min.insync.replicas": "0"}, nil},
		{map[string]string{"message.timestamp.type": "LogAppendTime"}, map[string]string{"message.timestamp.type": "LogAppendTime"}},
		{map[string]string{"message.timestamp.type": "logappendtime"}, nil},
		{map[string]string{"delete.retention.ms": "0"}, map[string]string{"delete.retention.ms": "0"}},
		{map[string]string{"weir.flush.policy": "interval", "flush.ms": "50"}, map[string]string{"weir.flush.policy": "interval", "flush.ms": "50"}},
		{map[string]string{"weir.flush.policy": "sometimes"}, nil},
		{map[string]string{"unclean.leader.election.enable": "TRUE"}, map[string]string{"unclean.leader.election.enable": "true"}},
		{map[string]string{"compression.type": "producer"}, map[string]string{"compression.type": "producer"}},
		{map[string]string{"compression.type": "gzip"}, map[string]string{"compression.type": "gzip"}},
		{map[string]string{"compression.type": "brotli"}, nil},
		{map[string]string{"log.retention.ms": "1"}, nil},
		{map[string]string{"no.such.key": "1"}, nil},
	}
	for _, tt := range tests {
		got, err := ValidateTopicConfigs(tt.set)
		if tt.want == nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("ValidateTopicConfigs(%v) = %v, %v; want ErrInvalidConfig", tt.set, got, err)
			}
			continue
		}
		if err != nil || len(got) != len(tt.want) {
			t.Errorf("ValidateTopicConfigs(%v) = %v, %v; want %v", tt.set, got, err, tt.want)
			continue
		}
		for k, v := range tt.want {
			if got[k] != v {
				t.Errorf("ValidateTopicConfigs(%v)[%s] = %q, want %q", tt.set, k, got[k], v)
			}
		}
	}
	if _, err := ValidateBrokerConfigs(map[string]string{"log.retention.ms": "1", "num.partitions": "3"}); err != nil {
		t.Errorf("broker configs: %v", err)
	}
	if _, err := ValidateBrokerConfigs(map[string]string{"retention.ms": "1"}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("topic key as broker config: %v", err)
	}
}

var (
	idA = TopicID{1}
	idB = TopicID{2}
)

// applyAll applies cmds in order from a fresh image that knows broker 1 (at version 0, so that
// versions count cmds) and returns the result or the first error.
func applyAll(cmds ...Command) (*Image, error) {
	img := NewImage("cluster", 1)
	img.Brokers = []Broker{{NodeID: 1, Host: "h", Port: 1, Epoch: 1}}
	for _, c := range cmds {
		next, err := Apply(img, c)
		if err != nil {
			return img, err
		}
		img = next
	}
	return img, nil
}

func TestControllerApply(t *testing.T) {
	create := func(name string, id TopicID, n int32) CreateTopic {
		return CreateTopic{Name: name, ID: id, Partitions: n, CreatedMs: 5}
	}
	tests := []struct {
		name    string
		cmds    []Command
		wantErr error
		check   func(t *testing.T, img *Image)
	}{
		{name: "create", cmds: []Command{create("a", idA, 3)}, check: func(t *testing.T, img *Image) {
			tp, ok := img.TopicByID(idA)
			if !ok || tp.Name != "a" || tp.Partitions != 3 || tp.CreatedMs != 5 || img.Version != 1 {
				t.Fatalf("topic %+v version %d", tp, img.Version)
			}
		}},
		{name: "create twice", cmds: []Command{create("a", idA, 1), create("a", idB, 1)}, wantErr: ErrTopicExists},
		{name: "collision", cmds: []Command{create("a.b", idA, 1), create("a_b", idB, 1)}, wantErr: ErrInvalidTopicName},
		{name: "duplicate id", cmds: []Command{create("a", idA, 1), create("b", idA, 1)}, wantErr: ErrInvalidCommand},
		{name: "zero id", cmds: []Command{create("a", TopicID{}, 1)}, wantErr: ErrInvalidCommand},
		{name: "bad name", cmds: []Command{create("a b", idA, 1)}, wantErr: ErrInvalidTopicName},
		{name: "zero partitions", cmds: []Command{create("a", idA, 0)}, wantErr: ErrInvalidPartitions},
		{name: "too many partitions", cmds: []Command{create("a", idA, MaxPartitions+1)}, wantErr: ErrInvalidPartitions},
		{name: "bad config", cmds: []Command{CreateTopic{Name: "a", ID: idA, Partitions: 1, Configs: map[string]string{"x": "y"}}}, wantErr: ErrInvalidConfig},
		{name: "delete", cmds: []Command{create("a", idA, 1), DeleteTopic{Name: "a"}}, check: func(t *testing.T, img *Image) {
			if _, ok := img.TopicByID(idA); ok || len(img.Topics) != 0 {
				t.Fatal("topic still there")
			}
		}},
		{name: "delete unknown", cmds: []Command{DeleteTopic{Name: "a"}}, wantErr: ErrUnknownTopic},
		{name: "delete internal", cmds: []Command{CreateTopic{Name: "__x", ID: idA, Partitions: 1, Internal: true}, DeleteTopic{Name: "__x"}}, wantErr: ErrInternalTopic},
		{name: "delete internal by weir", cmds: []Command{CreateTopic{Name: "__x", ID: idA, Partitions: 1, Internal: true}, DeleteTopic{Name: "__x", AllowInternal: true}}},
		{name: "grow", cmds: []Command{create("a", idA, 1), CreatePartitions{Name: "a", Total: 4}}, check: func(t *testing.T, img *Image) {
			if img.Topics["a"].Partitions != 4 {
				t.Fatal("not grown")
			}
		}},
		{name: "shrink", cmds: []Command{create("a", idA, 2), CreatePartitions{Name: "a", Total: 2}}, wantErr: ErrInvalidPartitions},
		{name: "grow unknown", cmds: []Command{CreatePartitions{Name: "a", Total: 2}}, wantErr: ErrUnknownTopic},
		{name: "alter", cmds: []Command{
			CreateTopic{Name: "a", ID: idA, Partitions: 1, Configs: map[string]string{"retention.ms": "5", "segment.ms": "9"}},
			AlterTopicConfigs{Name: "a", Set: map[string]string{"retention.bytes": "100"}, Remove: []string{"segment.ms"}},
		}, check: func(t *testing.T, img *Image) {
			c := img.Topics["a"].Configs
			if len(c) != 2 || c["retention.ms"] != "5" || c["retention.bytes"] != "100" {
				t.Fatalf("configs %v", c)
			}
		}},
		{name: "alter unknown key", cmds: []Command{create("a", idA, 1), AlterTopicConfigs{Name: "a", Remove: []string{"nope"}}}, wantErr: ErrInvalidConfig},
		{name: "alter unknown topic", cmds: []Command{AlterTopicConfigs{Name: "a"}}, wantErr: ErrUnknownTopic},
		{name: "broker configs", cmds: []Command{AlterBrokerConfigs{Set: map[string]string{"num.partitions": "3"}}}, check: func(t *testing.T, img *Image) {
			if img.DefaultPartitions() != 3 {
				t.Fatalf("default partitions %d", img.DefaultPartitions())
			}
		}},
		{name: "producer ids", cmds: []Command{AllocateProducerIDs{N: 10}, AllocateProducerIDs{N: 5}}, check: func(t *testing.T, img *Image) {
			if img.NextProducerID != 15 {
				t.Fatalf("next producer id %d", img.NextProducerID)
			}
		}},
		{name: "producer ids zero", cmds: []Command{AllocateProducerIDs{N: 0}}, wantErr: ErrInvalidCommand},
		{name: "register", cmds: []Command{
			RegisterBroker{Broker: Broker{NodeID: 2, Host: "b", Port: 2}},
			RegisterBroker{Broker: Broker{NodeID: 1, Host: "a", Port: 1}},
			RegisterBroker{Broker: Broker{NodeID: 2, Host: "c", Port: 3}},
		}, check: func(t *testing.T, img *Image) {
			if len(img.Brokers) != 2 || img.Brokers[0].NodeID != 1 || img.Brokers[1].Host != "c" {
				t.Fatalf("brokers %+v", img.Brokers)
			}
		}},
		{name: "register bad port", cmds: []Command{RegisterBroker{Broker: Broker{NodeID: 1, Host: "a", Port: 70000}}}, wantErr: ErrInvalidCommand},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img, err := applyAll(tt.cmds...)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if tt.check != nil {
				tt.check(t, img)
			}
		})
	}
}

func TestControllerApplyLeavesInputUntouched(t *testing.T) {
	img, err := applyAll(CreateTopic{Name: "a", ID: idA, Partitions: 1, Configs: map[string]string{"retention.ms": "5"}})
	if err != nil {
		t.Fatal(err)
	}
	before := img.Topics["a"]
	next, err := Apply(img, AlterTopicConfigs{Name: "a", Set: map[string]string{"retention.ms": "7"}})
	if err != nil {
		t.Fatal(err)
	}
	if before.Configs["retention.ms"] != "5" || img.Topics["a"] != before || img.Version != 1 {
		t.Fatal("Apply modified its input")
	}
	if next.Topics["a"].Configs["retention.ms"] != "7" || next.Version != 2 {
		t.Fatalf("next %+v", next.Topics["a"])
	}
	if _, err := Apply(next, CreateTopic{Name: "b", ID: idA, Partitions: 1}); err == nil {
		t.Fatal("reused id accepted")
	}
	if len(next.Topics) != 1 {
		t.Fatal("failed Apply modified its input")
	}
}

func TestControllerLogConfigAndDescribe(t *testing.T) {
	img, err := applyAll(
		AlterBrokerConfigs{Set: map[string]string{"log.retention.ms": "1000", "log.segment.bytes": "2048"}},
		CreateTopic{Name: "a", ID: idA, Partitions: 1, Configs: map[string]string{"retention.ms": "5", "cleanup.policy": "compact,delete"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	lc := img.LogConfig(img.Topics["a"])
	want := LogConfig{
		RetentionMs: 5, RetentionBytes: -1, SegmentBytes: 2048, SegmentMs: 604800000,
		CleanupDelete: true, CleanupCompact: true, MaxMessageBytes: 1048588, MinInsyncReplicas: 1,
		TimestampType: CreateTime, DeleteRetentionMs: 86400000, FlushPolicy: FlushAlways, FlushMs: 1000,
		MaxCompactionLagMs: math.MaxInt64, MinCleanableDirtyRatio: 0.5, FileDeleteDelayMs: 60000,
		IndexIntervalBytes: 4096, SegmentIndexBytes: 10485760,
	}
	if lc != want {
		t.Fatalf("LogConfig\n got %+v\nwant %+v", lc, want)
	}
	entries, err := img.DescribeTopicConfigs("a")
	if err != nil {
		t.Fatal(err)
	}
	bySource := map[string]ConfigSource{}
	for _, e := range entries {
		bySource[e.Name] = e.Source
		if e.Name == "retention.ms" && (e.Value != "5" || len(e.Synonyms) != 3) {
			t.Fatalf("retention.ms entry %+v", e)
		}
	}
	if bySource["retention.ms"] != SourceTopic || bySource["segment.bytes"] != SourceDynamicBrokerDefault || bySource["segment.ms"] != SourceDefault {
		t.Fatalf("sources %v", bySource)
	}
	if len(entries) != len(topicDefs) {
		t.Fatalf("%d entries, want %d", len(entries), len(topicDefs))
	}
	if _, err := img.DescribeTopicConfigs("zz"); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("describe unknown: %v", err)
	}
	var sawRetention bool
	for _, e := range img.DescribeBrokerConfigs() {
		if e.Name == "log.retention.ms" {
			sawRetention = e.Value == "1000" && e.Source == SourceDynamicBrokerDefault
		}
	}
	if !sawRetention {
		t.Fatal("broker log.retention.ms not described as set")
	}
	if !img.AutoCreateTopics() || img.DefaultReplicationFactor() != 1 {
		t.Fatal("broker defaults")
	}
}

func TestControllerCheckReplicationFactor(t *testing.T) {
	img, _ := applyAll(RegisterBroker{Broker: Broker{NodeID: 1, Host: "h", Port: 1}})
	for rf, ok := range map[int16]bool{-1: true, 1: true, 0: false, 2: false, -2: false} {
		if err := img.CheckReplicationFactor(rf); ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidReplication)) {
			t.Errorf("rf %d: %v", rf, err)
		}
	}
}
