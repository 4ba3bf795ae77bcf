package test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestPythonTopicConfigs creates a topic with a handful of Kafka topic configs through kafka-python's
// KafkaAdminClient against `weir serve`, describes them, replaces them with AlterConfigs and describes
// them again: the second client stack of the topic config round trip (kadm's is
// TestAPIKafkaTopicConfigs, over every config).
func TestPythonTopicConfigs(t *testing.T) {
	requireKafkaPython(t)
	ctx := testContext(t, 90*time.Second)
	n := startNode(t, nodeOptions{})
	configs := []struct{ name, value, other string }{
		{"cleanup.policy", "compact", "compact,delete"},
		{"min.compaction.lag.ms", "1000", "2000"},
		{"max.compaction.lag.ms", "600000", "700000"},
		{"min.cleanable.dirty.ratio", "0.25", "0.75"},
		{"segment.jitter.ms", "5000", "0"},
		{"file.delete.delay.ms", "0", "30000"},
		{"index.interval.bytes", "1024", "8192"},
		{"segment.index.bytes", "1048576", "2097152"},
		{"preallocate", "true", "false"},
		{"message.downconversion.enable", "false", "true"},
	}
	args := []string{"testdata/kafka_python_configs.py", n.kafkaAddr(), "py-configs"}
	var want strings.Builder
	for _, phase := range []string{"before", "after"} {
		for _, c := range configs {
			v := c.value
			if phase == "after" {
				v = c.other
			}
			want.WriteString(phase + " " + c.name + "=" + v + "\n")
		}
	}
	want.WriteString("done\n")
	for _, c := range configs {
		args = append(args, c.name+"="+c.value+":"+c.other)
	}
	cmd := exec.CommandContext(ctx, debianPython, args...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kafka-python configs: %v\nstderr:\n%s\nstdout:\n%s", err, stderr.String(), stdout.String())
	}
	if got := stdout.String(); got != want.String() {
		t.Fatalf("kafka-python described:\n%s\nwant:\n%s", got, want.String())
	}
}

// TestJavaDescribeConfigs runs weir.e2e.Configs, the Java AdminClient's describeConfigs on a topic it
// created with storage and compaction configs and on the broker, before and after
// incrementalAlterConfigs changed a topic config, the cluster-wide log.retention.ms and this broker's
// log.segment.bytes: values, sources and read-only flags as Kafka reports them.
func TestJavaDescribeConfigs(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	javaClasspath(t)
	n := startNode(t, nodeOptions{})
	out := runJava(ctx, t, "Configs", n.kafkaAddr(), "java-configs", "1")
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 5 {
			got[f[0]+" "+f[1]+" "+f[2]] = f[3] + " " + f[4]
		}
	}
	if !strings.HasSuffix(out, "done\n") {
		t.Fatalf("Configs did not finish:\n%s", out)
	}
	for key, want := range map[string]string{
		"before topic min.compaction.lag.ms=1000":          "DYNAMIC_TOPIC_CONFIG writable",
		"before topic segment.jitter.ms=5000":              "DYNAMIC_TOPIC_CONFIG writable",
		"before topic preallocate=true":                    "DYNAMIC_TOPIC_CONFIG writable",
		"before topic min.cleanable.dirty.ratio=0.5":       "DEFAULT_CONFIG writable",
		"before topic retention.ms=604800000":              "DEFAULT_CONFIG writable",
		"after topic min.cleanable.dirty.ratio=0.2":        "DYNAMIC_TOPIC_CONFIG writable",
		"after topic retention.ms=3600000":                 "DYNAMIC_DEFAULT_BROKER_CONFIG writable",
		"after topic segment.bytes=1048576":                "DYNAMIC_BROKER_CONFIG writable",
		"before broker log.retention.ms=604800000":         "DEFAULT_CONFIG writable",
		"before broker node.id=1":                          "STATIC_BROKER_CONFIG readonly",
		"before broker offsets.topic.num.partitions=50":    "DEFAULT_CONFIG readonly",
		"after broker log.retention.ms=3600000":            "DYNAMIC_DEFAULT_BROKER_CONFIG writable",
		"after broker log.segment.bytes=1048576":           "DYNAMIC_BROKER_CONFIG writable",
		"after broker log.cleaner.min.cleanable.ratio=0.5": "DEFAULT_CONFIG writable",
	} {
		if got[key] != want {
			t.Errorf("%s: %q, want %q", key, got[key], want)
		}
	}
	if t.Failed() {
		t.Logf("Configs printed:\n%s", out)
	}
}

// TestBrokerLogConfigsAct shows a broker's own log configs and the cluster-wide ones acting on its
// logs and its produce path, set with kadm's IncrementalAlterConfigs on the broker resources "1" and
// "" of a `weir serve`: segments roll at the cluster-wide log.segment.bytes while the broker has no
// value of its own, at the broker's own value once it has one, and at the cluster-wide one again when
// it is deleted; a record two days old is refused with INVALID_TIMESTAMP under a cluster-wide
// log.message.timestamp.before.max.ms of an hour and taken once the broker's own value allows a week.
func TestBrokerLogConfigsAct(t *testing.T) {
	ctx := testContext(t, 90*time.Second)
	n := startNode(t, nodeOptions{})
	adm := n.admin(t)
	cl := n.client(t, kgo.ProducerBatchCompression(kgo.NoCompression())) // segment sizes follow the bytes produced
	const topic = "broker-configs"
	n.createTopic(ctx, t, topic, 1, nil)
	alter := func(op kadm.IncrementalOp, name, value string, brokers ...int32) {
		t.Helper()
		ac := kadm.AlterConfig{Op: op, Name: name}
		if op == kadm.SetConfig {
			ac.Value = kadm.StringPtr(value)
		}
		resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{ac}, brokers...)
		if err != nil || resp[0].Err != nil {
			t.Fatalf("%v %s=%s on brokers %v: %v %+v", op, name, value, brokers, err, resp)
		}
	}
	value := bytes.Repeat([]byte("v"), 1000)
	produce := func(count int) {
		t.Helper()
		for range count {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
	}
	// closedSegments lists the sizes of the partition's closed segments (all but the active one) in
	// offset order.
	closedSegments := func() []int64 {
		t.Helper()
		logs, err := filepath.Glob(filepath.Join(n.dataDir, topic+"-0", "*.log"))
		if err != nil || len(logs) == 0 {
			t.Fatalf("segments of %s-0: %v %v", topic, logs, err)
		}
		sort.Strings(logs)
		var sizes []int64
		for _, p := range logs[:len(logs)-1] {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, fi.Size())
		}
		return sizes
	}

	const clusterSegment, brokerSegment = 16 << 10, 64 << 10
	alter(kadm.SetConfig, "log.segment.bytes", strconv.Itoa(clusterSegment))
	produce(60)
	first := closedSegments()
	if len(first) < 2 {
		t.Fatalf("60 KB under a cluster-wide log.segment.bytes of 16 KiB closed segments of %v bytes", first)
	}
	for _, size := range first {
		if size > clusterSegment || size < clusterSegment/2 {
			t.Errorf("segment of %d bytes under a cluster-wide log.segment.bytes of %d: %v", size, clusterSegment, first)
		}
	}

	alter(kadm.SetConfig, "log.segment.bytes", strconv.Itoa(brokerSegment), 1)
	produce(200)
	second := closedSegments()[len(first):]
	big := 0
	for _, size := range second {
		if size > brokerSegment {
			t.Errorf("segment of %d bytes under this broker's log.segment.bytes of %d: %v", size, brokerSegment, second)
		}
		if size > 2*clusterSegment {
			big++
		}
	}
	if big < 2 {
		t.Fatalf("200 KB under this broker's log.segment.bytes of 64 KiB closed segments of %v bytes", second)
	}

	alter(kadm.DeleteConfig, "log.segment.bytes", "", 1)
	produce(60)
	third := closedSegments()[len(first)+len(second):]
	if len(third) < 2 {
		t.Fatalf("60 KB after this broker's value was deleted closed segments of %v bytes", third)
	}
	for _, size := range third[1:] { // the first may have been the active one while the broker's value held
		if size > clusterSegment {
			t.Errorf("segment of %d bytes back under the cluster-wide log.segment.bytes of %d: %v", size, clusterSegment, third)
		}
	}

	old := &kgo.Record{Topic: topic, Value: value, Timestamp: time.Now().Add(-48 * time.Hour)}
	alter(kadm.SetConfig, "log.message.timestamp.before.max.ms", strconv.Itoa(int(time.Hour.Milliseconds())))
	if err := cl.ProduceSync(ctx, old).FirstErr(); !errors.Is(err, kerr.InvalidTimestamp) {
		t.Fatalf("a two-day-old record under a cluster-wide before.max.ms of an hour: %v, want INVALID_TIMESTAMP", err)
	}
	alter(kadm.SetConfig, "log.message.timestamp.before.max.ms", strconv.Itoa(int((7 * 24 * time.Hour).Milliseconds())), 1)
	if err := cl.ProduceSync(ctx, old).FirstErr(); err != nil {
		t.Fatalf("a two-day-old record under this broker's before.max.ms of a week: %v", err)
	}
}
