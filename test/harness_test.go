package test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/freeport"
)

// Bounds of the harness. They are limits on waiting, never expectations of speed: a healthy node
// answers /healthz in well under a second.
const (
	healthTimeout = 30 * time.Second // start to /healthz 200
	exitTimeout   = 30 * time.Second // SIGTERM to exit (drain, sync, close)
	killTimeout   = 10 * time.Second // SIGKILL to reaped
)

// weirBin is the weir binary TestMain builds once for the whole package.
var weirBin string

func TestMain(m *testing.M) {
	if spec := os.Getenv(delayerEnv); spec != "" {
		// This process is a delayer of the network-fault lab (delay_test.go), not a test run.
		os.Exit(runDelayer(spec))
	}
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "weir-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "test: temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	weirBin = filepath.Join(dir, "weir")
	build := exec.Command("go", "build", "-o", weirBin, "github.com/weir-mq/weir/cmd/weir")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "test: go build ./cmd/weir: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// nodePorts are the three listen addresses of one node.
type nodePorts struct {
	Kafka, HTTP, Controller string
}

// pickPorts reserves n sets of free 127.0.0.1 ports. All of a cluster's ports are picked before any
// node starts, so that --controller-voters can name every voter up front.
func pickPorts(t testing.TB, n int) []nodePorts {
	t.Helper()
	addrs := freeAddrs(t, 3*n)
	out := make([]nodePorts, n)
	for i := range out {
		out[i] = nodePorts{Kafka: addrs[3*i], HTTP: addrs[3*i+1], Controller: addrs[3*i+2]}
	}
	return out
}

// voterList is --controller-voters naming the controller address of each of ports, as nodes 1, 2, ...
func voterList(ports []nodePorts) string {
	voters := make([]string, len(ports))
	for i, p := range ports {
		voters[i] = fmt.Sprintf("%d@%s", i+1, p.Controller)
	}
	return strings.Join(voters, ",")
}

// freeAddrs returns n distinct free loopback addresses, below the ephemeral range (freeport), so that
// no connection takes one before the node it is for binds it.
func freeAddrs(t testing.TB, n int) []string {
	t.Helper()
	out, err := freeport.Addrs(n)
	if err != nil {
		t.Fatalf("pick free ports: %v", err)
	}
	return out
}

// nodeOptions say how to start a node. The zero value is the single-node default on fresh ports.
type nodeOptions struct {
	// NodeID is --node-id; 0 means 1.
	NodeID int32
	// Ports are the node's addresses; zero means freshly picked ones.
	Ports nodePorts
	// Voters is --controller-voters (id@host:port,...); empty means the node alone.
	Voters string
	// DataDir is --data-dir; empty means a new t.TempDir().
	DataDir string
	// Env is added to the process environment (WEIR_* settings).
	Env []string
	// Args are extra command-line arguments after the contract's flags.
	Args []string
	// SASLSSL, when set, is the address of a SASL_SSL listener beside the PLAINTEXT one: the node is
	// started with --listeners instead of --kafka-addr (the TLS and SASL flags go in Args or Env).
	SASLSSL string
	// KafkaProtocol, when set, is the security protocol of the node's one Kafka listener at
	// Ports.Kafka (--listeners PROTOCOL://addr instead of --kafka-addr).
	KafkaProtocol string
	// Wrap is a command that runs the binary as its last arguments and execs it in place, so that
	// signals reach the node (`ip netns exec NAME`); empty means the binary is run directly.
	Wrap []string
}

// node is one `weir serve` process that can be killed, stopped and started again on the same data
// directory and ports. Its methods must be called from the test goroutine.
type node struct {
	t       testing.TB
	id      int32
	ports   nodePorts
	voters  string
	dataDir string
	env     []string
	args    []string
	wrap    []string
	saslSSL string
	// protocol is nodeOptions.KafkaProtocol.
	protocol string

	output *logBuffer // stdout and stderr of every run, in order
	runs   int
	proc   *process // nil when not running
}

// process is one run of the binary.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
	err  error         // the exit status; read after done
}

// startNode starts a node and waits until it serves. Cleanup kills it, logs its output if the test
// failed, and fails the test if the output shows a panic or a data race.
func startNode(t testing.TB, opts nodeOptions) *node {
	t.Helper()
	n := newNode(t, opts)
	n.start()
	return n
}

// newNode prepares a node without starting it.
func newNode(t testing.TB, opts nodeOptions) *node {
	t.Helper()
	n := &node{
		t:        t,
		id:       opts.NodeID,
		ports:    opts.Ports,
		voters:   opts.Voters,
		dataDir:  opts.DataDir,
		env:      opts.Env,
		args:     opts.Args,
		wrap:     opts.Wrap,
		saslSSL:  opts.SASLSSL,
		protocol: opts.KafkaProtocol,
		output:   &logBuffer{},
	}
	if n.id == 0 {
		n.id = 1
	}
	if n.ports == (nodePorts{}) {
		n.ports = pickPorts(t, 1)[0]
	}
	if n.dataDir == "" {
		n.dataDir = t.TempDir()
	}
	t.Cleanup(func() {
		if n.proc != nil {
			n.signalAndWait(syscall.SIGKILL, killTimeout)
		}
		if t.Failed() {
			t.Logf("node %d output (%d runs):\n%s", n.id, n.runs, n.output.String())
		}
		n.checkOutput()
	})
	return n
}

// kafkaAddr is where clients reach the node.
func (n *node) kafkaAddr() string { return n.ports.Kafka }

// start runs the binary and waits for /healthz to answer 200.
func (n *node) start() {
	n.t.Helper()
	n.launch()
	n.waitHealthy()
}

// launch runs the binary without waiting for it to serve: a cluster's voters are launched together,
// since none serves before a quorum of them runs.
func (n *node) launch() {
	n.t.Helper()
	if n.proc != nil {
		n.t.Fatalf("node %d: start while running", n.id)
	}
	kafka := []string{"--kafka-addr", n.ports.Kafka}
	if n.saslSSL != "" {
		kafka = []string{"--listeners", "PLAINTEXT://" + n.ports.Kafka + ",SASL_SSL://" + n.saslSSL}
	}
	if n.protocol != "" {
		kafka = []string{"--listeners", n.protocol + "://" + n.ports.Kafka}
	}
	args := append([]string{"serve",
		"--node-id", strconv.Itoa(int(n.id)),
		"--data-dir", n.dataDir,
	}, kafka...)
	args = append(args,
		"--http-addr", n.ports.HTTP,
		"--controller-addr", n.ports.Controller,
	)
	if n.voters != "" {
		args = append(args, "--controller-voters", n.voters)
	}
	args = append(args, n.args...)
	argv := append(append(slices.Clone(n.wrap), weirBin), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), n.env...)
	n.runs++
	fmt.Fprintf(n.output, "----- run %d: %s\n", n.runs, strings.Join(args, " "))
	cmd.Stdout = n.output
	cmd.Stderr = n.output
	// The node dies with the test binary, even when the test binary is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		n.t.Fatalf("node %d: start %s: %v", n.id, weirBin, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	n.proc = p
}

// waitHealthy polls /healthz until it answers 200, the process exits, or healthTimeout passes.
func (n *node) waitHealthy() {
	n.t.Helper()
	url := "http://" + n.ports.HTTP + "/healthz"
	client := &http.Client{Timeout: time.Second}
	if n.saslSSL != "" || strings.HasPrefix(n.protocol, "SASL") {
		// A node with a SASL listener serves HTTPS with its listeners' certificate (docs/security.md,
		// "HTTP"); the probe needs no credentials, and checks no certificate.
		url = "https://" + n.ports.HTTP + "/healthz"
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	}
	deadline := time.Now().Add(healthTimeout)
	var last string
	for time.Now().Before(deadline) {
		select {
		case <-n.proc.done:
			err := n.proc.err
			n.proc = nil
			n.t.Fatalf("node %d exited before serving: %v", n.id, err)
		default:
		}
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
	n.t.Fatalf("node %d: %s not 200 after %v (last: %s)", n.id, url, healthTimeout, last)
}

// kill sends SIGKILL and waits until the process is reaped.
func (n *node) kill() {
	n.t.Helper()
	if n.proc == nil {
		n.t.Fatalf("node %d: kill while not running", n.id)
	}
	n.signalAndWait(syscall.SIGKILL, killTimeout)
}

// terminate sends SIGTERM, waits for the process to exit on its own, and returns its exit status
// (nil for exit code 0). If it has not exited within exitTimeout the test fails and it is killed.
func (n *node) terminate() error {
	n.t.Helper()
	if n.proc == nil {
		n.t.Fatalf("node %d: terminate while not running", n.id)
	}
	p := n.proc
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		n.t.Fatalf("node %d: SIGTERM: %v", n.id, err)
	}
	select {
	case <-p.done:
		n.proc = nil
		return p.err
	case <-time.After(exitTimeout):
		n.signalAndWait(syscall.SIGKILL, killTimeout)
		n.t.Fatalf("node %d: still running %v after SIGTERM; killed", n.id, exitTimeout)
		return nil
	}
}

// restart starts the node again on the same data directory and ports.
func (n *node) restart() {
	n.t.Helper()
	n.start()
}

// alive reports whether the process is still running.
func (n *node) alive() bool {
	if n.proc == nil {
		return false
	}
	select {
	case <-n.proc.done:
		return false
	default:
		return true
	}
}

func (n *node) signalAndWait(sig syscall.Signal, timeout time.Duration) {
	p := n.proc
	n.proc = nil
	// The process may have exited already; the signal error then says so and Wait has the status.
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(timeout):
		n.t.Errorf("node %d: not reaped %v after %v", n.id, timeout, sig)
	}
}

// crashMarkers are what the Go runtime writes when a process panics, dies or races.
var crashMarkers = []string{"panic:", "fatal error:", "WARNING: DATA RACE"}

// checkOutput fails the test if any run of the node panicked or raced.
func (n *node) checkOutput() {
	n.t.Helper()
	out := n.output.String()
	for _, m := range crashMarkers {
		if strings.Contains(out, m) {
			n.t.Errorf("node %d output contains %q", n.id, m)
		}
	}
}

// client returns a franz-go client for the node, closed at t's cleanup.
func (n *node) client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl := n.newClient(t, opts...)
	t.Cleanup(cl.Close)
	return cl
}

// newClient returns a franz-go client for the node that the caller closes.
func (n *node) newClient(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := []kgo.Opt{
		kgo.SeedBrokers(n.kafkaAddr()),
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatalf("kgo client: %v", err)
	}
	return cl
}

// admin returns a kadm client for the node, closed at t's cleanup.
func (n *node) admin(t testing.TB) *kadm.Client {
	t.Helper()
	return kadm.NewClient(n.client(t))
}

// createTopic creates a topic with the given partition count, replication factor 1 and topic
// configs (none when nil).
func (n *node) createTopic(ctx context.Context, t testing.TB, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	cl := n.newClient(t)
	defer cl.Close()
	var cfg map[string]*string
	for k, v := range configs {
		if cfg == nil {
			cfg = map[string]*string{}
		}
		cfg[k] = &v
	}
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s (%d partitions): %v", topic, partitions, err)
	}
}

// readAll reads every record of the topic's partitions from their start to their end offset at the
// time of the call, by partition in offset order.
func (n *node) readAll(ctx context.Context, t testing.TB, topic string) map[int32][]*kgo.Record {
	t.Helper()
	return n.readAllAt(ctx, t, topic, kgo.ReadUncommitted())
}

// readAllAt is readAll at an isolation level. Transaction markers count towards the end offset and
// are left out of what it returns; with read_committed, no transaction may be open below the end.
func (n *node) readAllAt(ctx context.Context, t testing.TB, topic string, isolation kgo.IsolationLevel) map[int32][]*kgo.Record {
	t.Helper()
	admCl := n.newClient(t)
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("list end offsets of %s: %v", topic, err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		t.Fatalf("list start offsets of %s: %v", topic, err)
	}
	want := map[int32]int64{}
	parts := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		s, _ := starts.Lookup(topic, o.Partition)
		if o.Offset > s.Offset {
			want[o.Partition] = o.Offset
			parts[o.Partition] = kgo.NewOffset().At(s.Offset)
		}
	})
	out := map[int32][]*kgo.Record{}
	if len(want) == 0 {
		return out
	}
	cl := n.newClient(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.FetchMaxWait(500*time.Millisecond), kgo.FetchIsolationLevel(isolation), kgo.KeepControlRecords())
	defer cl.Close()
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: %v; still waiting for partitions up to end offsets %v", topic, ctx.Err(), want)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Errorf("read %s[%d]: %v", topic, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				out[r.Partition] = append(out[r.Partition], r)
			}
			if r.Offset+1 >= want[r.Partition] {
				delete(want, r.Partition)
			}
		})
		if t.Failed() {
			t.FailNow()
		}
	}
	return out
}

// logBuffer collects a process's output; it is written by exec's copying goroutines and read by
// the test.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testContext is the test's context bounded by d.
func testContext(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// requireTool returns the path of an external program, skipping the test when it is missing unless
// CI is set, where a missing tool is a failure (.ci/run installs them).
func requireTool(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not found under CI=true (.ci/run installs it): %v", name, err)
	}
	t.Skipf("%s not installed (apt-get install it, or run .ci/run): %v", name, err)
	return ""
}
