package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// benchResult is the part of `weir bench --json` the harness reads.
type benchResult struct {
	Records       int64   `json:"records"`
	Errors        int64   `json:"errors"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	Latency       *struct {
		P50 float64 `json:"p50"`
		P99 float64 `json:"p99"`
	} `json:"latency_ms"`
}

// kafkaTarget is anything speaking the Kafka protocol that `weir bench` (built from this checkout) drives.
type kafkaTarget struct {
	weirBin string
	brokers string
}

// unknownTopicRetries bounds how often bench starts `weir bench` again when it stopped before sending
// anything because the broker it asked had not yet learnt of a topic created a moment earlier.
const unknownTopicRetries = 100

// bench runs `weir bench MODE` with the given flags and returns its JSON summary. It settles the disk
// first.
func (k kafkaTarget) bench(ctx context.Context, mode string, args ...string) (benchResult, error) {
	settleDisk()
	full := append([]string{"bench", mode, "--brokers", k.brokers, "--json", "--interval", "0", "--timeout", "30s",
		"--size", strconv.Itoa(recordSize), "--linger", "0s"}, args...)
	var out, errOut bytes.Buffer
	var err error
	for range unknownTopicRetries {
		out.Reset()
		errOut.Reset()
		cmd := exec.CommandContext(ctx, k.weirBin, full...)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err = cmd.Run()
		if err == nil || out.Len() > 0 || !strings.Contains(errOut.String(), "UNKNOWN_TOPIC_OR_PARTITION") {
			break
		}
		select {
		case <-ctx.Done():
			return benchResult{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	var res benchResult
	if jerr := json.Unmarshal(out.Bytes(), &res); jerr != nil {
		return res, fmt.Errorf("weir %v: %w: %s", full, err, errOut.String())
	}
	if err != nil {
		return res, fmt.Errorf("weir %v: %w: %s", full, err, errOut.String())
	}
	return res, nil
}

// weirNode is one `weir serve` process on loopback with its own data folder.
type weirNode struct {
	cmd                *exec.Cmd
	kafkaAddr, httpURL string
}

// startWeir starts a single-node weir (its own one-voter controller) and waits until it is healthy.
func startWeir(ctx context.Context, bin, dir string) (*weirNode, error) {
	n, err := launchWeir(bin, dir, freeAddr(), freeAddr(), freeAddr())
	if err != nil {
		return nil, err
	}
	if err := waitHealthy(ctx, n.httpURL); err != nil {
		n.stop()
		return nil, fmt.Errorf("weir: %w", err)
	}
	return n, nil
}

// launchWeir starts `weir serve` on the given addresses with extra flags and does not wait for it.
func launchWeir(bin, dir, kafkaAddr, httpAddr, ctlAddr string, extra ...string) (*weirNode, error) {
	args := append([]string{"serve", "--data-dir", dir, "--kafka-addr", kafkaAddr, "--http-addr", httpAddr,
		"--controller-addr", ctlAddr}, extra...)
	cmd := exec.Command(bin, args...)
	logf, err := os.Create(filepath.Join(filepath.Dir(dir), filepath.Base(dir)+".log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &weirNode{cmd: cmd, kafkaAddr: kafkaAddr, httpURL: "http://" + httpAddr + "/healthz"}, nil
}

func (n *weirNode) target(bin string) kafkaTarget {
	return kafkaTarget{weirBin: bin, brokers: n.kafkaAddr}
}

// stop asks the node to shut down cleanly and waits for it.
func (n *weirNode) stop() { stopProcess(n.cmd) }

// stopProcess sends SIGTERM and waits up to 30 s for the process to exit before killing it.
func stopProcess(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// weirCluster is three weir nodes on loopback, each a Raft voter of the controller and a broker.
type weirCluster struct{ nodes []*weirNode }

// startWeirCluster starts n nodes in fresh data folders dir-1 .. dir-n and waits until each is healthy
// (a controller leader is elected and the node's broker registration is applied on it).
func startWeirCluster(ctx context.Context, bin, dir string, n int) (*weirCluster, error) {
	type addrs struct{ kafka, http, ctl string }
	as := make([]addrs, n)
	voters := make([]string, n)
	for i := range as {
		as[i] = addrs{freeAddr(), freeAddr(), freeAddr()}
		voters[i] = fmt.Sprintf("%d@%s", i+1, as[i].ctl)
	}
	c := &weirCluster{}
	for i, a := range as {
		node, err := launchWeir(bin, fmt.Sprintf("%s-%d", dir, i+1), a.kafka, a.http, a.ctl,
			"--node-id", strconv.Itoa(i+1), "--controller-voters", strings.Join(voters, ","))
		if err != nil {
			c.stop()
			return nil, err
		}
		c.nodes = append(c.nodes, node)
	}
	for _, node := range c.nodes {
		if err := waitHealthy(ctx, node.httpURL); err != nil {
			c.stop()
			return nil, fmt.Errorf("weir cluster: %w", err)
		}
	}
	return c, nil
}

// brokers is every node's Kafka address, comma-separated.
func (c *weirCluster) brokers() string {
	s := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		s[i] = n.kafkaAddr
	}
	return strings.Join(s, ",")
}

func (c *weirCluster) target(bin string) kafkaTarget {
	return kafkaTarget{weirBin: bin, brokers: c.brokers()}
}

// stop stops every node, all at once.
func (c *weirCluster) stop() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(n.stop)
	}
	wg.Wait()
}

// createTopic creates a one-partition topic with replication factor rf and the given configs through
// the cluster, then waits until its leader answers ListOffsets and its ISR holds all rf replicas: a new
// topic reaches the brokers through the metadata log a moment after CreateTopics returns.
func (c *weirCluster) createTopic(ctx context.Context, topic string, rf int16, configs map[string]*string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.brokers(), ",")...), kgo.MetadataMinAge(20*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, rf, configs, topic); err != nil {
		return fmt.Errorf("create %s: %w", topic, err)
	}
	for {
		offs, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = offs.Error()
		}
		if err == nil {
			var td kadm.TopicDetails
			td, err = adm.ListTopics(ctx, topic)
			if err == nil && fullISR(td, topic, int(rf)) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s not ready: %w (last: %w)", topic, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func fullISR(td kadm.TopicDetails, topic string, rf int) bool {
	t, ok := td[topic]
	if !ok || t.Err != nil || len(t.Partitions) == 0 {
		return false
	}
	for _, p := range t.Partitions {
		if p.Err != nil || p.Leader < 0 || len(p.ISR) < rf {
			return false
		}
	}
	return true
}

// fakeServer is franz-go's in-memory Kafka (kfake, one broker, no disk) run as its own process by
// ./kfakeserver, so that its heap and CPU are not shared with the harness.
type fakeServer struct {
	cmd  *exec.Cmd
	addr string
}

func startFake(ctx context.Context, bin, logPath string) (*fakeServer, error) {
	addr := freeAddr()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "-port", port)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	f := &fakeServer{cmd: cmd, addr: addr}
	if err := waitListening(ctx, addr); err != nil {
		f.stop()
		return nil, fmt.Errorf("kfake: %w", err)
	}
	return f, nil
}

func (f *fakeServer) target(bin string) kafkaTarget {
	return kafkaTarget{weirBin: bin, brokers: f.addr}
}

func (f *fakeServer) stop() { stopProcess(f.cmd) }

// waitListening dials addr until it accepts a connection, for up to a minute.
func waitListening(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return c.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not listening: %w", addr, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("no free loopback port: %v", err))
	}
	defer l.Close()
	return l.Addr().String()
}

// waitHealthy polls url until it answers 200, for up to a minute.
func waitHealthy(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not healthy: %w", url, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
