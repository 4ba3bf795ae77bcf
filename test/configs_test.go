package test

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"
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
