package api_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaTopicConfigs holds, for every topic config weir knows, a valid value other than its default,
// another one, and a value Kafka refuses (TestAPIKafkaTopicConfigDefaults checks it names them all).
var kafkaTopicConfigs = []struct {
	name, value, other, bad string
}{
	{"cleanup.policy", "compact", "compact,delete", "zap"},
	{"delete.retention.ms", "1000", "0", "-1"},
	{"flush.ms", "100", "0", "-1"},
	{"max.message.bytes", "2000000", "1000", "-1"},
	{"message.timestamp.type", "LogAppendTime", "CreateTime", "Now"},
	{"min.insync.replicas", "2", "1", "0"},
	{"retention.bytes", "1048576", "-1", "-2"},
	{"retention.ms", "1000", "-1", "-2"},
	{"segment.bytes", "1048576", "14", "13"},
	{"segment.ms", "60000", "1", "0"},
	{"unclean.leader.election.enable", "true", "false", "yes"},
	{"weir.flush.policy", "interval", "never", "sometimes"},
	{"weir.priority.default", "9", "0", "10"},
	{"weir.priority.aging.ms", "1000", "60000", "0"},
	{"weir.delivery.delay.ms", "2000", "0", "-1"},
	{"weir.delivery.delay.max.ms", "60000", "0", "-5"},
	{"weir.delivery.headers.enable", "true", "false", "yes"},
	{"errors.deadletterqueue.group.enable", "true", "false", "yes"},
	{"compression.type", "lz4", "zstd", "brotli"},
	{"compression.gzip.level", "6", "1", "0"},
	{"compression.lz4.level", "12", "1", "18"},
	{"compression.zstd.level", "-5", "22", "23"},
	{"file.delete.delay.ms", "0", "1000", "-1"},
	{"flush.messages", "1", "100", "0"},
	{"follower.replication.throttled.replicas", "0:1,1:2", "*", "0-1"},
	{"index.interval.bytes", "1024", "0", "-1"},
	{"leader.replication.throttled.replicas", "*", "0:1", "all"},
	{"local.retention.bytes", "1048576", "-1", "-3"},
	{"local.retention.ms", "86400000", "-2", "-3"},
	{"max.compaction.lag.ms", "60000", "120000", "0"},
	{"message.downconversion.enable", "false", "true", "maybe"},
	{"message.timestamp.after.max.ms", "60000", "0", "-1"},
	{"message.timestamp.before.max.ms", "86400000", "0", "-1"},
	{"message.timestamp.difference.max.ms", "86400000", "0", "1d"},
	{"min.cleanable.dirty.ratio", "0.25", "1", "1.01"},
	{"min.compaction.lag.ms", "1000", "0", "-1"},
	{"preallocate", "true", "false", "1"},
	{"remote.log.copy.disable", "true", "false", "no"},
	{"remote.log.delete.on.disable", "true", "false", "no"},
	{"remote.storage.enable", "false", "false", "true"},
	{"segment.index.bytes", "1048576", "4", "3"},
	{"segment.jitter.ms", "60000", "0", "-1"},
	// last: its values name topics the rows above created
	{"weir.delay.target.topic", "cfg.cleanup.policy", "cfg.compression.type", "no-such-topic"},
}

// TestAPIKafkaTopicConfigs creates a topic with each Kafka topic config through kadm, reads it back
// with DescribeConfigs, changes it with IncrementalAlterConfigs and AlterConfigs, and checks that a
// bad value and a config weir does not know are refused with INVALID_CONFIG.
func TestAPIKafkaTopicConfigs(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	ctx := testCtx(t)
	describe := func(topic string) map[string]kadm.Config {
		t.Helper()
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			t.Fatalf("describe %s: %v", topic, err)
		}
		rc, err := rcs.On(topic, nil)
		if err != nil || rc.Err != nil {
			t.Fatalf("describe %s: %v %v", topic, err, rc.Err)
		}
		out := map[string]kadm.Config{}
		for _, c := range rc.Configs {
			out[c.Key] = c
		}
		return out
	}
	for _, tc := range kafkaTopicConfigs {
		topic := "cfg." + tc.name
		createTopic(t, adm, topic, 1, map[string]*string{tc.name: kadm.StringPtr(tc.value)})
		c := describe(topic)[tc.name]
		if c.MaybeValue() != tc.value || c.Source != kmsg.ConfigSourceDynamicTopicConfig ||
			len(c.Synonyms) == 0 || c.Synonyms[0].Key != tc.name || c.Synonyms[0].Source != kmsg.ConfigSourceDynamicTopicConfig {
			t.Errorf("%s after create: %q from %v, synonyms %+v", tc.name, c.MaybeValue(), c.Source, c.Synonyms)
		}

		alter, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: tc.name, Value: kadm.StringPtr(tc.other)}}, topic)
		if err != nil || alter[0].Err != nil {
			t.Fatalf("%s: incremental alter: %v %v", tc.name, err, alter[0].Err)
		}
		if c := describe(topic)[tc.name]; c.MaybeValue() != tc.other {
			t.Errorf("%s after incremental alter: %q, want %q", tc.name, c.MaybeValue(), tc.other)
		}
		bad, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: tc.name, Value: kadm.StringPtr(tc.bad)}}, topic)
		if err != nil || !errors.Is(bad[0].Err, kerr.InvalidConfig) || !strings.Contains(bad[0].ErrMessage, tc.name) {
			t.Errorf("%s=%s by incremental alter: %v %v %q, want INVALID_CONFIG naming it", tc.name, tc.bad, err, bad[0].Err, bad[0].ErrMessage)
		}
		state, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: tc.name, Value: kadm.StringPtr(tc.value)}}, topic)
		if err != nil || state[0].Err != nil {
			t.Fatalf("%s: alter: %v %v", tc.name, err, state[0].Err)
		}
		if c := describe(topic)[tc.name]; c.MaybeValue() != tc.value {
			t.Errorf("%s after alter: %q, want %q", tc.name, c.MaybeValue(), tc.value)
		}
		badState, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: tc.name, Value: kadm.StringPtr(tc.bad)}}, topic)
		if err != nil || !errors.Is(badState[0].Err, kerr.InvalidConfig) {
			t.Errorf("%s=%s by alter: %v %v, want INVALID_CONFIG", tc.name, tc.bad, err, badState[0].Err)
		}

		// CreateTopic returns the topic's error as its own.
		refused, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{tc.name: kadm.StringPtr(tc.bad)}, "bad."+tc.name)
		if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(refused.ErrMessage, tc.name) {
			t.Errorf("create with %s=%s: %v %v %q, want INVALID_CONFIG naming it", tc.name, tc.bad, err, refused.Err, refused.ErrMessage)
		}
	}
	if topics, err := adm.ListTopics(ctx); err != nil || len(topics.Names()) != len(kafkaTopicConfigs) {
		t.Fatalf("topics after the refused creates: %v %v", topics.Names(), err)
	}
	for _, name := range []string{"confluent.placement.constraints", "log.retention.ms", "retention.hours"} {
		resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{name: kadm.StringPtr("1")}, "unknown")
		if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(resp.ErrMessage, "unknown topic config") {
			t.Errorf("create with %s: %v %v %q, want INVALID_CONFIG unknown topic config", name, err, resp.Err, resp.ErrMessage)
		}
	}
}

// TestAPIKafkaTopicConfigDefaults describes a topic created without configs: each Kafka config is
// listed at Kafka's default, with its type and its broker synonym; a broker-wide value shows through.
func TestAPIKafkaTopicConfigDefaults(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	ctx := testCtx(t)
	set, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.cleaner.min.cleanable.ratio", Value: kadm.StringPtr("0.75")}})
	if err != nil || set[0].Err != nil {
		t.Fatalf("alter broker: %v %v", err, set[0].Err)
	}
	createTopic(t, adm, "plain", 1, nil)

	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "plain"
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, newClient(t, n))
	if err != nil || len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("describe: %v %+v", err, resp)
	}
	got := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range resp.Resources[0].Configs {
		got[c.Name] = c
	}
	want := []struct {
		name, value string
		source      kmsg.ConfigSource
		typ         kmsg.ConfigType
		synonyms    []string
	}{
		{"min.cleanable.dirty.ratio", "0.75", kmsg.ConfigSourceDynamicDefaultBrokerConfig, kmsg.ConfigTypeDouble,
			[]string{"log.cleaner.min.cleanable.ratio=0.75", "log.cleaner.min.cleanable.ratio=0.5"}},
		{"message.timestamp.after.max.ms", "3600000", kmsg.ConfigSourceDefaultConfig, kmsg.ConfigTypeLong,
			[]string{"log.message.timestamp.after.max.ms=3600000"}},
		{"segment.index.bytes", "10485760", kmsg.ConfigSourceDefaultConfig, kmsg.ConfigTypeInt,
			[]string{"log.index.size.max.bytes=10485760"}},
		{"compression.gzip.level", "-1", kmsg.ConfigSourceDefaultConfig, kmsg.ConfigTypeInt,
			[]string{"compression.gzip.level=-1"}},
		{"preallocate", "false", kmsg.ConfigSourceDefaultConfig, kmsg.ConfigTypeBoolean,
			[]string{"log.preallocate=false"}},
		{"leader.replication.throttled.replicas", "", kmsg.ConfigSourceDefaultConfig, kmsg.ConfigTypeList, nil},
		{"remote.storage.enable", "false", kmsg.ConfigSourceDefaultConfig, kmsg.ConfigTypeBoolean, nil},
		{"flush.messages", "9223372036854775807", kmsg.ConfigSourceDefaultConfig, kmsg.ConfigTypeLong,
			[]string{"log.flush.interval.messages=9223372036854775807"}},
	}
	for _, w := range want {
		c, ok := got[w.name]
		if !ok {
			t.Errorf("%s not described", w.name)
			continue
		}
		var syn []string
		for _, s := range c.ConfigSynonyms {
			syn = append(syn, s.Name+"="+*s.Value)
		}
		if *c.Value != w.value || c.Source != w.source || c.ConfigType != w.typ || strings.Join(syn, " ") != strings.Join(w.synonyms, " ") {
			t.Errorf("%s: %q from %v, type %v, synonyms %v; want %q from %v, type %v, synonyms %v",
				w.name, *c.Value, c.Source, c.ConfigType, syn, w.value, w.source, w.typ, w.synonyms)
		}
	}
	for _, tc := range kafkaTopicConfigs {
		if _, ok := got[tc.name]; !ok {
			t.Errorf("%s not described", tc.name)
		}
	}
	if len(got) != len(kafkaTopicConfigs) {
		t.Errorf("%d topic configs described, kafkaTopicConfigs has %d: add the new ones to it", len(got), len(kafkaTopicConfigs))
	}
}

// TestAPIIncrementalAlterConfigsListsAndRules: APPEND and SUBTRACT edit a list config item by item
// from its current value (the default, when the topic sets none), are refused on a config that is not
// a list, and a change that puts min.compaction.lag.ms above max.compaction.lag.ms is refused, at
// creation too, with nothing changed.
func TestAPIIncrementalAlterConfigsListsAndRules(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	ctx := testCtx(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "lists"); err != nil {
		t.Fatal(err)
	}
	value := func(name string) string {
		t.Helper()
		rcs, err := adm.DescribeTopicConfigs(ctx, "lists")
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On("lists", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range rc.Configs {
			if c.Key == name {
				return c.MaybeValue()
			}
		}
		t.Fatalf("%s not described", name)
		return ""
	}
	alter := func(op kadm.IncrementalOp, name, v string) (string, error) {
		t.Helper()
		resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: name, Value: kadm.StringPtr(v)}}, "lists")
		if err != nil {
			t.Fatal(err)
		}
		return resp[0].ErrMessage, resp[0].Err
	}
	steps := []struct {
		op         kadm.IncrementalOp
		name, v    string
		want       string
		wantErrMsg string
	}{
		{kadm.AppendConfig, "cleanup.policy", "compact", "compact,delete", ""},
		{kadm.AppendConfig, "cleanup.policy", "compact", "compact,delete", ""},
		{kadm.SubtractConfig, "cleanup.policy", "delete", "compact", ""},
		{kadm.AppendConfig, "leader.replication.throttled.replicas", "0:1,0:2", "0:1,0:2", ""},
		{kadm.SubtractConfig, "leader.replication.throttled.replicas", "0:1", "0:2", ""},
		{kadm.AppendConfig, "retention.ms", "5", "", "not a list config"},
		{kadm.SetConfig, "max.compaction.lag.ms", "60000", "60000", ""},
		{kadm.SetConfig, "min.compaction.lag.ms", "120000", "", "is above max.compaction.lag.ms"},
	}
	for _, s := range steps {
		msg, err := alter(s.op, s.name, s.v)
		if s.wantErrMsg != "" {
			if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(msg, s.wantErrMsg) {
				t.Fatalf("%v %s=%s: %v %q, want INVALID_CONFIG saying %q", s.op, s.name, s.v, err, msg, s.wantErrMsg)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v %s=%s: %v", s.op, s.name, s.v, err)
		}
		if got := value(s.name); got != s.want {
			t.Fatalf("after %v %s=%s: %q, want %q", s.op, s.name, s.v, got, s.want)
		}
	}
	if got := value("min.compaction.lag.ms"); got != "0" {
		t.Fatalf("refused change left min.compaction.lag.ms at %q", got)
	}
	resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"min.compaction.lag.ms": kadm.StringPtr("2000"), "max.compaction.lag.ms": kadm.StringPtr("1000")}, "lagged")
	if err == nil {
		err = resp.Err
	}
	if !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("create with min.compaction.lag.ms above max: %v, want INVALID_CONFIG", err)
	}
}
