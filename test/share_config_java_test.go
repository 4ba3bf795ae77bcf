package test

import (
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
