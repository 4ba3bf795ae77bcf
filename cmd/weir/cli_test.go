package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// testBound caps any single CLI run, so a hang fails the test instead of stalling the suite.
const testBound = 60 * time.Second

type cliResult struct {
	stdout, stderr string
	err            error
}

// runCLI builds the command tree afresh and runs one command in-process.
func runCLI(t *testing.T, stdin string, args ...string) cliResult {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetArgs(args)
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errOut)
	ctx, cancel := context.WithTimeout(t.Context(), testBound)
	defer cancel()
	err := root.ExecuteContext(ctx)
	if ctx.Err() != nil {
		t.Fatalf("weir %s: still running after %s", strings.Join(args, " "), testBound)
	}
	return cliResult{stdout: out.String(), stderr: errOut.String(), err: err}
}

// mustRun runs a command that must succeed and returns its stdout.
func mustRun(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	r := runCLI(t, stdin, args...)
	if r.err != nil {
		t.Fatalf("weir %s: %v (stderr: %s)", strings.Join(args, " "), r.err, r.stderr)
	}
	return r.stdout
}

// newFakeCluster starts a one-broker in-memory cluster and returns its address for --brokers.
func newFakeCluster(t *testing.T, opts ...kfake.Opt) string {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return strings.Join(c.ListenAddrs(), ",")
}

// fields splits output into lines of whitespace-separated fields, as grep and awk users see it.
func fields(out string) [][]string {
	var rows [][]string
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		rows = append(rows, strings.Fields(line))
	}
	return rows
}

// findRow returns the first row whose first field is key.
func findRow(out, key string) []string {
	for _, row := range fields(out) {
		if len(row) > 0 && row[0] == key {
			return row
		}
	}
	return nil
}

func TestCLITopicLifecycle(t *testing.T) {
	b := "--brokers=" + newFakeCluster(t)

	out := mustRun(t, "", "topic", "create", "orders", "--partitions", "3", "--replication-factor", "1",
		"--config", "retention.ms=60000", b)
	if !strings.Contains(out, "created topic orders") {
		t.Fatalf("create printed %q", out)
	}
	if r := runCLI(t, "", "topic", "create", "orders", b); r.err == nil || !strings.Contains(r.err.Error(), "TOPIC_ALREADY_EXISTS") {
		t.Fatalf("second create: err %v, want TOPIC_ALREADY_EXISTS", r.err)
	}

	out = mustRun(t, "", "topic", "list", b)
	if row := findRow(out, "orders"); len(row) != 3 || row[1] != "3" || row[2] != "1" {
		t.Fatalf("list row for orders = %q in\n%s", row, out)
	}

	mustRun(t, "a\nb\nc\nd\n", "produce", "orders", "--partition", "1", b)
	out = mustRun(t, "", "topic", "describe", "orders", b)
	for p, want := range map[string]string{"0": "0", "1": "4", "2": "0"} {
		row := findRow(out, p)
		// PARTITION LEADER EPOCH REPLICAS ISR START END
		if len(row) != 7 || row[3] == "-" || row[4] == "-" || row[5] != "0" || row[6] != want {
			t.Fatalf("describe partition %s = %q, want end offset %s, in\n%s", p, row, want, out)
		}
	}
	if row := findRow(out, "retention.ms"); len(row) != 3 || row[1] != "60000" || row[2] != "DYNAMIC_TOPIC_CONFIG" {
		t.Fatalf("describe config retention.ms = %q in\n%s", row, out)
	}

	mustRun(t, "", "topic", "alter", "orders", "--config", "cleanup.policy=compact", "--delete-config", "retention.ms",
		"--partitions", "5", b)
	out = mustRun(t, "", "topic", "describe", "orders", b)
	if row := findRow(out, "PARTITIONS"); len(row) != 2 || row[1] != "5" {
		t.Fatalf("after alter, PARTITIONS row = %q in\n%s", row, out)
	}
	if findRow(out, "retention.ms") != nil {
		t.Fatalf("after alter, retention.ms is still set:\n%s", out)
	}
	if row := findRow(out, "cleanup.policy"); len(row) != 3 || row[1] != "compact" {
		t.Fatalf("after alter, cleanup.policy = %q in\n%s", row, out)
	}

	mustRun(t, "", "topic", "delete", "orders", b)
	if out := mustRun(t, "", "topic", "list", b); findRow(out, "orders") != nil {
		t.Fatalf("orders still listed after delete:\n%s", out)
	}
	if r := runCLI(t, "", "topic", "describe", "orders", b); r.err == nil || !strings.Contains(r.err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("describe after delete: err %v, want UNKNOWN_TOPIC_OR_PARTITION", r.err)
	}
}

func TestCLIProduceConsumeFormats(t *testing.T) {
	b := "--brokers=" + newFakeCluster(t, kfake.SeedTopics(1, "events"))
	r := runCLI(t, "k1:v1\nk2:v2:with:colons\nno-key\n:empty-key\nk1:v3", "produce", "events", "--key-separator", ":", b)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !strings.Contains(r.stderr, "produced 5 records to events, 0 failed") {
		t.Fatalf("produce summary %q", r.stderr)
	}

	consume := func(format string) string {
		return mustRun(t, "", "consume", "events", "--from", "beginning", "--exit", "--format", format, b)
	}
	if got, want := consume("plain"), "v1\nv2:with:colons\nno-key\nempty-key\nv3\n"; got != want {
		t.Errorf("plain:\n got %q\nwant %q", got, want)
	}
	if got, want := consume("kv"), "k1\tv1\nk2\tv2:with:colons\n\tno-key\n\tempty-key\nk1\tv3\n"; got != want {
		t.Errorf("kv:\n got %q\nwant %q", got, want)
	}

	str := func(s string) *string { return &s }
	want := []jsonRecord{
		{Topic: "events", Offset: 0, Key: str("k1"), Value: str("v1")},
		{Topic: "events", Offset: 1, Key: str("k2"), Value: str("v2:with:colons")},
		{Topic: "events", Offset: 2, Key: nil, Value: str("no-key")},
		{Topic: "events", Offset: 3, Key: str(""), Value: str("empty-key")},
		{Topic: "events", Offset: 4, Key: str("k1"), Value: str("v3")},
	}
	lines := strings.Split(strings.TrimSuffix(consume("json"), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("json: %d lines, want %d: %q", len(lines), len(want), lines)
	}
	for i, line := range lines {
		var got jsonRecord
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("json line %d %q: %v", i, line, err)
		}
		if got.Timestamp <= 0 {
			t.Errorf("json line %d: timestamp %d", i, got.Timestamp)
		}
		got.Timestamp = 0
		if fmt.Sprint(deref(got)) != fmt.Sprint(deref(want[i])) {
			t.Errorf("json line %d = %v, want %v", i, deref(got), deref(want[i]))
		}
	}
}

// deref renders a jsonRecord with its pointers followed, for comparison and messages.
func deref(r jsonRecord) string {
	s := func(p *string) string {
		if p == nil {
			return "<nil>"
		}
		return fmt.Sprintf("%q", *p)
	}
	return fmt.Sprintf("%s/%d@%d ts=%d key=%s value=%s", r.Topic, r.Partition, r.Offset, r.Timestamp, s(r.Key), s(r.Value))
}

func TestCLIProduceKeepsPerKeyOrder(t *testing.T) {
	b := "--brokers=" + newFakeCluster(t, kfake.SeedTopics(4, "keyed"))
	var in strings.Builder
	for i := range 60 {
		fmt.Fprintf(&in, "key-%d=%d\n", i%6, i)
	}
	mustRun(t, in.String(), "produce", "keyed", "--key-separator", "=", "--compression", "zstd", b)
	out := mustRun(t, "", "consume", "keyed", "--from", "beginning", "--exit", "--format", "json", b)
	last := map[string]int{}
	partitionOf := map[string]int32{}
	n := 0
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		var r jsonRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if r.Key == nil || r.Value == nil {
			t.Fatalf("%q: record without key or value", line)
		}
		v, err := strconv.Atoi(*r.Value)
		if err != nil || *r.Key != fmt.Sprintf("key-%d", v%6) {
			t.Fatalf("%q: value %q is not one produced under key %q (%v)", line, *r.Value, *r.Key, err)
		}
		if prev, ok := last[*r.Key]; ok && v <= prev {
			t.Fatalf("key %s: value %d after %d", *r.Key, v, prev)
		}
		if p, ok := partitionOf[*r.Key]; ok && p != r.Partition {
			t.Fatalf("key %s in partitions %d and %d", *r.Key, p, r.Partition)
		}
		last[*r.Key], partitionOf[*r.Key] = v, r.Partition
		n++
	}
	if n != 60 {
		t.Fatalf("consumed %d records, want 60", n)
	}
}

func TestCLIProduceAcksAndCompression(t *testing.T) {
	b := "--brokers=" + newFakeCluster(t, kfake.SeedTopics(1, "codecs"))
	want := ""
	for _, acks := range []string{"all", "1", "0"} {
		for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
			line := acks + "-" + codec + strings.Repeat("x", 200)
			r := runCLI(t, line+"\n", "produce", "codecs", "--acks", acks, "--compression", codec, b)
			if r.err != nil {
				t.Fatalf("acks %s, %s: %v", acks, codec, r.err)
			}
			want += line + "\n"
		}
	}
	if got := mustRun(t, "", "consume", "codecs", "--from", "beginning", "--exit", b); got != want {
		t.Fatalf("consumed\n%s\nwant\n%s", got, want)
	}
}

func TestCLIConsumeStops(t *testing.T) {
	b := "--brokers=" + newFakeCluster(t, kfake.SeedTopics(2, "log"), kfake.SeedTopics(3, "empty"))
	mustRun(t, "a\nb\nc\n", "produce", "log", "--partition", "0", b)
	mustRun(t, "d\ne\n", "produce", "log", "--partition", "1", b)

	cases := []struct {
		name string
		args []string
		want string
	}{
		{"exit from beginning, one partition", []string{"--from", "beginning", "--exit", "--partition", "0"}, "a\nb\nc\n"},
		{"exit from end prints nothing", []string{"--from", "end", "--exit"}, ""},
		{"exit from offset", []string{"--from", "1", "--exit", "--partition", "0"}, "b\nc\n"},
		{"exit from offset past the end", []string{"--from", "99", "--exit"}, ""},
		{"count", []string{"--from", "beginning", "--count", "2", "--partition", "0"}, "a\nb\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustRun(t, "", append([]string{"consume", "log", b}, tc.args...)...); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("exit on every partition", func(t *testing.T) {
		got := strings.Fields(mustRun(t, "", "consume", "log", "--from", "beginning", "--exit", b))
		slices.Sort(got)
		if strings.Join(got, "") != "abcde" {
			t.Fatalf("got %q, want a..e", got)
		}
	})
	t.Run("exit on an empty topic", func(t *testing.T) {
		if got := mustRun(t, "", "consume", "empty", "--from", "beginning", "--exit", b); got != "" {
			t.Fatalf("got %q", got)
		}
	})
}

func TestCLIConsumeGroupCommits(t *testing.T) {
	b := "--brokers=" + newFakeCluster(t, kfake.SeedTopics(1, "jobs"))
	mustRun(t, "j1\nj2\nj3\nj4\nj5\n", "produce", "jobs", b)
	if got := mustRun(t, "", "consume", "jobs", "--group", "workers", "--from", "beginning", "--count", "2", b); got != "j1\nj2\n" {
		t.Fatalf("first member got %q", got)
	}
	if got := mustRun(t, "", "consume", "jobs", "--group", "workers", "--from", "beginning", "--exit", b); got != "j3\nj4\nj5\n" {
		t.Fatalf("second member got %q, want the records after the committed offset", got)
	}
	if got := mustRun(t, "", "consume", "jobs", "--group", "workers", "--exit", b); got != "" {
		t.Fatalf("third member got %q, want nothing", got)
	}
}

func TestCLIProduceReportsFailures(t *testing.T) {
	b := "--brokers=" + newFakeCluster(t)
	r := runCLI(t, "x\ny\n", "produce", "no-such-topic", "--timeout", "1s", b)
	if r.err == nil || !errors.Is(r.err, errProduceFailed) {
		t.Fatalf("err %v, want %v", r.err, errProduceFailed)
	}
	if !strings.Contains(r.stderr, "produced 0 records to no-such-topic, 2 failed") {
		t.Fatalf("summary %q", r.stderr)
	}
}

// refusedAddr returns a local address where nothing listens.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// silentAddr returns the address of a listener that accepts connections and never answers.
func silentAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	return ln.Addr().String()
}

func TestCLIUnreachableBroker(t *testing.T) {
	refused, silent := refusedAddr(t), silentAddr(t)
	commands := [][]string{
		{"topic", "list"},
		{"topic", "create", "t"},
		{"produce", "t"},
		{"consume", "t", "--exit"},
	}
	for _, args := range commands {
		t.Run(strings.Join(args, "-")+"/refused", func(t *testing.T) {
			r := runCLI(t, "x\n", append(args, "--brokers", refused, "--timeout", "5s")...)
			want := "cannot reach broker at " + refused + ": connection refused"
			if r.err == nil || r.err.Error() != want {
				t.Fatalf("err %v, want %q", r.err, want)
			}
		})
		t.Run(strings.Join(args, "-")+"/silent", func(t *testing.T) {
			r := runCLI(t, "x\n", append(args, "--brokers", silent, "--timeout", "300ms")...)
			want := "cannot reach broker at " + silent + ": no answer within 300ms"
			if r.err == nil || r.err.Error() != want {
				t.Fatalf("err %v, want %q", r.err, want)
			}
		})
	}
}

func TestCLIBrokersFromEnvironment(t *testing.T) {
	addr := newFakeCluster(t, kfake.SeedTopics(1, "from-env"))
	t.Setenv(envBrokers, addr)
	if out := mustRun(t, "", "topic", "list"); findRow(out, "from-env") == nil {
		t.Fatalf("list with %s=%s:\n%s", envBrokers, addr, out)
	}
	t.Setenv(envBrokers, refusedAddr(t))
	if out := mustRun(t, "", "topic", "list", "--brokers", addr); findRow(out, "from-env") == nil {
		t.Fatalf("--brokers must win over %s:\n%s", envBrokers, out)
	}
}

func TestCLIUsageErrors(t *testing.T) {
	b := "--brokers=" + refusedAddr(t)
	cases := [][]string{
		{"consume", "t", "--from", "yesterday"},
		{"consume", "t", "--format", "xml"},
		{"consume", "t", "--group", "g", "--partition", "0"},
		{"consume", "t", "--count", "-1"},
		{"produce", "t", "--acks", "2"},
		{"produce", "t", "--compression", "brotli"},
		{"topic", "create", "t", "--config", "novalue"},
		{"topic", "alter", "t"},
		{"topic", "list", "--timeout", "0s"},
	}
	for _, args := range cases {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			if r := runCLI(t, "", append(args, b)...); !errors.Is(r.err, errUsage) {
				t.Fatalf("err %v, want a usage error", r.err)
			}
		})
	}
}

func TestCLIProduceAsksForAutoCreate(t *testing.T) {
	b := "--brokers=" + newFakeCluster(t, kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(2))
	mustRun(t, "first\n", "produce", "fresh", b)
	if got := mustRun(t, "", "consume", "fresh", "--from", "beginning", "--exit", b); got != "first\n" {
		t.Fatalf("got %q", got)
	}
}

func TestCLIConsumeSaysWhereAnOffsetOutsideTheLogStarts(t *testing.T) {
	addr := newFakeCluster(t, kfake.SeedTopics(1, "orders"))
	b := "--brokers=" + addr
	mustRun(t, "a\nb\nc\nd\ne\n", "produce", "orders", b)
	r := runCLI(t, "", "consume", "orders", "--partition", "0", "--from", "999999", "--exit", b)
	if r.err != nil || r.stdout != "" {
		t.Fatalf("err %v, stdout %q", r.err, r.stdout)
	}
	if want := "offset 999999 is past the end of orders/0 (5); reading from 5\n"; !strings.HasSuffix(r.stderr, want) {
		t.Errorf("stderr %q, want it to say %q", r.stderr, want)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), testBound)
	defer cancel()
	del := make(kadm.Offsets)
	del.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 3})
	if _, err := kadm.NewClient(cl).DeleteRecords(ctx, del); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "", "consume", "orders", "--from", "1", "--exit", b)
	if r.err != nil || r.stdout != "d\ne\n" {
		t.Fatalf("err %v, stdout %q, want d and e", r.err, r.stdout)
	}
	if want := "offset 1 is before the start of orders/0 (3); reading from 3\n"; !strings.HasSuffix(r.stderr, want) {
		t.Errorf("stderr %q, want it to say %q", r.stderr, want)
	}
	if r := runCLI(t, "", "consume", "orders", "--from", "4", "--exit", b); r.stderr != "" || r.stdout != "e\n" {
		t.Errorf("an offset inside the log: stdout %q, stderr %q", r.stdout, r.stderr)
	}
}

// TestCLITopicCreateNamesTheBadCharacter runs against a weir node, whose own refusal of such a name
// must not be what the user sees.
func TestCLITopicCreateNamesTheBadCharacter(t *testing.T) {
	b := "--brokers=" + startGroupNode(t)
	for name, want := range map[string]string{
		"ünï":                    `topic name "ünï" has 'ü'`,
		"ok-then-ß":              `has 'ß'`,
		"a b":                    `has ' '`,
		"..":                     `".." is not allowed`,
		strings.Repeat("x", 250): "250 characters, at most 249",
	} {
		r := runCLI(t, "", "topic", "create", name, b)
		if !errors.Is(r.err, errUsage) || !strings.Contains(r.err.Error(), want) {
			t.Errorf("topic create %.20q: err %v, want a usage error with %q", name, r.err, want)
		}
	}
}
