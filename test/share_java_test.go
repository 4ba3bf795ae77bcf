package test

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// javaShareAck is one record a weir.e2e.ShareConsumer acknowledged, and the broker confirmed.
type javaShareAck struct {
	ack           string // accept, release or reject; held for a record the consumer stopped at
	partition     int32
	offset        int64
	deliveryCount int
	value         string
}

// javaShareConsumer is one weir.e2e.ShareConsumer process: a Java KafkaShareConsumer with explicit
// acknowledgement. It follows what the process acknowledged and the broker confirmed.
type javaShareConsumer struct {
	*lineProcess
	acked  []javaShareAck
	failed []string
}

// startShareConsumer starts cmd, a process that prints what weir.e2e.ShareConsumer prints.
func startShareConsumer(t *testing.T, cmd *exec.Cmd, name string) *javaShareConsumer {
	t.Helper()
	c := &javaShareConsumer{lineProcess: &lineProcess{name: name}}
	c.handle = func(f []string) bool {
		switch f[0] {
		case "accept", "release", "reject", "held":
			if len(f) != 5 {
				return false
			}
			p, err1 := strconv.ParseInt(f[1], 10, 32)
			o, err2 := strconv.ParseInt(f[2], 10, 64)
			n, err3 := strconv.Atoi(f[3])
			if err1 != nil || err2 != nil || err3 != nil {
				return false
			}
			c.acked = append(c.acked, javaShareAck{f[0], int32(p), o, n, f[4]})
		case "failed":
			c.failed = append(c.failed, strings.Join(f[1:], " "))
		default:
			return false
		}
		return true
	}
	c.start(t, cmd)
	return c
}

func (c *javaShareConsumer) deliveries() []javaShareAck {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]javaShareAck(nil), c.acked...)
}

// TestJavaShareConsumers runs six Java KafkaShareConsumers (KIP-932, kafka-clients 4.x) in one share
// group on a topic of two partitions of a weir process: more consumers than partitions, so each
// partition is read by several at once. Each consumer accepts most records, rejects the values ending
// in "r", and releases the values ending in "l" on their first delivery. Every record must end with
// exactly one confirmed acknowledgement that finishes it (accept, or reject for an "r"), each "l"
// record must be released once and then delivered again with delivery count 2, and every consumer
// must get records.
func TestJavaShareConsumers(t *testing.T) {
	cp := javaClasspath(t)
	shareConsumers(t, "share-java", func(ctx context.Context, bootstrap, topic, group, name string) *exec.Cmd {
		return javaCommand(ctx, cp, "ShareConsumer", bootstrap, topic, group, name)
	})
}

// TestLibrdkafkaShareConsumers is TestJavaShareConsumers with librdkafka's share consumer, in preview
// in librdkafka 2.15 and later (confluent-kafka's ShareConsumer, testdata/confluent_share_consumer.py),
// which speaks ShareFetch and ShareAcknowledge v1.
func TestLibrdkafkaShareConsumers(t *testing.T) {
	requireConfluentKafka(t)
	shareConsumers(t, "share-rdkafka", func(ctx context.Context, bootstrap, topic, group, name string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, confluentPython, "testdata/confluent_share_consumer.py", bootstrap, topic, group, name)
		cmd.WaitDelay = 5 * time.Second
		return cmd
	})
}

// shareConsumers runs TestJavaShareConsumers' six consumers, which consumer starts, on a topic named
// topic.
func shareConsumers(t *testing.T, topic string, consumer func(ctx context.Context, bootstrap, topic, group, name string) *exec.Cmd) {
	ctx := testContext(t, 3*time.Minute)
	n := startNode(t, nodeOptions{Args: []string{"--share-groups"}})
	group := topic + "-group"
	n.createTopic(ctx, t, topic, 2, nil)
	prod := n.client(t, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produce := func(values ...string) {
		recs := make([]*kgo.Record, len(values))
		for i, v := range values {
			recs[i] = &kgo.Record{Topic: topic, Value: []byte(v)}
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	consumers := make([]*javaShareConsumer, 6)
	for i := range consumers {
		name := fmt.Sprintf("share-%d", i)
		consumers[i] = startShareConsumer(t, consumer(ctx, n.kafkaAddr(), topic, group, name), name)
	}
	// A new share-partition starts at the log's end (share.auto.offset.reset=latest): warm-up records
	// go out until every consumer has acknowledged one, so the group reads from before the test's records.
	warm := 0
	waitFor(ctx, t, "every consumer to get a warm-up record", func() bool {
		for i := range 12 {
			produce(fmt.Sprintf("warm-%d-%d", warm, i))
		}
		warm++
		for _, c := range consumers {
			if len(c.deliveries()) == 0 {
				return false
			}
		}
		return true
	})

	const total = 3000
	values := make([]string, total)
	for i := range values {
		values[i] = fmt.Sprintf("v%05d", i)
		switch i % 10 {
		case 3:
			values[i] += "r"
		case 7:
			values[i] += "l"
		}
	}
	for i := 0; i < total; i += 100 {
		produce(values[i : i+100]...)
	}
	finished := func() map[string][]javaShareAck {
		out := map[string][]javaShareAck{}
		for _, c := range consumers {
			for _, d := range c.deliveries() {
				if !strings.HasPrefix(d.value, "warm-") {
					out[d.value] = append(out[d.value], d)
				}
			}
		}
		return out
	}
	var open []string
	waitFor(ctx, t, "every record to be finished", func() bool {
		got := finished()
		open = open[:0]
		for _, v := range values {
			// Consumers print in their own time: a redelivered record's accept can come before its release.
			if ds := got[v]; !slices.ContainsFunc(ds, func(d javaShareAck) bool { return d.ack != "release" }) {
				open = append(open, fmt.Sprintf("%s %v", v, ds))
			}
		}
		if len(open) > 0 && ctx.Err() != nil {
			t.Logf("%d records not finished, the first: %v", len(open), open[:min(len(open), 10)])
		}
		return len(open) == 0
	})
	for _, c := range consumers {
		c.stop(ctx, t)
	}

	got := finished()
	for _, v := range values {
		var accepts, rejects, releases []javaShareAck
		for _, d := range got[v] {
			switch d.ack {
			case "accept":
				accepts = append(accepts, d)
			case "reject":
				rejects = append(rejects, d)
			case "release":
				releases = append(releases, d)
			}
		}
		switch {
		case strings.HasSuffix(v, "r"):
			if len(rejects) != 1 || len(accepts) != 0 || len(releases) != 0 {
				t.Errorf("%s: %v, want one reject", v, got[v])
			}
		case strings.HasSuffix(v, "l"):
			if len(releases) != 1 || len(accepts) != 1 || len(rejects) != 0 ||
				releases[0].deliveryCount != 1 || accepts[0].deliveryCount != 2 {
				t.Errorf("%s: %v, want a release at delivery 1 and an accept at delivery 2", v, got[v])
			}
		default:
			if len(accepts) != 1 || len(rejects) != 0 || len(releases) != 0 {
				t.Errorf("%s: %v, want one accept", v, got[v])
			}
		}
	}
	for _, c := range consumers {
		c.mu.Lock()
		if len(c.failed) > 0 {
			t.Errorf("%s: acknowledgements the broker refused: %v", c.name, c.failed)
		}
		c.mu.Unlock()
		busy := 0
		for _, d := range c.deliveries() {
			if !strings.HasPrefix(d.value, "warm-") {
				busy++
			}
		}
		if busy == 0 {
			t.Errorf("%s acknowledged none of the test's records", c.name)
		}
	}
}
