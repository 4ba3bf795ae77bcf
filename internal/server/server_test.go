package server_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/freeport"
	"github.com/weir-mq/weir/internal/server"
)

const testTimeout = 30 * time.Second

func testConfig(dir string) server.Config {
	cfg := server.DefaultConfig()
	cfg.DataDir = dir
	cfg.KafkaAddr = "127.0.0.1:0"
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.ControllerAddr = "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return cfg
}

func start(t *testing.T, cfg server.Config) *server.Node {
	t.Helper()
	n, err := server.Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func client(t *testing.T, n *server.Node, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.KafkaAddr()), kgo.ProducerLinger(0)}, opts...)...)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestServerRestartKeepsData(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	n := start(t, cfg)
	ctx := testCtx(t)
	adm := kadm.NewClient(client(t, n))
	if _, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"retention.ms": kadm.StringPtr("86400000")}, "kept"); err != nil {
		t.Fatalf("create: %v", err)
	}
	cl := client(t, n, kgo.DefaultProduceTopic("kept"))
	offsets := map[string]int64{}
	for i := range 60 {
		r := &kgo.Record{Key: []byte("k" + strconv.Itoa(i%6)), Value: []byte("v" + strconv.Itoa(i))}
		res, err := cl.ProduceSync(ctx, r).First()
		if err != nil {
			t.Fatalf("produce: %v", err)
		}
		offsets[string(res.Value)] = res.Offset
	}
	if err := n.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	for p := range 3 {
		if _, err := os.Stat(filepath.Join(dir, "kept-"+strconv.Itoa(p), "clean-shutdown")); err != nil {
			t.Errorf("partition %d has no clean-shutdown marker: %v", p, err)
		}
	}

	n2 := start(t, cfg)
	adm2 := kadm.NewClient(client(t, n2))
	rcs, err := adm2.DescribeTopicConfigs(ctx, "kept")
	if err != nil {
		t.Fatalf("describe: %v", err)
	}
	if c, err := rcs[0].Configs, rcs[0].Err; err != nil || !hasConfig(c, "retention.ms", "86400000") {
		t.Fatalf("retention.ms after restart: %v %+v", err, c)
	}
	cons := client(t, n2, kgo.ConsumeTopics("kept"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := 0
	for seen < 60 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 60 after restart", seen)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		for _, r := range fs.Records() {
			if want, ok := offsets[string(r.Value)]; !ok || want != r.Offset {
				t.Fatalf("record %q at offset %d after restart, acknowledged at %d", r.Value, r.Offset, want)
			}
			seen++
		}
	}

	// Idempotent producer state survives too: new appends continue the offsets.
	more := client(t, n2, kgo.DefaultProduceTopic("kept"))
	if err := more.ProduceSync(ctx, &kgo.Record{Key: []byte("k0"), Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("produce after restart: %v", err)
	}
}

func hasConfig(cs []kadm.Config, key, value string) bool {
	for _, c := range cs {
		if c.Key == key {
			return c.MaybeValue() == value
		}
	}
	return false
}

func TestServerHealthz(t *testing.T) {
	n := start(t, testConfig(t.TempDir()))
	for _, path := range []string{"/healthz", "/readyz"} {
		req, err := http.NewRequestWithContext(testCtx(t), http.MethodGet, "http://"+n.HTTPAddr()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s status %d", path, resp.StatusCode)
		}
	}
}

func TestServerMetaProperties(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	n := start(t, cfg)
	if err := n.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "meta.properties"))
	if err != nil {
		t.Fatalf("meta.properties: %v", err)
	}
	for _, want := range []string{"version=1", "node.id=1", "cluster.id="} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("meta.properties lacks %q:\n%s", want, b)
		}
	}

	other := cfg
	other.NodeID = 2
	if _, err := server.Start(t.Context(), other); !errors.Is(err, server.ErrBadDataDir) {
		t.Fatalf("node 2 on node 1's directory: %v, want ErrBadDataDir", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "meta.properties"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := server.Start(t.Context(), cfg); !errors.Is(err, server.ErrBadDataDir) {
		t.Fatalf("garbled meta.properties: %v, want ErrBadDataDir", err)
	}
}

func TestServerConfigErrors(t *testing.T) {
	cfg := testConfig(t.TempDir())
	for _, voters := range []string{"1", "x@127.0.0.1:9093", "1@127.0.0.1:9093,1@127.0.0.1:9094", "1@nohostport"} {
		cfg.ControllerVoters = voters
		if _, err := server.Start(t.Context(), cfg); !errors.Is(err, server.ErrBadConfig) {
			t.Fatalf("voters %q: %v, want ErrBadConfig", voters, err)
		}
	}
	// This node as the one voter, named explicitly: the same as no voters.
	cfg.ControllerAddr = freeAddr(t)
	cfg.ControllerVoters = "1@" + cfg.ControllerAddr
	n := start(t, cfg)
	if err := n.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := n.Close(); !errors.Is(err, server.ErrClosed) {
		t.Fatalf("second close: %v, want ErrClosed", err)
	}
}

// TestServerRefusesLocalStoreDir: a data directory written by the single-node file store of an
// earlier weir is refused rather than started on an empty image.
func TestServerRefusesLocalStoreDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "controller"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "controller", "metadata.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := server.Start(t.Context(), testConfig(dir)); !errors.Is(err, server.ErrBadDataDir) {
		t.Fatalf("start on a local-store directory: %v, want ErrBadDataDir", err)
	}
}

// TestServerNotReady: a voter whose quorum never forms gives up when Start's context ends, and
// serves /v1/cluster/status meanwhile.
func TestServerNotReady(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.ControllerAddr = freeAddr(t)
	cfg.ControllerVoters = "1@" + cfg.ControllerAddr + ",2@" + freeAddr(t) + ",3@" + freeAddr(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if _, err := server.Start(ctx, cfg); !errors.Is(err, server.ErrNotReady) {
		t.Fatalf("start without a quorum: %v, want ErrNotReady", err)
	}
}

// freeAddr returns a free loopback address below the ephemeral range (freeport).
func freeAddr(t *testing.T) string {
	t.Helper()
	addrs, err := freeport.Addrs(1)
	if err != nil {
		t.Fatal(err)
	}
	return addrs[0]
}

// startVoters starts three nodes that are each other's controller voters, each from the config
// configure returns for its index given its id, controller address and voters, and closes them when
// the test ends. The addresses are picked free and bound later, so another test's explicit bind can
// still take one in between: a start that finds its address in use is tried again on fresh
// addresses, twice at most.
func startVoters(ctx context.Context, t *testing.T, configure func(i int, cfg server.Config) server.Config) []*server.Node {
	t.Helper()
	for attempt := 1; ; attempt++ {
		addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
		voters := "1@" + addrs[0] + ",2@" + addrs[1] + ",3@" + addrs[2]
		nodes := make([]*server.Node, 3)
		errs := make(chan error, 3)
		for i := range nodes {
			cfg := testConfig(t.TempDir())
			cfg.NodeID = int32(i + 1)
			cfg.ControllerAddr = addrs[i]
			cfg.ControllerVoters = voters
			cfg = configure(i, cfg)
			go func() {
				n, err := server.Start(ctx, cfg)
				nodes[i] = n
				errs <- err
			}()
		}
		var err error
		for range nodes {
			err = cmp.Or(err, <-errs)
		}
		if err == nil {
			for _, n := range nodes {
				t.Cleanup(func() { _ = n.Close() })
			}
			return nodes
		}
		for _, n := range nodes {
			if n != nil {
				_ = n.Close()
			}
		}
		if !errors.Is(err, syscall.EADDRINUSE) || attempt == 3 {
			t.Fatalf("start: %v", err)
		}
		t.Logf("start: %v; again on fresh addresses", err)
	}
}

func TestServerShutdownAnswersParkedFetch(t *testing.T) {
	n := start(t, testConfig(t.TempDir()))
	ctx := testCtx(t)
	if _, err := kadm.NewClient(client(t, n)).CreateTopic(ctx, 1, 1, nil, "quiet"); err != nil {
		t.Fatalf("create: %v", err)
	}
	// A consumer long-polling an empty topic: its fetch is parked when the node shuts down.
	cons := client(t, n, kgo.ConsumeTopics("quiet"), kgo.FetchMaxWait(5*time.Minute))
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		cons.PollFetches(ctx)
	}()
	// Shutdown must not wait out the five-minute poll; the bound here is the test's own timeout.
	shutCtx, cancel := context.WithTimeout(ctx, testTimeout)
	defer cancel()
	if err := n.Shutdown(shutCtx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	cons.Close()
	<-polled
}

func TestServerRun(t *testing.T) {
	cfg := testConfig(t.TempDir())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- server.Run(ctx, cfg) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-testCtx(t).Done():
		t.Fatal("Run did not return after its context was cancelled")
	}
}

// TestServerClusterStatus: a single node is the controller leader and the one voter, registered
// and unfenced.
func TestServerClusterStatus(t *testing.T) {
	n := start(t, testConfig(t.TempDir()))
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodGet, "http://"+n.HTTPAddr()+"/v1/cluster/status", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("cluster status: %v", err)
	}
	defer resp.Body.Close()
	var st server.ClusterStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("cluster status: %s, %v", resp.Status, err)
	}
	c := st.Controller
	if !st.Ready || st.ClusterID == "" || c == nil || c.ControllerID != 1 || len(c.Nodes) != 1 {
		t.Fatalf("cluster status %+v, controller %+v", st, c)
	}
	if ns := c.Nodes[0]; !ns.Voter || !ns.Registered || ns.Fenced || ns.RaftState != "Leader" {
		t.Fatalf("node status %+v", ns)
	}
}
