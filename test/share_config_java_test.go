package test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestJavaShareRenewConfig: the Java AdminClient sets share group configs on the GROUP resource
// (incrementalAlterConfigs) and describes them (DYNAMIC_GROUP_CONFIG, Java's name for the source); a
// Java KafkaShareConsumer's RENEW (AcknowledgeType.RENEW, KIP-1222) then fails with
// InvalidRecordStateException in a group that leaves share.renew.acknowledge.enable at its default, and
// succeeds in one that sets it true, where the next poll hands the renewed record back, still at its
// first delivery, and it is accepted.
func TestJavaShareRenewConfig(t *testing.T) {
	javaClasspath(t)
	ctx := testContext(t, 3*time.Minute)
	n := startNode(t, nodeOptions{Args: []string{"--share-groups"}})
	const topic = "share-renew-java"
	n.createTopic(ctx, t, topic, 1, nil)
	prod := n.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("slow")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		group string
		args  []string
		want  []string
	}{
		{"renew-off", []string{"share.auto.offset.reset=earliest", "share.heartbeat.interval.ms=6000"}, []string{
			"config share.auto.offset.reset earliest DYNAMIC_GROUP_CONFIG", "config share.heartbeat.interval.ms 6000 DYNAMIC_GROUP_CONFIG",
			"renew InvalidRecordStateException"}},
		{"renew-on", []string{"share.auto.offset.reset=earliest", "share.renew.acknowledge.enable=true"}, []string{
			"config share.auto.offset.reset earliest DYNAMIC_GROUP_CONFIG", "config share.renew.acknowledge.enable true DYNAMIC_GROUP_CONFIG",
			"renew ok", "accept 1 ok"}},
	} {
		out := runJava(ctx, t, "ShareRenew", append([]string{n.kafkaAddr(), topic, c.group}, c.args...)...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) == 0 || lines[len(lines)-1] != "done" {
			t.Fatalf("%s: ShareRenew printed %q", c.group, out)
		}
		if got := lines[:len(lines)-1]; !slices.Equal(got, c.want) {
			t.Errorf("%s: ShareRenew printed %q, want %q", c.group, got, c.want)
		}
	}
}

// TestJavaShareDeadLetterConfigs: KIP-1191's safeguards through the Java AdminClient. Setting a share
// group's errors.deadletterqueue.topic.name (incrementalAlterConfigs on the GROUP resource) to a name
// without the broker's prefix, or to a topic that does not set errors.deadletterqueue.group.enable=true,
// fails with InvalidConfigurationException and changes nothing; a topic created with the flag
// (createTopics) is taken. The group's config is described as DYNAMIC_GROUP_CONFIG, the topic's flag
// as DYNAMIC_TOPIC_CONFIG, and the broker's errors.deadletterqueue.topic.name.prefix as dlq.
// (DEFAULT_CONFIG).
func TestJavaShareDeadLetterConfigs(t *testing.T) {
	javaClasspath(t)
	ctx := testContext(t, 3*time.Minute)
	n := startNode(t, nodeOptions{Args: []string{"--share-groups"}})
	const plain, enabled = "dlq.java-plain", "dlq.java-enabled"
	out := runJava(ctx, t, "DeadLetterConfigs", n.kafkaAddr(), fmt.Sprint(n.id), "dlq-java", plain, enabled,
		"orders.dead", plain, enabled, "dlq.java-missing", "__consumer_offsets")
	want := []string{
		"set orders.dead InvalidConfigurationException",
		"set " + plain + " InvalidConfigurationException",
		"set " + enabled + " ok",
		"set dlq.java-missing ok",
		"set __consumer_offsets InvalidConfigurationException",
		"group dlq.java-missing DYNAMIC_GROUP_CONFIG",
		"topic true DYNAMIC_TOPIC_CONFIG",
		"prefix dlq. DEFAULT_CONFIG",
		"done",
	}
	if got := strings.Split(strings.TrimSpace(out), "\n"); !slices.Equal(got, want) {
		t.Fatalf("DeadLetterConfigs printed %q, want %q", got, want)
	}
}
