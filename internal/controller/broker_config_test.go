package controller

import (
	"errors"
	"reflect"
	"testing"
)

// TestControllerPerBrokerConfigs applies per-broker configs: they resolve before the cluster-wide
// ones for that broker only (LogConfigOn, ProduceConfigOn, DescribeTopicConfigsOn,
// DescribeBrokerConfigsOf), the controller's own resolution (LogConfig) ignores them, read-only and
// cluster-decided keys are refused, and the command survives the log encoding.
func TestControllerPerBrokerConfigs(t *testing.T) {
	img, err := applyAll(
		AlterBrokerConfigs{Set: map[string]string{"log.segment.bytes": "4096", "log.retention.ms": "1000"}},
		AlterPerBrokerConfigs{Broker: 1, Set: map[string]string{"log.segment.bytes": "2048", "log.cleaner.min.cleanable.ratio": "0.1"}},
		CreateTopic{Name: "a", ID: idA, Partitions: 1, Configs: map[string]string{"retention.ms": "5"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	tp := img.Topics["a"]
	if lc := img.LogConfigOn(tp, 1); lc.SegmentBytes != 2048 || lc.MinCleanableDirtyRatio != 0.1 || lc.RetentionMs != 5 {
		t.Fatalf("LogConfigOn(1): %+v", lc)
	}
	if lc := img.LogConfigOn(tp, 2); lc.SegmentBytes != 4096 || lc.MinCleanableDirtyRatio != 0.5 {
		t.Fatalf("LogConfigOn(2): %+v", lc)
	}
	if lc := img.LogConfig(tp); lc.SegmentBytes != 4096 {
		t.Fatalf("LogConfig: %+v", lc)
	}
	produce, err := Apply(img, AlterPerBrokerConfigs{Broker: 1, Set: map[string]string{"compression.type": "zstd", "log.message.timestamp.after.max.ms": "60000"}})
	if err != nil {
		t.Fatal(err)
	}
	if pc := produce.ProduceConfigOn(tp, 1); pc.Compression != "zstd" || pc.CompressionLevel != 3 || pc.TimestampAfterMaxMs != 60000 || !pc.TimestampWindowSet {
		t.Fatalf("ProduceConfigOn(1): %+v", pc)
	}
	if pc := produce.ProduceConfigOn(tp, 2); pc != produce.ProduceConfig(tp) || pc.Compression != "producer" || pc.TimestampWindowSet {
		t.Fatalf("ProduceConfigOn(2): %+v", pc)
	}
	entries, err := img.DescribeTopicConfigsOn("a", 1)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]ConfigEntry{}
	for _, e := range entries {
		byName[e.Name] = e
	}
	seg := byName["segment.bytes"]
	wantSyn := []ConfigSynonym{
		{"log.segment.bytes", "2048", SourceDynamicBroker},
		{"log.segment.bytes", "4096", SourceDynamicBrokerDefault},
		{"log.segment.bytes", "1073741824", SourceDefault},
	}
	if seg.Value != "2048" || seg.Source != SourceDynamicBroker || !reflect.DeepEqual(seg.Synonyms, wantSyn) {
		t.Fatalf("segment.bytes on broker 1: %+v", seg)
	}
	ret := byName["retention.ms"]
	if ret.Value != "5" || ret.Source != SourceTopic || len(ret.Synonyms) != 3 || ret.Synonyms[0].Source != SourceTopic {
		t.Fatalf("retention.ms on broker 1: %+v", ret)
	}
	for _, e := range img.DescribeBrokerConfigsOf(1, map[string]string{BrokerConfigLogDirs: "/d"}) {
		switch e.Name {
		case "log.segment.bytes":
			if e.Value != "2048" || e.Source != SourceDynamicBroker || len(e.Synonyms) != 3 {
				t.Fatalf("log.segment.bytes: %+v", e)
			}
		case BrokerConfigLogDirs:
			if e.Value != "/d" || e.Source != SourceStaticBroker || !e.ReadOnly {
				t.Fatalf("log.dirs: %+v", e)
			}
		}
	}
	for _, c := range []AlterPerBrokerConfigs{
		{Broker: 1, Set: map[string]string{BrokerConfigLogDirs: "/x"}},
		{Broker: 1, Set: map[string]string{BrokerConfigNumPartitions: "3"}},
		{Broker: 1, Remove: []string{ConfigMinInsyncReplicas}},
	} {
		if _, err := Apply(img, c); !errors.Is(err, ErrReadOnlyConfig) {
			t.Errorf("%+v: %v, want ErrReadOnlyConfig", c, err)
		}
	}
	if _, err := Apply(img, AlterPerBrokerConfigs{Broker: 9, Set: map[string]string{"log.segment.bytes": "2048"}}); !errors.Is(err, ErrUnknownBroker) {
		t.Fatalf("unknown broker: %v", err)
	}
	if _, err := Apply(img, AlterPerBrokerConfigs{Broker: 1, Set: map[string]string{"log.segment.bytes": "1"}}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("bad value: %v", err)
	}
	cleared, err := Apply(img, AlterPerBrokerConfigs{Broker: 1, Remove: []string{"log.segment.bytes", "log.cleaner.min.cleanable.ratio"}})
	if err != nil || len(cleared.PerBrokerConfigs) != 0 || len(img.PerBrokerConfigs[1]) != 2 {
		t.Fatalf("clearing: %v %+v (the old image: %+v)", err, cleared.PerBrokerConfigs, img.PerBrokerConfigs)
	}
	data, err := encodeImage(img)
	if err != nil {
		t.Fatal(err)
	}
	read, err := decodeMetadata(data)
	if err != nil || !reflect.DeepEqual(read.PerBrokerConfigs, img.PerBrokerConfigs) {
		t.Fatalf("image read back: %v %+v", err, read)
	}
	cmd := AlterPerBrokerConfigs{Broker: 1, Set: map[string]string{"log.segment.bytes": "2048"}, Remove: []string{"log.retention.ms"}}
	data, err = EncodeCommand(cmd)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeCommand(data)
	if err != nil || !reflect.DeepEqual(back, Command(cmd)) {
		t.Fatalf("decoded %+v, %v; want %+v", back, err, cmd)
	}
}
