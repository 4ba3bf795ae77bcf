package deploy

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"

	"github.com/weir-mq/weir/internal/freeport"
)

// composeFile is the part of deploy/compose.yaml the tests read.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image           string `yaml:"image"`
	Build           struct{ Context, Dockerfile string }
	Hostname        string            `yaml:"hostname"`
	Environment     map[string]string `yaml:"environment"`
	Ports           []string          `yaml:"ports"`
	Volumes         []string          `yaml:"volumes"`
	StopGracePeriod string            `yaml:"stop_grace_period"`
}

func readCompose(t *testing.T) composeFile {
	t.Helper()
	raw, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	return c
}

// TestComposeFile checks what a cluster needs from the compose file: three nodes with distinct ids
// and host names, the same voter list naming each of them at its own host, a named volume at each
// node's data directory, the image built from the repository's Dockerfile, a stop grace period longer
// than the drain timeout, and Kafka published at the port each node advertises.
func TestComposeFile(t *testing.T) {
	c := readCompose(t)
	if len(c.Services) != 3 {
		t.Fatalf("compose.yaml has %d services, want 3", len(c.Services))
	}
	var voters string
	ids := map[string]bool{}
	for name, s := range c.Services {
		env := s.Environment
		if s.Hostname != name || ids[env["WEIR_NODE_ID"]] || env["WEIR_NODE_ID"] == "" {
			t.Errorf("%s: hostname %q, node id %q: want its own name and an id of its own", name, s.Hostname, env["WEIR_NODE_ID"])
		}
		ids[env["WEIR_NODE_ID"]] = true
		if voters == "" {
			voters = env["WEIR_CONTROLLER_VOTERS"]
		}
		if env["WEIR_CONTROLLER_VOTERS"] != voters {
			t.Errorf("%s: WEIR_CONTROLLER_VOTERS %q, want every node's the same (%q)", name, env["WEIR_CONTROLLER_VOTERS"], voters)
		}
		_, port, _ := net.SplitHostPort(env["WEIR_CONTROLLER_ADDR"])
		if self := env["WEIR_NODE_ID"] + "@" + name + ":" + port; !slices.Contains(strings.Split(voters, ","), self) {
			t.Errorf("%s: the voters %q lack %s", name, voters, self)
		}
		if _, ok := c.Volumes[name]; !ok || !slices.Contains(s.Volumes, name+":"+env["WEIR_DATA_DIR"]) {
			t.Errorf("%s: volumes %q, want the named volume %s at WEIR_DATA_DIR %s", name, s.Volumes, name, env["WEIR_DATA_DIR"])
		}
		host, kport, _ := net.SplitHostPort(env["WEIR_ADVERTISED_KAFKA_ADDR"])
		if host != name || !slices.Contains(s.Ports, kport+":"+kport) {
			t.Errorf("%s: advertises %q and publishes %q, want its own name and the advertised port published as is",
				name, env["WEIR_ADVERTISED_KAFKA_ADDR"], s.Ports)
		}
		if s.Build.Context != ".." || s.Build.Dockerfile != "Dockerfile" {
			t.Errorf("%s: build %+v, want the repository's Dockerfile", name, s.Build)
		}
		if d, err := time.ParseDuration(s.StopGracePeriod); err != nil || d <= 30*time.Second {
			t.Errorf("%s: stop_grace_period %q, want more than the 30s drain timeout", name, s.StopGracePeriod)
		}
	}
	if len(strings.Split(voters, ",")) != 3 {
		t.Errorf("voters %q, want the three nodes", voters)
	}
}

// hostPort matches the host:port values of the compose file's settings.
var hostPort = regexp.MustCompile(`([A-Za-z0-9.-]+):([0-9]+)`)

// TestComposeCluster starts the compose file's three nodes as processes, each with its service's
// environment (docker is not needed): every address moves to 127.0.0.1 on a free port, a node's
// wildcard listen addresses and the other nodes' host names alike, and WEIR_DATA_DIR to a temporary
// directory; every other variable is passed as written. The nodes must form one cluster: each answers
// the image's health probe (weir health), Metadata lists the three brokers, and a topic with three
// replicas takes an acks=all produce.
func TestComposeCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three weir processes")
	}
	c := readCompose(t)
	bin := buildWeir(t)
	ports := map[string]string{}
	remap := func(service, value string) string {
		return hostPort.ReplaceAllStringFunc(value, func(m string) string {
			host, port, _ := net.SplitHostPort(m)
			if host == "0.0.0.0" {
				host = service
			}
			if _, ok := c.Services[host]; !ok {
				return m
			}
			key := host + ":" + port
			if ports[key] == "" {
				ports[key] = freeAddr(t)
			}
			return ports[key]
		})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	var nodes []*process
	var seeds []string
	for name, s := range c.Services {
		env := []string{}
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "WEIR_") {
				env = append(env, kv)
			}
		}
		for k, v := range s.Environment {
			v = remap(name, v)
			if k == "WEIR_DATA_DIR" {
				v = filepath.Join(t.TempDir(), "data")
			}
			env = append(env, k+"="+v)
		}
		p := start(t, bin, name, env)
		p.http = remap(name, s.Environment["WEIR_HTTP_ADDR"])
		nodes = append(nodes, p)
		seeds = append(seeds, remap(name, s.Environment["WEIR_ADVERTISED_KAFKA_ADDR"]))
	}
	for _, p := range nodes {
		p.waitHealthy(ctx, t, bin)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	meta, err := adm.BrokerMetadata(ctx)
	if err != nil || len(meta.Brokers) != 3 {
		t.Fatalf("Metadata: brokers %v, err %v: want the three nodes", meta.Brokers, err)
	}
	created, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": new("2")}, "compose")
	if err == nil {
		err = created.Err
	}
	if err != nil {
		t.Fatalf("create a topic with three replicas: %v", err)
	}
	for {
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: "compose", Value: []byte("hello")}).FirstErr()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("acks=all produce to the new topic: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// buildWeir builds the weir binary into a temporary directory.
func buildWeir(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "weir")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "../cmd/weir")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// freeAddr returns a free loopback address below the ephemeral range (freeport), for a process
// started later.
func freeAddr(t *testing.T) string {
	t.Helper()
	addrs, err := freeport.Addrs(1)
	if err != nil {
		t.Fatal(err)
	}
	return addrs[0]
}

// process is one `weir serve` started by a test; its output is kept for the failure message.
type process struct {
	name string
	http string
	cmd  *exec.Cmd
	out  *syncBuffer
	// exited is closed when the process has exited, err set.
	exited chan struct{}
	err    error
}

// start runs `weir serve` with env and stops it when the test ends: SIGTERM, then SIGKILL if it has
// not drained within 20 s.
func start(t *testing.T, bin, name string, env []string) *process {
	t.Helper()
	p := &process{name: name, out: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, "serve")
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
			if p.err != nil {
				t.Errorf("%s exited with %v after SIGTERM", name, p.err)
			}
		case <-time.After(20 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
			t.Errorf("%s did not drain within 20s of SIGTERM", name)
		}
		if t.Failed() {
			t.Logf("%s's output:\n%s", name, p.out)
		}
	})
	return p
}

// waitHealthy runs the image's health probe (weir health) against the node until it passes.
func (p *process) waitHealthy(ctx context.Context, t *testing.T, bin string) {
	t.Helper()
	for {
		out, err := exec.CommandContext(ctx, bin, "health", "--http", p.http, "--timeout", "2s").CombinedOutput()
		if err == nil {
			return
		}
		select {
		case <-p.exited:
			t.Fatalf("%s exited (%v) before it served", p.name, p.err)
		case <-ctx.Done():
			t.Fatalf("%s not healthy: %s (%v)", p.name, bytes.TrimSpace(out), errors.Join(err, ctx.Err()))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// syncBuffer is a bytes.Buffer that a process's output and the test may use at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
