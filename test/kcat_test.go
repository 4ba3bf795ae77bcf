package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// kcat runs kcat against the node with stdin and returns its stdout; a non-zero exit fails the test.
func kcat(ctx context.Context, t testing.TB, n *node, stdin string, args ...string) string {
	t.Helper()
	bin := requireTool(t, "kcat")
	args = append([]string{"-b", n.kafkaAddr()}, args...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %s: %v\nstderr:\n%s\nstdout:\n%s", strings.Join(args, " "), err, stderr.String(), stdout.String())
	}
	if stderr.Len() > 0 {
		t.Logf("kcat %s stderr:\n%s", strings.Join(args, " "), stderr.String())
	}
	return stdout.String()
}

// seqLines is what `seq 1 n` prints.
func seqLines(n int) string {
	return seqRange(1, n)
}

// seqRange is what `seq from to` prints.
func seqRange(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.String()
}

// kcatMetadata is the part of `kcat -L -J` the tests read.
type kcatMetadata struct {
	Brokers []struct {
		ID   int32  `json:"id"`
		Name string `json:"name"`
	} `json:"brokers"`
	Topics []struct {
		Topic      string `json:"topic"`
		Partitions []struct {
			Partition int32 `json:"partition"`
			Leader    int32 `json:"leader"`
			Replicas  []struct {
				ID int32 `json:"id"`
			} `json:"replicas"`
			ISRs []struct {
				ID int32 `json:"id"`
			} `json:"isrs"`
		} `json:"partitions"`
	} `json:"topics"`
}

// TestKcat drives one broker with kcat (librdkafka): metadata, produce and consume with every
// codec and with idempotence, offset queries and keys.
func TestKcat(t *testing.T) {
	requireTool(t, "kcat")
	ctx := testContext(t, 90*time.Second)
	n := startNode(t, nodeOptions{})

	// roundTrip produces `seq 1 100` with kcat and extra producer flags, then reads it back with
	// kcat and with franz-go.
	roundTrip := func(t *testing.T, topic string, produceArgs ...string) {
		want := seqLines(100)
		args := append([]string{"-P", "-t", topic, "-X", "acks=all"}, produceArgs...)
		kcat(ctx, t, n, want, args...)
		if got := kcat(ctx, t, n, "", "-C", "-t", topic, "-o", "beginning", "-e", "-q"); got != want {
			t.Errorf("kcat -C printed %d lines, want 1..100 in order:\n%s", strings.Count(got, "\n"), got)
		}
		var lines []string
		for _, recs := range n.readAll(ctx, t, topic) {
			for _, r := range recs {
				lines = append(lines, string(r.Value))
			}
		}
		if got := strings.Join(lines, "\n") + "\n"; got != want {
			t.Errorf("franz-go read back %d records, want 1..100 in order", len(lines))
		}
	}

	t.Run("produce consume", func(t *testing.T) { roundTrip(t, "kcat-plain") })
	for _, codec := range []string{"gzip", "snappy", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) { roundTrip(t, "kcat-"+codec, "-z", codec) })
	}
	t.Run("idempotent", func(t *testing.T) {
		roundTrip(t, "kcat-idempotent", "-X", "enable.idempotence=true")
	})

	t.Run("metadata", func(t *testing.T) {
		const topic = "kcat-meta"
		kcat(ctx, t, n, "x\n", "-P", "-t", topic)
		out := kcat(ctx, t, n, "", "-L", "-J")
		var md kcatMetadata
		if err := json.Unmarshal([]byte(out), &md); err != nil {
			t.Fatalf("kcat -L -J: %v\n%s", err, out)
		}
		if len(md.Brokers) != 1 || md.Brokers[0].ID != n.id || md.Brokers[0].Name != n.kafkaAddr() {
			t.Errorf("brokers %+v, want one: id %d at %s", md.Brokers, n.id, n.kafkaAddr())
		}
		found := false
		for _, tp := range md.Topics {
			if tp.Topic != topic {
				continue
			}
			found = true
			if len(tp.Partitions) == 0 {
				t.Errorf("topic %s listed without partitions", topic)
			}
			for _, p := range tp.Partitions {
				if p.Leader != n.id || len(p.Replicas) != 1 || p.Replicas[0].ID != n.id || len(p.ISRs) != 1 || p.ISRs[0].ID != n.id {
					t.Errorf("%s[%d]: leader %d, replicas %v, isr %v; want all node %d", topic, p.Partition, p.Leader, p.Replicas, p.ISRs, n.id)
				}
			}
		}
		if !found {
			t.Errorf("topic %s not in kcat -L:\n%s", topic, out)
		}
		text := kcat(ctx, t, n, "", "-L", "-t", topic)
		if !strings.Contains(text, fmt.Sprintf("broker %d at %s", n.id, n.kafkaAddr())) || !strings.Contains(text, `topic "`+topic+`"`) {
			t.Errorf("kcat -L -t %s does not list the broker and the topic:\n%s", topic, text)
		}
	})

	t.Run("query offsets", func(t *testing.T) {
		const topic = "kcat-query"
		before := time.Now().Add(-time.Hour).UnixMilli()
		kcat(ctx, t, n, seqLines(100), "-P", "-t", topic, "-X", "acks=all")
		for _, tc := range []struct {
			at   int64
			want int64
		}{{-1, 100}, {-2, 0}, {before, 0}} {
			out := kcat(ctx, t, n, "", "-Q", "-t", fmt.Sprintf("%s:0:%d", topic, tc.at))
			if got, ok := queriedOffset(out); !ok || got != tc.want {
				t.Errorf("kcat -Q -t %s:0:%d printed %q, want offset %d", topic, tc.at, out, tc.want)
			}
		}
	})

	t.Run("keys", func(t *testing.T) {
		const topic = "kcat-keys"
		var in strings.Builder
		for i := range 20 {
			fmt.Fprintf(&in, "key-%d:value-%d\n", i%3, i)
		}
		kcat(ctx, t, n, in.String(), "-P", "-t", topic, "-K:", "-X", "acks=all")
		got := kcat(ctx, t, n, "", "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%k:%s\n")
		want := strings.Split(strings.TrimSpace(in.String()), "\n")
		lines := strings.Split(strings.TrimSpace(got), "\n")
		// With more than one partition only the order per key is kept: per key, the lines come
		// in the order they were produced.
		perKey := func(ls []string) map[string][]string {
			m := map[string][]string{}
			for _, l := range ls {
				k, _, _ := strings.Cut(l, ":")
				m[k] = append(m[k], l)
			}
			return m
		}
		gotKeys, wantKeys := perKey(lines), perKey(want)
		if len(gotKeys) != len(wantKeys) {
			t.Errorf("kcat -C -f '%%k:%%s' printed %d keys, want %d:\n%s", len(gotKeys), len(wantKeys), got)
		}
		for k, w := range wantKeys {
			if !slices.Equal(gotKeys[k], w) {
				t.Errorf("key %s: kcat -C printed %v, want %v in produce order", k, gotKeys[k], w)
			}
		}
	})
}

// queryOffsetRE matches kcat -Q's line for partition 0, e.g. `kcat-query [0] offset 100`.
var queryOffsetRE = regexp.MustCompile(`\[0\]\s+offset\s+(-?\d+)`)

// queriedOffset extracts the offset kcat -Q printed for partition 0.
func queriedOffset(out string) (int64, bool) {
	m := queryOffsetRE.FindStringSubmatch(out)
	if m == nil {
		return 0, false
	}
	o, err := strconv.ParseInt(m[1], 10, 64)
	return o, err == nil
}
