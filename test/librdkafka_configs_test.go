package test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// confluentPython is the interpreter .ci/run installs the confluent-kafka package into with pip: the
// first python3 on PATH (Debian's /usr/bin/python3 carries kafka-python instead, see debianPython).
const confluentPython = "python3"

// requireConfluentKafka skips the test (fails it under CI=true) when python3 cannot import
// confluent_kafka, the Python binding whose wheel bundles librdkafka.
func requireConfluentKafka(t *testing.T) {
	t.Helper()
	out, err := exec.Command(confluentPython, "-c", "import confluent_kafka").CombinedOutput()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s cannot import confluent_kafka under CI=true (.ci/run installs it with pip): %v\n%s", confluentPython, err, out)
	}
	t.Skipf("%s cannot import confluent_kafka (pip install confluent-kafka, or run .ci/run): %v", confluentPython, err)
}

// librdkafkaTopicConfigs holds every topic config weir describes with a valid value other than its
// default (create) and another valid value or "" to DELETE it (alter). The test fails when weir
// describes a topic config missing here, so the round trip keeps covering them all.
var librdkafkaTopicConfigs = []struct{ name, create, alter string }{
	{"cleanup.policy", "compact", "compact,delete"},
	{"compression.gzip.level", "6", "1"},
	{"compression.lz4.level", "12", "1"},
	{"compression.type", "lz4", ""},
	{"compression.zstd.level", "-5", "22"},
	{"delete.retention.ms", "1000", "0"},
	{"file.delete.delay.ms", "0", "1000"},
	{"flush.messages", "1", "100"},
	{"flush.ms", "100", "0"},
	{"follower.replication.throttled.replicas", "0:1", "*"},
	{"index.interval.bytes", "1024", "0"},
	{"leader.replication.throttled.replicas", "*", "0:1"},
	{"local.retention.bytes", "1048576", "-1"},
	{"local.retention.ms", "86400000", "-2"},
	{"max.compaction.lag.ms", "60000", "120000"},
	{"max.message.bytes", "2000000", ""},
	{"message.downconversion.enable", "false", "true"},
	{"message.timestamp.after.max.ms", "60000", "0"},
	{"message.timestamp.before.max.ms", "86400000", "0"},
	{"message.timestamp.difference.max.ms", "86400000", "0"},
	{"message.timestamp.type", "LogAppendTime", "CreateTime"},
	{"min.cleanable.dirty.ratio", "0.25", "1"},
	{"min.compaction.lag.ms", "1000", "0"},
	{"min.insync.replicas", "2", "1"},
	{"preallocate", "true", "false"},
	{"remote.log.copy.disable", "true", "false"},
	{"remote.log.delete.on.disable", "true", "false"},
	{"remote.storage.enable", "false", "false"},
	{"retention.bytes", "1048576", "-1"},
	{"retention.ms", "1000", ""},
	{"segment.bytes", "2097152", ""},
	{"segment.index.bytes", "1048576", "4"},
	{"segment.jitter.ms", "60000", "0"},
	{"segment.ms", "60000", "1"},
	{"unclean.leader.election.enable", "true", "false"},
	{"weir.flush.policy", "interval", "never"},
	{"weir.delivery.delay.ms", "2000", "0"},
	{"weir.delivery.delay.max.ms", "60000", "120000"},
	{"weir.delivery.headers.enable", "true", "false"},
	{"errors.deadletterqueue.group.enable", "true", "false"},
	{"weir.priority.aging.ms", "1000", "60000"},
	{"weir.priority.default", "9", "0"},
	{"weir.delay.target.topic", librdkafkaDelayTarget, ""},
}

// librdkafkaDelayTarget is the topic TestLibrdkafkaTopicConfigs creates first for
// weir.delay.target.topic to name.
const librdkafkaDelayTarget = "rdkafka-configs-target"

// TestLibrdkafkaTopicConfigs runs the config admin calls of librdkafka (confluent-kafka's
// AdminClient) against `weir serve`: create_topics with every topic config, describe_configs,
// incremental_alter_configs setting each to another value or deleting it, describe_configs again;
// incremental_alter_configs on the broker resource of this broker (log.segment.bytes), after which a
// deleted topic config shows the broker's value with its source, as one does the cluster-wide value
// kadm set (log.retention.ms); describe_configs of the broker; and bad values refused with
// INVALID_CONFIG naming the config, by create_topics and by incremental_alter_configs.
func TestLibrdkafkaTopicConfigs(t *testing.T) {
	requireConfluentKafka(t)
	ctx := testContext(t, 90*time.Second)
	n := startNode(t, nodeOptions{})

	const topic = "rdkafka-configs"
	if _, err := n.admin(t).CreateTopic(ctx, 1, 1, nil, librdkafkaDelayTarget); err != nil {
		t.Fatalf("create %s: %v", librdkafkaDelayTarget, err)
	}
	plan := map[string]any{"topic": topic, "broker": "1"}
	create := map[string]string{}
	var alter [][3]string
	for _, c := range librdkafkaTopicConfigs {
		create[c.name] = c.create
		if c.alter == "" {
			alter = append(alter, [3]string{"DELETE", c.name, ""})
		} else {
			alter = append(alter, [3]string{"SET", c.name, c.alter})
		}
	}
	plan["create"], plan["alter"] = create, alter
	plan["broker_alter"] = [][3]string{{"1", "log.segment.bytes", "1048576"}}
	// librdkafka refuses a broker resource without a name ("Invalid ConfigResource"), so the
	// cluster-wide value is set with kadm.
	resp, err := n.admin(t).AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.ms", Value: kadm.StringPtr("3600000")}})
	if err != nil || resp[0].Err != nil {
		t.Fatalf("cluster-wide log.retention.ms: %v %+v", err, resp)
	}
	bad := [][2]string{
		{"retention.ms", "-2"},
		{"min.cleanable.dirty.ratio", "1.01"},
		{"compression.type", "brotli"},
		{"preallocate", "1"},
		{"remote.storage.enable", "true"},
		{"log.retention.ms", "1000"},
		{"weir.delay.target.topic", "no-such-topic"},
	}
	plan["bad"] = bad
	stdin, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.CommandContext(ctx, confluentPython, "testdata/confluent_kafka_configs.py", n.kafkaAddr())
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("confluent-kafka configs: %v\nstderr:\n%s\nstdout:\n%s", err, stderr.String(), stdout.String())
	}
	var got struct {
		Created, Altered, Final map[string][2]string
		Broker                  map[string][3]any
		Refused                 [][5]string
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("confluent-kafka configs printed %q: %v\nstderr:\n%s", stdout.String(), err, stderr.String())
	}

	const topicSrc, brokerSrc, defaultBrokerSrc, defaultSrc = "DYNAMIC_TOPIC_CONFIG", "DYNAMIC_BROKER_CONFIG",
		"DYNAMIC_DEFAULT_BROKER_CONFIG", "DEFAULT_CONFIG"
	// What a deleted config falls back to once the broker alters are in, and before them.
	fallback := map[string][2][2]string{
		"compression.type":        {{"producer", defaultSrc}, {"producer", defaultSrc}},
		"max.message.bytes":       {{"1048588", defaultSrc}, {"1048588", defaultSrc}},
		"retention.ms":            {{"3600000", defaultBrokerSrc}, {"3600000", defaultBrokerSrc}},
		"segment.bytes":           {{"1073741824", defaultSrc}, {"1048576", brokerSrc}},
		"weir.delay.target.topic": {{"", defaultSrc}, {"", defaultSrc}},
	}
	for _, c := range librdkafkaTopicConfigs {
		if v := got.Created[c.name]; v != [2]string{c.create, topicSrc} {
			t.Errorf("%s after create_topics: %v, want [%s %s]", c.name, v, c.create, topicSrc)
		}
		wantAltered, wantFinal := [2]string{c.alter, topicSrc}, [2]string{c.alter, topicSrc}
		if c.alter == "" {
			wantAltered, wantFinal = fallback[c.name][0], fallback[c.name][1]
		}
		if v := got.Altered[c.name]; v != wantAltered {
			t.Errorf("%s after incremental_alter_configs: %v, want %v", c.name, v, wantAltered)
		}
		if v := got.Final[c.name]; v != wantFinal {
			t.Errorf("%s after the broker alters: %v, want %v", c.name, v, wantFinal)
		}
	}
	if len(got.Created) != len(librdkafkaTopicConfigs) {
		t.Errorf("weir describes %d topic configs, librdkafkaTopicConfigs has %d: add the new ones to it", len(got.Created), len(librdkafkaTopicConfigs))
	}

	for name, want := range map[string][3]any{
		"node.id":           {"1", "STATIC_BROKER_CONFIG", true},
		"log.segment.bytes": {"1048576", brokerSrc, false},
		"log.retention.ms":  {"3600000", defaultBrokerSrc, false},
		"num.partitions":    {"1", defaultSrc, false},
		"log.dirs":          {n.dataDir, "STATIC_BROKER_CONFIG", true},
	} {
		if got.Broker[name] != want {
			t.Errorf("broker 1 %s: %v, want %v", name, got.Broker[name], want)
		}
	}

	if len(got.Refused) != 2*len(bad) {
		t.Fatalf("refusals: %v, want two for each of %v", got.Refused, bad)
	}
	for _, r := range got.Refused {
		call, name, value, code, msg := r[0], r[1], r[2], r[3], r[4]
		if code != "INVALID_CONFIG" || !strings.Contains(msg, name) {
			t.Errorf("%s with %s=%s: %s %q, want INVALID_CONFIG naming %s", call, name, value, code, msg, name)
		}
	}
}
