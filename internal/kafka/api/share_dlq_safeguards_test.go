package api_test

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// setDeadLetterTopic sets group's errors.deadletterqueue.topic.name to topic (validateOnly: only
// checks it) and returns the resource's error code and message.
func setDeadLetterTopic(t *testing.T, cl *kgo.Client, group, topic string, validateOnly bool) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = validateOnly
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = "errors.deadletterqueue.topic.name", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(topic)
	rr.Configs = append(rr.Configs, c)
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil || len(resp.Resources) != 1 {
		t.Fatalf("alter group configs: %v %+v", err, resp)
	}
	return resp.Resources[0].ErrorCode, deref(resp.Resources[0].ErrorMessage)
}

// topicConfig returns the value of the config name of topic, as kadm describes it.
func topicConfig(t *testing.T, adm *kadm.Client, topic, name string) string {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(testCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe %s: %v %v", topic, err, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == name {
			return c.MaybeValue()
		}
	}
	t.Fatalf("%s does not describe %s", topic, name)
	return ""
}

// setTopicFlag sets errors.deadletterqueue.group.enable on topic with kadm.
func setTopicFlag(t *testing.T, adm *kadm.Client, topic, value string) {
	t.Helper()
	resps, err := adm.AlterTopicConfigs(testCtx(t), []kadm.AlterConfig{{Name: "errors.deadletterqueue.group.enable", Value: &value}}, topic)
	if err == nil {
		_, err = resps.On(topic, nil)
	}
	if err != nil {
		t.Fatalf("set the flag of %s to %s: %v", topic, value, err)
	}
}

// TestShareGroupDeadLetterSafeguards: KIP-1191's two safeguards with franz-go's kadm and raw requests.
// A group's errors.deadletterqueue.topic.name must start with the broker's
// errors.deadletterqueue.topic.name.prefix (dlq.; a cluster-wide config, set to another value, refused
// for one broker, and deleted again) and, when the topic exists,
// name one with errors.deadletterqueue.group.enable=true: anything else is INVALID_CONFIG with a message
// naming the rule, and the group keeps its configs, validate-only or not. Once the topic has the flag
// the group may name it and its rejections are copied there; when the topic loses the flag later, a
// rejection is archived all the same, answered OK and never handed out again, with no dead letter
// written and weir_share_dead_letters_dropped_total{reason="not-enabled"} counting it; with the flag
// back, the next rejection is copied again.
func TestShareGroupDeadLetterSafeguards(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	cl := newClient(t, n)
	const topic, group, dlq = "safeguarded", "sg-safeguards", "dlq.safeguarded"

	const prefixKey = "errors.deadletterqueue.topic.name.prefix"
	describePrefix := func() (string, kmsg.ConfigSource) {
		t.Helper()
		broker, err := adm.DescribeBrokerConfigs(testCtx(t), 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range broker[0].Configs {
			if c.Key == prefixKey {
				return c.MaybeValue(), c.Source
			}
		}
		t.Fatalf("the broker does not describe %s", prefixKey)
		return "", 0
	}
	if v, src := describePrefix(); v != "dlq." || src != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("%s described as %q, %v; want dlq., DEFAULT_CONFIG", prefixKey, v, src)
	}
	// a cluster-wide config (Kafka's is dynamic): set for one broker it is refused, for the cluster it
	// applies at once, and deleted the node's value comes back
	other := "other."
	if resps, err := adm.AlterBrokerConfigs(testCtx(t), []kadm.AlterConfig{{Name: prefixKey, Value: &other}}, 1); err == nil && resps[0].Err == nil {
		t.Fatalf("%s set for one broker, want it cluster-wide only", prefixKey)
	}
	setClusterConfig(t, adm, prefixKey, other)
	if v, src := describePrefix(); v != other || src != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("%s described as %q, %v; want %s, DYNAMIC_DEFAULT_BROKER_CONFIG", prefixKey, v, src, other)
	}
	if code, msg := setDeadLetterTopic(t, cl, group, "dlq.orders", true); code != kerr.InvalidConfig.Code || !strings.Contains(msg, `does not start with "other."`) {
		t.Fatalf("naming dlq.orders under the cluster's prefix %s: %v %q", other, kerr.ErrorForCode(code), msg)
	}
	if resps, err := adm.AlterBrokerConfigs(testCtx(t), []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: prefixKey}}); err != nil || resps[0].Err != nil {
		t.Fatalf("delete %s: %v %v", prefixKey, err, resps)
	}
	if v, src := describePrefix(); v != "dlq." || src != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("%s described as %q, %v after its deletion; want dlq., DEFAULT_CONFIG", prefixKey, v, src)
	}

	createTopic(t, adm, topic, 1, map[string]*string{})
	createTopic(t, adm, dlq, 1, nil)
	setGroupConfigs(t, cl, group, "share.auto.offset.reset", "earliest")
	before := describeGroupConfigs(t, cl, group)
	for _, tc := range []struct{ topic, says string }{
		{"orders.dead", `does not start with "dlq."`},
		{"DLQ.orders", `does not start with "dlq."`},
		{dlq, "errors.deadletterqueue.group.enable"},
	} {
		for _, validateOnly := range []bool{true, false} {
			code, msg := setDeadLetterTopic(t, cl, group, tc.topic, validateOnly)
			if code != kerr.InvalidConfig.Code || !strings.Contains(msg, tc.says) {
				t.Errorf("naming %s (validate only %t): %v %q, want INVALID_CONFIG saying %s", tc.topic, validateOnly, kerr.ErrorForCode(code), msg, tc.says)
			}
		}
	}
	if after := describeGroupConfigs(t, cl, group); after["errors.deadletterqueue.topic.name"] != before["errors.deadletterqueue.topic.name"] {
		t.Fatalf("refused changes changed the group: %+v", after["errors.deadletterqueue.topic.name"])
	}

	setTopicFlag(t, adm, dlq, "true")
	if code, msg := setDeadLetterTopic(t, cl, group, dlq, false); code != 0 {
		t.Fatalf("naming %s with the flag set: %v %s", dlq, kerr.ErrorForCode(code), msg)
	}
	prod := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, v := range []string{"copied", "dropped", "copied-again"} {
		if err := prod.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Partition: 0, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	id := topicID(t, adm, topic)
	raw := newClient(t, n)
	reject := func(epoch int32, offset int64) int32 {
		t.Helper()
		resp := doShareFetch(t, raw, shareFetchReq(group, "a", epoch, id, ackBatch(offset, offset, 3)))
		if code := resp.Topics[0].Partitions[0].AcknowledgeErrorCode; code != 0 {
			t.Fatalf("reject offset %d: %v", offset, kerr.ErrorForCode(code))
		}
		return epoch + 1
	}
	dropped := `weir_share_dead_letters_dropped_total{reason="not-enabled"}`
	epoch, _ := acquireOnce(t, raw, group, "a", 0, id)
	epoch = reject(epoch, 0)
	if got := readDeadLetters(t, n, dlq, 1); string(got[0].Value) != "copied" {
		t.Fatalf("dead letter %q, want copied", got[0].Value)
	}

	setTopicFlag(t, adm, dlq, "false")
	epoch = reject(epoch, 1)
	if again := doShareFetch(t, raw, shareFetchReq(group, "a", epoch, id)); len(again.Topics) > 0 {
		for _, a := range again.Topics[0].Partitions[0].AcquiredRecords {
			if a.FirstOffset <= 1 && a.LastOffset >= 1 {
				t.Fatalf("the record rejected without its dead letter was handed out again: %+v", a)
			}
		}
	}
	epoch++
	if v := metricValue(t, n.HTTPAddr(), dropped); v != 1 {
		t.Fatalf("%s = %v, want 1", dropped, v)
	}

	setTopicFlag(t, adm, dlq, "true")
	reject(epoch, 2)
	got := readDeadLetters(t, n, dlq, 2)
	if string(got[0].Value) != "copied" || string(got[1].Value) != "copied-again" {
		t.Fatalf("dead letters %q and %q, want copied and copied-again", got[0].Value, got[1].Value)
	}
	if v := metricValue(t, n.HTTPAddr(), dropped); v != 1 {
		t.Fatalf("%s = %v after the flag came back, want still 1", dropped, v)
	}
}

// TestShareGroupDeadLetterPrefixConfig: a node started with another prefix (weir serve
// --dlq-topic-name-prefix) describes it as STATIC_BROKER_CONFIG and holds groups to it; with an empty
// prefix any topic name but an internal one is taken; the cluster-wide config, once set, overrides
// either.
func TestShareGroupDeadLetterPrefixConfig(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		ok     []string
		refuse []string
	}{
		{"dead.", []string{"dead.orders"}, []string{"dlq.orders", "orders"}},
		{"", []string{"dlq.orders", "orders"}, []string{"__consumer_offsets"}},
	} {
		cfg := nodeConfig(t.TempDir())
		cfg.DeadLetterTopicPrefix = tc.prefix
		n := startNodeWith(t, cfg)
		cl := newClient(t, n)
		broker, err := newAdmin(t, n).DescribeBrokerConfigs(testCtx(t), cfg.NodeID)
		if err != nil {
			t.Fatal(err)
		}
		described := false
		for _, c := range broker[0].Configs {
			if c.Key == "errors.deadletterqueue.topic.name.prefix" {
				described = c.MaybeValue() == tc.prefix && c.Source == kmsg.ConfigSourceStaticBrokerConfig
			}
		}
		if !described {
			t.Errorf("prefix %q: not described as STATIC_BROKER_CONFIG", tc.prefix)
		}
		for _, name := range tc.ok {
			if code, msg := setDeadLetterTopic(t, cl, "g", name, false); code != 0 {
				t.Errorf("prefix %q: naming %s: %v %s", tc.prefix, name, kerr.ErrorForCode(code), msg)
			}
		}
		for _, name := range tc.refuse {
			if code, _ := setDeadLetterTopic(t, cl, "g", name, false); code != kerr.InvalidConfig.Code {
				t.Errorf("prefix %q: naming %s: %v, want INVALID_CONFIG", tc.prefix, name, kerr.ErrorForCode(code))
			}
		}
		// the cluster-wide value overrides the node's, as Kafka's dynamic default overrides its static one
		setClusterConfig(t, newAdmin(t, n), "errors.deadletterqueue.topic.name.prefix", "cluster.")
		if code, _ := setDeadLetterTopic(t, cl, "g", "cluster.orders", false); code != 0 {
			t.Errorf("prefix %q under the cluster's cluster.: naming cluster.orders: %v", tc.prefix, kerr.ErrorForCode(code))
		}
		if code, _ := setDeadLetterTopic(t, cl, "g", "dead.orders", false); code != kerr.InvalidConfig.Code {
			t.Errorf("prefix %q under the cluster's cluster.: naming dead.orders: %v, want INVALID_CONFIG", tc.prefix, kerr.ErrorForCode(code))
		}
	}
}
