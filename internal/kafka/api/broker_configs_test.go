package api_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describedConfig is one config as DescribeConfigs answered it, flattened for comparison.
type describedConfig struct {
	value    string
	source   kmsg.ConfigSource
	readOnly bool
	synonyms string // "name=value/SOURCE ..." most specific first
}

// describeRaw describes one resource with synonyms, as kafka-configs --describe --all does.
func describeRaw(t *testing.T, cl *kgo.Client, typ kmsg.ConfigResourceType, name string) (map[string]describedConfig, error) {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = typ, name
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Resources) != 1 {
		t.Fatalf("describe %v %q: %d resources", typ, name, len(resp.Resources))
	}
	r := resp.Resources[0]
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		msg := ""
		if r.ErrorMessage != nil {
			msg = *r.ErrorMessage
		}
		return nil, fmt.Errorf("%w: %s", err, msg)
	}
	out := map[string]describedConfig{}
	for _, c := range r.Configs {
		var syn []string
		for _, s := range c.ConfigSynonyms {
			syn = append(syn, s.Name+"="+*s.Value+"/"+s.Source.String())
		}
		out[c.Name] = describedConfig{*c.Value, c.Source, c.ReadOnly, strings.Join(syn, " ")}
	}
	return out, nil
}

// TestAPIBrokerConfigs walks the broker config resource as kafka-configs and kadm use it: a broker
// described by its id lists every broker config with its source and synonyms, its command-line ones
// read-only; a cluster-wide value and a value for this broker stack as Kafka's levels do, a topic's
// broker-level synonym follows both; read-only and cluster-decided configs refuse changes with
// INVALID_REQUEST; the empty name lists the cluster-wide values set; BROKER_LOGGER is refused cleanly.
func TestAPIBrokerConfigs(t *testing.T) {
	cfg := nodeConfig(t.TempDir())
	cfg.ReplicaLagMax = 12 * time.Second
	cfg.Rack = "rack-a"
	n := startNodeWith(t, cfg)
	adm := newAdmin(t, n)
	ctx := testCtx(t)
	const id = int32(1)
	cl := newClient(t, n)
	describe := func(typ kmsg.ConfigResourceType, name string) map[string]describedConfig {
		t.Helper()
		got, err := describeRaw(t, cl, typ, name)
		if err != nil {
			t.Fatalf("describe %v %q: %v", typ, name, err)
		}
		return got
	}
	broker := func() map[string]describedConfig { return describe(kmsg.ConfigResourceTypeBroker, "1") }
	topic := func() describedConfig { return describe(kmsg.ConfigResourceTypeTopic, "t")["retention.ms"] }
	alter := func(broker []int32, ac ...kadm.AlterConfig) error {
		t.Helper()
		resp, err := adm.AlterBrokerConfigs(ctx, ac, broker...)
		if err != nil {
			t.Fatal(err)
		}
		return resp[0].Err
	}
	set := func(k, v string) kadm.AlterConfig {
		return kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(v)}
	}
	createTopic(t, adm, "t", 1, nil)

	b := broker()
	for name, want := range map[string]describedConfig{
		"log.retention.ms":             {"604800000", kmsg.ConfigSourceDefaultConfig, false, "log.retention.ms=604800000/DEFAULT_CONFIG"},
		"num.partitions":               {"1", kmsg.ConfigSourceDefaultConfig, false, "num.partitions=1/DEFAULT_CONFIG"},
		"node.id":                      {"1", kmsg.ConfigSourceStaticBrokerConfig, true, "node.id=1/STATIC_BROKER_CONFIG node.id=-1/DEFAULT_CONFIG"},
		"replica.lag.time.max.ms":      {"12000", kmsg.ConfigSourceStaticBrokerConfig, true, "replica.lag.time.max.ms=12000/STATIC_BROKER_CONFIG replica.lag.time.max.ms=30000/DEFAULT_CONFIG"},
		"broker.rack":                  {"rack-a", kmsg.ConfigSourceStaticBrokerConfig, true, "broker.rack=rack-a/STATIC_BROKER_CONFIG broker.rack=/DEFAULT_CONFIG"},
		"offsets.topic.num.partitions": {"50", kmsg.ConfigSourceDefaultConfig, true, "offsets.topic.num.partitions=50/DEFAULT_CONFIG"},
		"log.dirs":                     {cfg.DataDir, kmsg.ConfigSourceStaticBrokerConfig, true, "log.dirs=" + cfg.DataDir + "/STATIC_BROKER_CONFIG log.dirs=/DEFAULT_CONFIG"},
	} {
		if b[name] != want {
			t.Errorf("%s: %+v, want %+v", name, b[name], want)
		}
	}

	// The cluster-wide value, then this broker's own on top of it.
	if err := alter(nil, set("log.retention.ms", "1000")); err != nil {
		t.Fatal(err)
	}
	if err := alter([]int32{id}, set("log.retention.ms", "2000")); err != nil {
		t.Fatal(err)
	}
	wantBroker := describedConfig{"2000", kmsg.ConfigSourceDynamicBrokerConfig, false,
		"log.retention.ms=2000/DYNAMIC_BROKER_CONFIG log.retention.ms=1000/DYNAMIC_DEFAULT_BROKER_CONFIG log.retention.ms=604800000/DEFAULT_CONFIG"}
	if got := broker()["log.retention.ms"]; got != wantBroker {
		t.Fatalf("log.retention.ms on the broker: %+v, want %+v", got, wantBroker)
	}
	wantTopic := describedConfig{"2000", kmsg.ConfigSourceDynamicBrokerConfig, false,
		"log.retention.ms=2000/DYNAMIC_BROKER_CONFIG log.retention.ms=1000/DYNAMIC_DEFAULT_BROKER_CONFIG log.retention.ms=604800000/DEFAULT_CONFIG"}
	if got := topic(); got != wantTopic {
		t.Fatalf("retention.ms of the topic: %+v, want %+v", got, wantTopic)
	}
	// The default resource lists only the cluster-wide values set.
	if got := describe(kmsg.ConfigResourceTypeBroker, ""); len(got) != 1 || got["log.retention.ms"].value != "1000" ||
		got["log.retention.ms"].source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("the default broker resource: %+v", got)
	}
	// kadm's view of it agrees.
	if rcs, err := adm.DescribeBrokerConfigs(ctx); err != nil || len(rcs) != 1 || len(rcs[0].Configs) != 1 {
		t.Fatalf("kadm describe of the default broker resource: %v %+v", err, rcs)
	}

	// Without this broker's value the topic follows the cluster-wide one, as it changes.
	if err := alter([]int32{id}, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "log.retention.ms"}); err != nil {
		t.Fatal(err)
	}
	if err := alter(nil, set("log.retention.ms", "3000")); err != nil {
		t.Fatal(err)
	}
	wantTopic = describedConfig{"3000", kmsg.ConfigSourceDynamicDefaultBrokerConfig, false,
		"log.retention.ms=3000/DYNAMIC_DEFAULT_BROKER_CONFIG log.retention.ms=604800000/DEFAULT_CONFIG"}
	if got := topic(); got != wantTopic {
		t.Fatalf("retention.ms of the topic after the broker default changed: %+v, want %+v", got, wantTopic)
	}

	// AlterConfigs replaces this broker's values.
	state, err := adm.AlterBrokerConfigsState(ctx, []kadm.AlterConfig{{Name: "log.segment.bytes", Value: kadm.StringPtr("1048576")}}, id)
	if err != nil || state[0].Err != nil {
		t.Fatalf("alter broker state: %v %+v", err, state)
	}
	if got := broker()["log.segment.bytes"]; got.value != "1048576" || got.source != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Fatalf("log.segment.bytes after AlterConfigs: %+v", got)
	}

	for _, tc := range []struct {
		broker []int32
		ac     kadm.AlterConfig
		msg    string
	}{
		{[]int32{id}, set("node.id", "2"), "read-only"},
		{nil, set("log.dirs", "/tmp"), "read-only"},
		{[]int32{id}, set("replica.lag.time.max.ms", "1000"), "read-only"},
		{[]int32{id}, set("num.partitions", "3"), "cluster-wide only"},
		{[]int32{id}, set("unclean.leader.election.enable", "true"), "cluster-wide only"},
	} {
		resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{tc.ac}, tc.broker...)
		if err != nil || !errors.Is(resp[0].Err, kerr.InvalidRequest) || !strings.Contains(resp[0].ErrMessage, tc.msg) {
			t.Errorf("set %s on %v: %v %v %q, want INVALID_REQUEST saying %q", tc.ac.Name, tc.broker, err, resp[0].Err, resp[0].ErrMessage, tc.msg)
		}
	}
	if err := alter(nil, set("num.partitions", "3")); err != nil {
		t.Fatalf("num.partitions cluster-wide: %v", err)
	}
	if err := alter([]int32{id}, set("log.retention.ms", "-5")); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("log.retention.ms=-5 for the broker: %v, want INVALID_CONFIG", err)
	}
	ia := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ir := kmsg.NewIncrementalAlterConfigsRequestResource()
	ir.ResourceType, ir.ResourceName = kmsg.ConfigResourceTypeBroker, "7"
	ic := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	ic.Name, ic.Value = "log.retention.ms", kadm.StringPtr("5")
	ir.Configs = append(ir.Configs, ic)
	ia.Resources = append(ia.Resources, ir)
	raw, err := cl.Broker(int(id)).Request(ctx, ia) // sent as is: the client would route it to broker 7
	if err != nil || raw.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("a broker that does not exist: %v %+v, want INVALID_REQUEST", err, raw)
	}

	if _, err := describeRaw(t, cl, kmsg.ConfigResourceTypeBrokerLogger, "1"); !errors.Is(err, kerr.InvalidRequest) ||
		!strings.Contains(err.Error(), "BROKER_LOGGER") {
		t.Fatalf("describe BROKER_LOGGER: %v, want INVALID_REQUEST naming it", err)
	}
}
