package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsNode is one nats-server process with JetStream on loopback and its own store folder.
type natsNode struct {
	cmd     *exec.Cmd
	name    string // server_name, as StreamInfo names the stream leader
	url     string
	healthz string
}

// startNATS writes a config file and starts the server. syncAlways sets JetStream's `sync_interval:
// always` (fsync after every write); otherwise the server's default applies (sync every 2 minutes).
func startNATS(ctx context.Context, bin, dir string, syncAlways bool) (*natsNode, error) {
	n, err := launchNATS(bin, dir, "n1", freeAddr(), freeAddr(), syncAlways, "")
	if err != nil {
		return nil, err
	}
	if err := waitHealthy(ctx, n.healthz); err != nil {
		n.stop()
		return nil, fmt.Errorf("nats-server: %w", err)
	}
	return n, nil
}

// launchNATS writes the server's config file (with cluster, when not empty, as its cluster block) and
// starts it without waiting.
func launchNATS(bin, dir, name, addr, monitor string, syncAlways bool, cluster string) (*natsNode, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf("server_name: %q\nlisten: %q\nhttp: %q\njetstream {\n  store_dir: %q\n", name, addr, monitor, filepath.Join(dir, "store"))
	if syncAlways {
		conf += "  sync_interval: always\n"
	}
	conf += "}\n" + cluster
	confPath := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "nats.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "-c", confPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &natsNode{cmd: cmd, name: name, url: "nats://" + addr, healthz: "http://" + monitor + "/healthz"}, nil
}

func (n *natsNode) stop() { stopProcess(n.cmd) }

func (n *natsNode) client() (*jsClient, error) { return dialJS(n.url) }

// natsCluster is nats-server processes joined by cluster routes on loopback, JetStream on each.
type natsCluster struct{ nodes []*natsNode }

// startNATSCluster starts n servers named n1..nN in fresh folders dir-1 .. dir-n, each routing to all
// the others, and waits until each answers /healthz (which, clustered, needs a JetStream meta leader).
func startNATSCluster(ctx context.Context, bin, dir string, n int, syncAlways bool) (*natsCluster, error) {
	routes := make([]string, n)
	clusterAddrs := make([]string, n)
	for i := range n {
		clusterAddrs[i] = freeAddr()
		routes[i] = fmt.Sprintf("%q", "nats-route://"+clusterAddrs[i])
	}
	c := &natsCluster{}
	for i := range n {
		block := fmt.Sprintf("cluster {\n  name: bench\n  listen: %q\n  routes: [%s]\n}\n", clusterAddrs[i], strings.Join(routes, ", "))
		node, err := launchNATS(bin, fmt.Sprintf("%s-%d", dir, i+1), fmt.Sprintf("n%d", i+1), freeAddr(), freeAddr(), syncAlways, block)
		if err != nil {
			c.stop()
			return nil, err
		}
		c.nodes = append(c.nodes, node)
	}
	for _, node := range c.nodes {
		if err := waitHealthy(ctx, node.healthz); err != nil {
			c.stop()
			return nil, fmt.Errorf("nats-server cluster: %w", err)
		}
	}
	return c, nil
}

// stop stops every server, all at once.
func (c *natsCluster) stop() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(n.stop)
	}
	wg.Wait()
}

// createStream makes a file stream named name of `replicas` replicas, retrying while the cluster is
// still placing its peers, and returns a client connected to the stream's leader, as a Kafka client
// talks to the partition leader.
func (c *natsCluster) createStream(ctx context.Context, name string, replicas int) (*jsClient, error) {
	admin, err := dialJS(c.nodes[0].url)
	if err != nil {
		return nil, err
	}
	defer admin.close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cfg := jetstream.StreamConfig{Name: name, Subjects: []string{name}, Storage: jetstream.FileStorage, Replicas: replicas}
	for {
		_, err = admin.js.CreateStream(ctx, cfg)
		if err == nil || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return c.leaderClient(ctx, admin, name)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("stream %s: %w (last: %w)", name, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// leaderClient waits until stream name has a leader and connects to it.
func (c *natsCluster) leaderClient(ctx context.Context, admin *jsClient, name string) (*jsClient, error) {
	for {
		s, err := admin.js.Stream(ctx, name)
		if err == nil {
			if ci := s.CachedInfo().Cluster; ci != nil {
				for _, n := range c.nodes {
					if n.name == ci.Leader {
						return dialJS(n.url)
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("stream %s has no leader: %w", name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// jsClient is one connection and its JetStream context.
type jsClient struct {
	nc *nats.Conn
	js jetstream.JetStream
}

// maxPending matches kgo's default of 10,000 buffered records.
const maxPending = 10_000

func dialJS(url string) (*jsClient, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(maxPending))
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &jsClient{nc: nc, js: js}, nil
}

func (c *jsClient) close() { c.nc.Close() }

// createStream makes a file-backed stream named name holding subject name, one replica.
func (c *jsClient) createStream(ctx context.Context, name string) error {
	_, err := c.js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name}, Storage: jetstream.FileStorage})
	return err
}

// samples collects exact latencies; the peer's percentiles come from the sorted samples.
type samples struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *samples) add(d time.Duration) {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
}

// count is how many latencies were added.
func (s *samples) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.d)
}

// quantile returns the q-quantile in milliseconds.
func (s *samples) quantile(q float64) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.d) == 0 {
		return 0
	}
	slices.Sort(s.d)
	i := min(int(q*float64(len(s.d))), len(s.d)-1)
	return float64(s.d[i]) / float64(time.Millisecond)
}

// publish sends 1 KiB messages to subject with PublishAsync until count are sent (count > 0) or dur
// passes, at rate per second (0: as fast as the pending window allows), and waits for every ack. Each
// value starts with its send time. It settles the disk first and returns acked messages per second and
// the ack latencies.
func (c *jsClient) publish(ctx context.Context, subject string, count int, dur time.Duration, rate float64) (float64, *samples, error) {
	settleDisk()
	lat := &samples{}
	type sent struct {
		f  jetstream.PubAckFuture
		at time.Time
	}
	futures := make(chan sent, maxPending)
	var acked atomic.Int64
	var firstErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		for s := range futures {
			select {
			case <-s.f.Ok():
				lat.add(time.Since(s.at))
				acked.Add(1)
			case err := <-s.f.Err():
				if firstErr == nil {
					firstErr = err
				}
			}
		}
	})
	start := time.Now()
	deadline := start.Add(dur)
	for i := 0; (count == 0 || i < count) && (dur == 0 || time.Now().Before(deadline)); i++ {
		if rate > 0 {
			if d := time.Until(start.Add(time.Duration(float64(i) * float64(time.Second) / rate))); d > 0 {
				time.Sleep(d)
			}
		}
		value := make([]byte, recordSize)
		now := time.Now()
		binary.BigEndian.PutUint64(value, uint64(now.UnixNano()))
		f, err := c.js.PublishAsync(subject, value, jetstream.WithStallWait(time.Minute))
		if err != nil {
			close(futures)
			wg.Wait()
			return 0, nil, fmt.Errorf("publish: %w", err)
		}
		futures <- sent{f: f, at: now}
	}
	close(futures)
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return 0, nil, fmt.Errorf("publish ack: %w", firstErr)
	}
	if ctx.Err() != nil {
		return 0, nil, ctx.Err()
	}
	return float64(acked.Load()) / elapsed.Seconds(), lat, nil
}

// consumeAll reads count messages from the start of stream with an ordered consumer and returns
// messages per second, timed from the first message to the last; it settles the disk first.
func (c *jsClient) consumeAll(ctx context.Context, stream string, count int) (float64, error) {
	settleDisk()
	cons, err := c.js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return 0, err
	}
	it, err := cons.Messages()
	if err != nil {
		return 0, err
	}
	defer it.Stop()
	var start time.Time
	for i := range count {
		if _, err := it.Next(); err != nil {
			return 0, fmt.Errorf("after %d messages: %w", i, err)
		}
		if i == 0 {
			start = time.Now()
		}
	}
	return float64(count-1) / time.Since(start).Seconds(), nil
}

// e2e publishes at rate for dur to a fresh stream while an ordered consumer reads it from the start,
// and returns the produce-to-consume latencies from the timestamp in each message.
func (c *jsClient) e2e(ctx context.Context, stream string, dur time.Duration, rate float64) (*samples, error) {
	cons, err := c.js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, err
	}
	lat := &samples{}
	var got atomic.Int64
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if d := m.Data(); len(d) >= 8 {
			lat.add(time.Duration(time.Now().UnixNano() - int64(binary.BigEndian.Uint64(d))))
		}
		got.Add(1)
	})
	if err != nil {
		return nil, err
	}
	defer cc.Stop()
	_, acks, err := c.publish(ctx, stream, 0, dur, rate)
	if err != nil {
		return nil, err
	}
	want := int64(len(acks.d))
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for got.Load() < want {
		select {
		case <-waitCtx.Done():
			return nil, errors.New("e2e: consumer did not catch up within 30s")
		case <-time.After(10 * time.Millisecond):
		}
	}
	return lat, nil
}
