package test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// javaBuild builds test/java once per test binary run.
var javaBuild struct {
	once sync.Once
	cp   string
	err  error
}

// javaClasspath builds the Maven project under test/java (`mvn -q -B package`, which downloads what it
// needs into ~/.m2 on a fresh machine) and returns the class path of its programs. Without mvn or java
// the test is skipped, unless CI=true, where it fails.
func javaClasspath(t testing.TB) string {
	t.Helper()
	mvn := requireTool(t, "mvn")
	requireTool(t, "java")
	javaBuild.once.Do(func() {
		cmd := exec.Command(mvn, "-q", "-B", "package")
		cmd.Dir = "java"
		out, err := cmd.CombinedOutput()
		if err != nil {
			javaBuild.err = fmt.Errorf("mvn -q -B package in test/java: %w\n%s", err, out)
			return
		}
		dir, err := filepath.Abs("java/target")
		if err != nil {
			javaBuild.err = err
			return
		}
		javaBuild.cp = filepath.Join(dir, "classes") + string(filepath.ListSeparator) + filepath.Join(dir, "lib", "*")
	})
	if javaBuild.err != nil {
		t.Fatal(javaBuild.err)
	}
	return javaBuild.cp
}

// javaCommand is `java` running a main class of test/java with args, logging at WARN to stderr.
func javaCommand(ctx context.Context, cp, class string, args ...string) *exec.Cmd {
	argv := append([]string{"-cp", cp, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "weir.e2e." + class}, args...)
	cmd := exec.CommandContext(ctx, "java", argv...)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// runJava runs a main class of test/java to its end and returns its standard output; a non-zero exit
// fails the test with its output.
func runJava(ctx context.Context, t testing.TB, class string, args ...string) string {
	t.Helper()
	cmd := javaCommand(ctx, javaClasspath(t), class, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("java %s %s: %v\nstderr:\n%s\nstdout:\n%s", class, strings.Join(args, " "), err, stderr.String(), stdout.String())
	}
	return stdout.String()
}

// TestJavaTxnCopy copies 20 records with the Java client (weir.e2e.TxnCopy, mode txn): a committed
// transaction with the first half and the group's offsets, an aborted one with every record, a
// committed one with the second half. A read_committed KafkaConsumer sees each copied record once and
// nothing of the aborted transaction, and the group has committed the input's end offsets.
func TestJavaTxnCopy(t *testing.T) { javaCopy(t, "txn", 1) }

// TestJavaTxnCopyTV2 is TestJavaTxnCopy on a node finalizing transaction.version 2: the Java client
// then runs KIP-890 part 2 (Produce v12, TxnOffsetCommit v5, EndTxn v5 with its epoch bump), which the
// test sees in the transactional id's epoch.
func TestJavaTxnCopyTV2(t *testing.T) { javaCopy(t, "txn", 2) }

// TestJavaCopyPlain runs TxnCopy's path without transactions (mode plain): an idempotent producer,
// offsets committed by the consumer, no aborted transaction. It checks what TestJavaTxnCopy checks.
func TestJavaCopyPlain(t *testing.T) { javaCopy(t, "plain", 1) }

func javaCopy(t *testing.T, mode string, tv int) {
	javaClasspath(t)
	ctx := testContext(t, 2*time.Minute)
	n := startNode(t, nodeOptions{Args: []string{"--group-initial-rebalance-delay", "0s", "--transaction-version", strconv.Itoa(tv)}})
	in, out, group := "java-"+mode+"-in", "java-"+mode+"-out", "java-"+mode
	n.createTopic(ctx, t, in, 3, nil)
	n.createTopic(ctx, t, out, 3, nil)
	const count = 20
	var recs []*kgo.Record
	want := map[string]bool{}
	for i := range count {
		recs = append(recs, &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)})
		want[fmt.Sprintf("copied-v%d", i)] = true
	}
	if err := n.client(t).ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	stdout := runJava(ctx, t, "TxnCopy", n.kafkaAddr(), in, out, group, mode, strconv.Itoa(count))
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if lines[len(lines)-1] != "done" {
		t.Fatalf("TxnCopy did not end with done:\n%s", stdout)
	}
	seen := map[string]bool{}
	committed := map[int32]int64{}
	for _, l := range lines[:len(lines)-1] {
		switch f := strings.Fields(l); {
		case len(f) == 2 && f[0] == "out":
			if !want[f[1]] || seen[f[1]] {
				t.Errorf("read_committed consumer saw %q: not a copied record, or a second time", f[1])
			}
			seen[f[1]] = true
		case len(f) == 4 && f[0] == "offset" && f[1] == in:
			p, _ := strconv.Atoi(f[2])
			o, _ := strconv.ParseInt(f[3], 10, 64)
			committed[int32(p)] = o
		default:
			t.Errorf("TxnCopy printed %q", l)
		}
	}
	if len(seen) != count {
		t.Errorf("read_committed consumer saw %d copied records, want %d:\n%s", len(seen), count, stdout)
	}
	ends, err := n.admin(t).ListEndOffsets(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	for p, o := range ends[in] {
		if committed[p] != o.Offset {
			t.Errorf("group %s committed %v of %s, want the end offsets (%s[%d] at %d)", group, committed, in, in, p, o.Offset)
		}
	}
	if mode == "txn" {
		// Three transactions: TV2 bumps the epoch at each end, TV1 never after InitProducerId.
		adm := n.admin(t)
		listed, err := adm.ListTransactions(ctx, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		described, err := adm.DescribeTransactions(ctx, listed.TransactionalIDs()...)
		if err != nil {
			t.Fatal(err)
		}
		for id, d := range described {
			if bumped := d.ProducerEpoch >= 3; bumped != (tv == 2) {
				t.Errorf("TV%d: transactional id %s ends at epoch %d after three transactions", tv, id, d.ProducerEpoch)
			}
		}
		if len(described) == 0 {
			t.Errorf("no transactional id listed")
		}
		// The aborted transaction's records are in the log: a read_uncommitted reader sees them.
		nAborted := 0
		for _, recs := range readN(ctx, t, []kgo.Opt{kgo.SeedBrokers(n.kafkaAddr())}, out, kgo.ReadUncommitted(), 2*count) {
			for _, r := range recs {
				if strings.HasPrefix(string(r.Value), "aborted-") {
					nAborted++
				}
			}
		}
		if nAborted != count {
			t.Errorf("read_uncommitted reader saw %d records of the aborted transaction, want %d", nAborted, count)
		}
	}
}

// wordCountInput is the fixed input of the word count: line i holds the words "w<j>" for j in 0..i%7,
// so word w<j> occurs in the lines whose i%7 >= j.
func wordCountInput(lines int) ([]string, map[string]int) {
	var in []string
	counts := map[string]int{}
	for i := range lines {
		var words []string
		for j := range i%7 + 1 {
			w := "w" + strconv.Itoa(j)
			words = append(words, w)
			counts[w]++
		}
		in = append(in, strings.Join(words, " "))
	}
	return in, counts
}

// streamsApp is one run of weir.e2e.WordCount.
type streamsApp struct {
	cmd     *exec.Cmd
	stdin   io.Closer
	stdout  *logBuffer
	stderr  *logBuffer
	running chan struct{} // closed when the app first prints "state RUNNING"
	failed  chan struct{} // closed when the app first prints "error ..." or "state ERROR"
	done    chan struct{} // closed once the app has exited and been reaped
}

// startWordCount starts the Streams word count against bootstrap and waits until it says RUNNING.
func startWordCount(ctx context.Context, t *testing.T, bootstrap, guarantee, rf, stateDir string) *streamsApp {
	t.Helper()
	cmd := javaCommand(ctx, javaClasspath(t), "WordCount", bootstrap, "wordcount", "wc-in", "wc-out", guarantee, rf, stateDir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	app := &streamsApp{cmd: cmd, stdin: stdin, stdout: &logBuffer{}, stderr: &logBuffer{},
		running: make(chan struct{}), failed: make(chan struct{}), done: make(chan struct{})}
	cmd.Stderr = app.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start WordCount: %v", err)
	}
	// Wait is called only once stdout is read to its end, as os/exec requires.
	go func() {
		defer close(app.done)
		sc := bufio.NewScanner(stdout)
		isRunning, isFailed := false, false
		for sc.Scan() {
			l := sc.Text()
			fmt.Fprintln(app.stdout, l)
			if l == "state RUNNING" && !isRunning {
				isRunning = true
				close(app.running)
			}
			if (strings.HasPrefix(l, "error ") || l == "state ERROR") && !isFailed {
				isFailed = true
				close(app.failed)
			}
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		app.kill()
		if t.Failed() {
			t.Logf("WordCount stdout:\n%s\nstderr:\n%s", app.stdout.String(), app.stderr.String())
		}
	})
	select {
	case <-app.running:
		return app
	case <-app.failed:
		t.Fatalf("WordCount failed before RUNNING:\n%s", app.stdout.String())
	case <-app.done:
		t.Fatalf("WordCount exited before RUNNING:\n%s\n%s", app.stdout.String(), app.stderr.String())
	case <-ctx.Done():
		t.Fatalf("WordCount not RUNNING: %v\n%s", ctx.Err(), app.stdout.String())
	}
	return nil
}

// check fails the test if the app has exited or a stream thread has stopped on an exception.
func (a *streamsApp) check(t *testing.T) {
	t.Helper()
	select {
	case <-a.failed:
		t.Fatalf("WordCount failed:\n%s", a.stdout.String())
	case <-a.done:
		t.Fatalf("WordCount exited:\n%s", a.stdout.String())
	default:
	}
}

// kill ends the app with SIGKILL, as a crash would, and waits until it is reaped.
func (a *streamsApp) kill() {
	a.cmd.Process.Kill()
	<-a.done
}

// close closes the app's stdin, on which it closes Kafka Streams and exits, and waits for that.
func (a *streamsApp) close(t *testing.T) {
	t.Helper()
	a.stdin.Close()
	select {
	case <-a.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("WordCount still running 60s after its stdin closed")
	}
}

// produceLines writes lines to topic wc-in with acks=all.
func produceLines(ctx context.Context, t *testing.T, cl *kgo.Client, lines []string) {
	t.Helper()
	recs := make([]*kgo.Record, len(lines))
	for i, l := range lines {
		recs[i] = &kgo.Record{Topic: "wc-in", Value: []byte(l)}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce %d lines to wc-in: %v", len(lines), err)
	}
}

// waitCounts reads wc-out read_committed from its start until the last count of every word equals
// want, and returns every count of each word in order. It fails when ctx ends first or app fails.
func waitCounts(ctx context.Context, t *testing.T, app *streamsApp, opts []kgo.Opt, want map[string]int) map[string][]int {
	t.Helper()
	cl, err := kgo.NewClient(append(slices.Clone(opts), kgo.ConsumeTopics("wc-out"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(300*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[string][]int{}
	last := func() map[string]int {
		m := map[string]int{}
		for w, cs := range got {
			m[w] = cs[len(cs)-1]
		}
		return m
	}
	for {
		equal := len(got) == len(want)
		for w, c := range last() {
			equal = equal && want[w] == c
		}
		if equal {
			return got
		}
		app.check(t)
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("word counts in wc-out %v, want %v: %v", last(), want, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			c, err := strconv.Atoi(string(r.Value))
			if err != nil {
				t.Fatalf("wc-out: %q for %q is not a count", r.Value, r.Key)
			}
			got[string(r.Key)] = append(got[string(r.Key)], c)
		})
	}
}

// TestJavaStreamsAtLeastOnce runs the Kafka Streams word count with at_least_once on one node over a
// fixed input, in two halves with a clean restart of the app between them, and checks the final
// counts. It is the path TestJavaStreamsExactlyOnce takes, without transactions.
func TestJavaStreamsAtLeastOnce(t *testing.T) {
	javaClasspath(t)
	ctx := testContext(t, 3*time.Minute)
	n := startNode(t, nodeOptions{Args: []string{"--group-initial-rebalance-delay", "0s"}})
	n.createTopic(ctx, t, "wc-in", 3, nil)
	n.createTopic(ctx, t, "wc-out", 3, nil)
	input, total := wordCountInput(200)
	opts := []kgo.Opt{kgo.SeedBrokers(n.kafkaAddr())}
	cl := n.client(t)
	state := t.TempDir()

	app := startWordCount(ctx, t, n.kafkaAddr(), "at_least_once", "1", state)
	produceLines(ctx, t, cl, input[:100])
	_, half := wordCountInput(100)
	waitCounts(ctx, t, app, opts, half)
	app.close(t)
	app = startWordCount(ctx, t, n.kafkaAddr(), "at_least_once", "1", state)
	produceLines(ctx, t, cl, input[100:])
	waitCounts(ctx, t, app, opts, total)
}

// TestJavaStreamsExactlyOnce runs the Kafka Streams word count with exactly_once_v2 on three nodes
// (every topic RF=3, min.insync.replicas=2) over a fixed input in three parts: after the first the
// app is killed with SIGKILL and started again; during the second a broker is killed with SIGKILL and
// restarted after the third. A read_committed reader of the output then sees, for every word, the
// counts 1, 2, ..., its number of occurrences, each once: nothing lost, nothing counted twice.
// WEIR_STREAMS_LINES (default 300) makes the input longer.
func TestJavaStreamsExactlyOnce(t *testing.T) {
	javaClasspath(t)
	nLines := envInt("WEIR_STREAMS_LINES", 300)
	ctx := testContext(t, 4*time.Minute+time.Duration(nLines/100)*time.Second)
	nodes := startGroupCluster(ctx, t)
	configs := map[string]string{"min.insync.replicas": "2"}
	createTopicConfigs(ctx, t, nodes, "wc-in", 3, 3, configs)
	createTopicConfigs(ctx, t, nodes, "wc-out", 3, 3, configs)
	opts := clusterClientOpts(nodes)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var seeds []string
	for _, n := range nodes {
		seeds = append(seeds, n.kafkaAddr())
	}
	bootstrap := strings.Join(seeds, ",")
	state := t.TempDir()
	input, total := wordCountInput(nLines)
	third := nLines / 3
	_, first := wordCountInput(third)

	app := startWordCount(ctx, t, bootstrap, "exactly_once_v2", "3", state)
	produceLines(ctx, t, cl, input[:third])
	waitCounts(ctx, t, app, opts, first)
	app.kill()
	app = startWordCount(ctx, t, bootstrap, "exactly_once_v2", "3", state)
	produceLines(ctx, t, cl, input[third:2*third])
	victim := nodes[leaderOf(ctx, t, nodes, "wc-out", 0)-1]
	t.Logf("killing node %d, leader of wc-out[0]", victim.id)
	victim.kill()
	produceLines(ctx, t, cl, input[2*third:])
	got := waitCounts(ctx, t, app, opts, total)
	victim.restart()
	waitAgree(ctx, t, nodes, func(resp *kmsg.MetadataResponse) bool { return hasBrokers(1, 2, 3)(resp) })

	for w, n := range total {
		want := make([]int, n)
		for i := range want {
			want[i] = i + 1
		}
		if !slices.Equal(got[w], want) {
			t.Errorf("word %s: counts %v, want 1..%d each once", w, got[w], n)
		}
	}
}

// TestJavaAcls creates, describes (ANY and MATCH) and deletes ACLs with the Java AdminClient
// (weir.e2e.AclAdmin) on a node with --authorizer acl, as its super user.
func TestJavaAcls(t *testing.T) {
	javaClasspath(t)
	ctx := testContext(t, 2*time.Minute)
	n := startNode(t, nodeOptions{Args: []string{"--authorizer", "acl", "--super-users", "User:ANONYMOUS"}})
	stdout := runJava(ctx, t, "AclAdmin", n.kafkaAddr())
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var acls, matched []string
	var deleted, after string
	for _, l := range lines {
		f := strings.SplitN(l, " ", 2)
		switch f[0] {
		case "acl":
			acls = append(acls, f[1])
		case "match":
			matched = append(matched, f[1])
		case "deleted":
			deleted = f[1]
		case "after":
			after = f[1]
		}
	}
	slices.Sort(acls)
	want := []string{"User:alice * READ ALLOW TOPIC orders LITERAL", "User:bob 10.0.0.1 ALL DENY TOPIC logs- PREFIXED"}
	if !slices.Equal(acls, want) || !slices.Equal(matched, want[1:]) || deleted != "1" || after != "1" || lines[len(lines)-1] != "done" {
		t.Fatalf("AclAdmin printed:\n%s\nwant the ACLs %q, the MATCH of logs-app %q, 1 deleted, 1 left", stdout, want, want[1:])
	}
}
