// Command bench runs weir and NATS JetStream side by side on this machine, in alternation (A B A B, at
// least three rounds), with the raw hardware measured in the same run, and writes a table of medians and
// an SVG chart to results/. It also compares weir with franz-go's in-memory fake cluster (kfake). With
// -kafka it compares weir with Apache Kafka instead (kafkavs.go), speed and cost.
//
//	cd bench && go run . [-quick] [-kafka] [-rounds 3] [-out results] [-dir $TMPDIR]
//
// It is a module of its own so that NATS stays out of weir's go.mod. Kafka-protocol targets (weir, kfake)
// are driven by `weir bench` built from the checkout; JetStream by github.com/nats-io/nats.go, against a
// nats-server built from the pinned module; kfake runs as a process of its own (./kfakeserver).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// recordSize is the value size of every workload (issue 7: 1 KiB records).
const recordSize = 1024

// e2eRate is workload 4's rate in records per second (lower when workload 2's calibrated rate is).
const e2eRate = 1000

// hardware is what the run measured of the machine itself once, before the rounds (the disk's write
// bandwidth is measured in every round instead: see diskAround).
type hardware struct {
	tcpMBs             float64 // one loopback TCP stream
	fsyncP50, fsyncP99 float64 // ms: a 1 KiB append and its fdatasync, at e2eRate
}

// sizes are a run's counts and durations.
type sizes struct {
	dur           time.Duration // workload 1 and the calibration
	latDur        time.Duration // workloads 2, 4 and 5's latency phase: long enough that one stall of the shared machine is not the p99
	consumeN      int           // workload 3
	scaleN        int           // workload 6: partitions / streams
	diskBytes     int64
	loopbackBytes int64
	settle        time.Duration // workload 6: idle time before reading RSS
	maxRecords    int           // caps every as-fast-as-possible produce (0: none), so -quick does not wait on slow fsyncs
}

var (
	fullSizes  = sizes{dur: 5 * time.Second, latDur: 15 * time.Second, consumeN: 1_000_000, scaleN: 10_000, diskBytes: 1 << 30, loopbackBytes: 4 << 30, settle: 2 * time.Second}
	quickSizes = sizes{dur: 400 * time.Millisecond, latDur: 400 * time.Millisecond, consumeN: 10_000, scaleN: 50, diskBytes: 64 << 20, loopbackBytes: 256 << 20, settle: 200 * time.Millisecond, maxRecords: 500}
)

// pairing is a durability match: "durable" is weir's default (fsync before ack) against JetStream's
// `sync_interval: always`; "fast" is weir's weir.flush.policy=never against JetStream's default.
type pairing struct {
	name         string
	weirArgs     []string
	natsAlways   bool
	rate2, rate4 float64 // workload 2 and 4 rates, set by calibration
	rate5        float64 // workload 5 rate (three nodes), set by calibration
}

func newPairings() []*pairing {
	return []*pairing{
		{name: "durable", natsAlways: true},
		{name: "fast", weirArgs: []string{"--topic-config", "weir.flush.policy=never"}},
	}
}

type harness struct {
	sz       sizes
	root     string
	weirBin  string
	natsBin  string
	fakeBin  string
	pairs    []*pairing
	table    *table
	nextDir  int
	rounds   int
	progress func(format string, args ...any)
}

func main() {
	quick := flag.Bool("quick", false, "small counts; finishes in well under a minute once the binaries are built")
	rounds := flag.Int("rounds", 3, "rounds; each runs every workload on weir, then JetStream, then kfake, then weir and JetStream on three nodes")
	out := flag.String("out", "results", "folder for <date>-<time>.md and .svg (empty: print only)")
	dir := flag.String("dir", os.TempDir(), "where the data folders go (the disk under test)")
	kafka := flag.Bool("kafka", false, "weir against Apache Kafka "+kafkaVersion+" (fetched with mvn, cached) instead of JetStream and kfake")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *quick, *kafka, *rounds, *out, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, quick, kafka bool, rounds int, out, dir string) error {
	if rounds < 1 {
		return errors.New("bench: -rounds must be at least 1")
	}
	began := time.Now()
	root, err := os.MkdirTemp(dir, "weir-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	h := &harness{sz: fullSizes, root: root, pairs: newPairings(), table: newTable(), rounds: rounds,
		progress: func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "%6.1fs  "+format+"\n", append([]any{time.Since(began).Seconds()}, args...)...)
		}}
	if quick {
		h.sz = quickSizes
	}
	if kafka {
		return runKafkaVs(ctx, h, quick, out)
	}
	if err := h.build(ctx, "weir", "nats-server", "kfake server"); err != nil {
		return err
	}
	h.progress("measuring the hardware")
	tcp, err := loopbackMBs(h.sz.loopbackBytes)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	fsyncLat, err := fsyncLatency(root, e2eRate, h.sz.dur)
	if err != nil {
		return fmt.Errorf("fsync latency: %w", err)
	}
	h.progress("calibrating rates for workloads 2 and 4")
	if err := h.calibrate(ctx); err != nil {
		return err
	}
	for r := range rounds {
		h.progress("round %d of %d: weir", r+1, rounds)
		if err := h.weirRound(ctx); err != nil {
			return fmt.Errorf("round %d, weir: %w", r+1, err)
		}
		h.progress("round %d of %d: JetStream", r+1, rounds)
		if err := h.natsRound(ctx); err != nil {
			return fmt.Errorf("round %d, JetStream: %w", r+1, err)
		}
		h.progress("round %d of %d: kfake", r+1, rounds)
		if err := h.fakeRound(ctx); err != nil {
			return fmt.Errorf("round %d, kfake: %w", r+1, err)
		}
		h.progress("round %d of %d: weir, three nodes", r+1, rounds)
		if err := h.weirClusterRound(ctx); err != nil {
			return fmt.Errorf("round %d, weir three nodes: %w", r+1, err)
		}
		h.progress("round %d of %d: JetStream, three nodes", r+1, rounds)
		if err := h.natsClusterRound(ctx); err != nil {
			return fmt.Errorf("round %d, JetStream three nodes: %w", r+1, err)
		}
	}
	rep := h.report(quick, hardware{tcpMBs: tcp, fsyncP50: fsyncLat.quantile(0.5), fsyncP99: fsyncLat.quantile(0.99)})
	fmt.Print(rep.markdown)
	return writeReport(out, "", quick, rep)
}

// build compiles the named binaries into the run's folder: weir from the checkout, nats-server from the
// pinned module, the kfake server from ./kfakeserver.
func (h *harness) build(ctx context.Context, names ...string) error {
	h.weirBin, h.natsBin, h.fakeBin = filepath.Join(h.root, "weir"), filepath.Join(h.root, "nats-server"), filepath.Join(h.root, "kfakeserver")
	for _, b := range []struct{ what, dir, out, pkg string }{
		{"weir", "..", h.weirBin, "./cmd/weir"},
		{"nats-server", ".", h.natsBin, "github.com/nats-io/nats-server/v2"},
		{"kfake server", ".", h.fakeBin, "./kfakeserver"},
	} {
		if !slices.Contains(names, b.what) {
			continue
		}
		h.progress("building %s", b.what)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", b.out, b.pkg)
		cmd.Dir, cmd.Stdout, cmd.Stderr = b.dir, os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("building %s: %w", b.what, err)
		}
	}
	return nil
}

// fresh returns a new, empty data folder.
func (h *harness) fresh(what string) string {
	h.nextDir++
	return filepath.Join(h.root, fmt.Sprintf("%s-%d", what, h.nextDir))
}

// calibrate measures each pairing's maximum publish rate once on both systems: workload 2 runs at half
// the lower of the two, workload 4 at a moderate 1,000 records/s or that rate, whichever is lower.
func (h *harness) calibrate(ctx context.Context) error {
	if err := h.calibrateSingle(ctx); err != nil {
		return err
	}
	return h.calibrateCluster(ctx)
}

func (h *harness) calibrateSingle(ctx context.Context) error {
	n, err := startWeir(ctx, h.weirBin, h.fresh("weir"))
	if err != nil {
		return err
	}
	defer n.stop()
	for _, p := range h.pairs {
		r, err := n.target(h.weirBin).bench(ctx, "produce", append(h.maxArgs("cal-"+p.name), p.weirArgs...)...)
		if err != nil {
			return err
		}
		js, err := h.natsPublishMax(ctx, p)
		if err != nil {
			return err
		}
		p.rate2 = min(r.RecordsPerSec, js) / 2
		p.rate4 = min(e2eRate, p.rate2)
		h.progress("  %s: weir %.0f/s, JetStream %.0f/s: workload 2 at %.0f/s, workload 4 at %.0f/s",
			p.name, r.RecordsPerSec, js, p.rate2, p.rate4)
	}
	return nil
}

// maxArgs are `weir bench produce` flags for an as-fast-as-possible run on topic.
func (h *harness) maxArgs(topic string) []string {
	args := []string{"--topic", topic, "--duration", h.sz.dur.String()}
	if h.sz.maxRecords > 0 {
		args = append(args, "--records", strconv.Itoa(h.sz.maxRecords))
	}
	return args
}

func (h *harness) natsPublishMax(ctx context.Context, p *pairing) (float64, error) {
	n, err := startNATS(ctx, h.natsBin, h.fresh("nats"), p.natsAlways)
	if err != nil {
		return 0, err
	}
	defer n.stop()
	c, err := n.client()
	if err != nil {
		return 0, err
	}
	defer c.close()
	if err := c.createStream(ctx, "cal"); err != nil {
		return 0, err
	}
	rate, _, err := c.publish(ctx, "cal", h.sz.maxRecords, h.sz.dur, 0)
	return rate, err
}

func rateArg(r float64) string { return strconv.FormatFloat(r, 'f', 0, 64) }

func (h *harness) weirRound(ctx context.Context) error {
	n, err := startWeir(ctx, h.weirBin, h.fresh("weir"))
	if err != nil {
		return err
	}
	defer n.stop()
	t := n.target(h.weirBin)
	pid := n.cmd.Process.Pid
	dur := h.sz.latDur.String()
	for _, p := range h.pairs {
		var r benchResult
		var cpu float64
		err := h.diskAround(p, func() (err error) {
			cpu, err = cpuDuring(pid, func() (err error) {
				r, err = t.bench(ctx, "produce", append(h.maxArgs("w1-"+p.name), p.weirArgs...)...)
				return err
			})
			return err
		})
		if err != nil {
			return err
		}
		h.table.add("cpugb-w1-"+p.name, sideWeir, cpu/gigabytes(r.Records))
		h.table.add("w1-"+p.name, sideWeir, r.RecordsPerSec)
		h.table.add("w1MBs-"+p.name, sideWeir, r.MBPerSec)
		r, err = t.bench(ctx, "produce", append([]string{"--topic", "w2-" + p.name, "--duration", dur, "--rate", rateArg(p.rate2)}, p.weirArgs...)...)
		if err != nil {
			return err
		}
		h.table.add("w2p50-"+p.name, sideWeir, r.Latency.P50)
		h.table.add("w2p99-"+p.name, sideWeir, r.Latency.P99)
		r, err = t.bench(ctx, "e2e", append([]string{"--topic", "w4-" + p.name, "--duration", dur, "--rate", rateArg(p.rate4)}, p.weirArgs...)...)
		if err != nil {
			return err
		}
		h.table.add("w4p50-"+p.name, sideWeir, r.Latency.P50)
		h.table.add("w4p99-"+p.name, sideWeir, r.Latency.P99)
	}
	var r benchResult
	cpu, err := cpuDuring(pid, func() (err error) {
		r, err = t.bench(ctx, "produce", "--topic", "w3", "--records", strconv.Itoa(h.sz.consumeN))
		return err
	})
	if err != nil {
		return err
	}
	h.table.add("cpugb-w3produce", sideWeir, cpu/gigabytes(r.Records))
	cpu, err = cpuDuring(pid, func() (err error) {
		r, err = t.bench(ctx, "consume", "--topic", "w3")
		return err
	})
	if err != nil {
		return err
	}
	h.table.add("w3", sideWeir, r.RecordsPerSec)
	h.table.add("cpugb-w3", sideWeir, cpu/gigabytes(r.Records))
	peak, err := peakRSSBytes(pid)
	if err != nil {
		return err
	}
	h.table.add("peakrss", sideWeir, float64(peak)/(1<<20))
	n.stop()
	return h.weirScale(ctx)
}

// diskAround measures the disk's fdatasync write bandwidth (diskWriteMBs) right before and right after
// run, and records the better of the two as this round's disk bandwidth for pairing p. On the virtual
// machines this runs on, the page cache writes several times faster into memory the host has already
// backed than into memory it has not (seen: 209 MB/s for the first GiB, 3.1 GB/s for the next after
// deleting it), and which of the two a write gets drifts within minutes; so the disk is measured beside
// each weir run, not once per run of the harness, and weir is held against the better of the two.
// JetStream's workload 1 follows the same write (diskNow), so both start from the same page cache.
func (h *harness) diskAround(p *pairing, run func() error) error {
	before, err := h.diskNow()
	if err != nil {
		return err
	}
	if err := run(); err != nil {
		return err
	}
	after, err := h.diskNow()
	if err != nil {
		return err
	}
	h.table.add("disk-"+p.name, sidePeer, max(before, after))
	return nil
}

// diskNow syncs the machine's dirty pages and measures the disk's fdatasync write bandwidth: every
// workload 1 run on weir or JetStream starts with it.
func (h *harness) diskNow() (float64, error) {
	settleDisk()
	mbs, err := diskWriteMBs(h.root, h.sz.diskBytes)
	if err != nil {
		return 0, fmt.Errorf("disk: %w", err)
	}
	return mbs, nil
}

// weirScale creates one topic of scaleN partitions on a fresh node, restarts the node and times how long
// until every partition answers ListOffsets, then reads its idle RSS.
func (h *harness) weirScale(ctx context.Context) error {
	dir := h.fresh("weir")
	n, err := startWeir(ctx, h.weirBin, dir)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.kafkaAddr))
	if err != nil {
		n.stop()
		return err
	}
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(600_000)
	start := time.Now()
	_, err = adm.CreateTopic(ctx, int32(h.sz.scaleN), 1, nil, "scale")
	if err == nil {
		err = h.weirPartitionsReady(ctx, adm)
	}
	created := time.Since(start)
	cl.Close()
	n.stop()
	if err != nil {
		return fmt.Errorf("scale: %w", err)
	}
	start = time.Now()
	n, err = startWeir(ctx, h.weirBin, dir)
	if err != nil {
		return err
	}
	defer n.stop()
	cl, err = kgo.NewClient(kgo.SeedBrokers(n.kafkaAddr))
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := h.weirPartitionsReady(ctx, kadm.NewClient(cl)); err != nil {
		return fmt.Errorf("scale restart: %w", err)
	}
	restarted := time.Since(start)
	rss, err := idleRSS(ctx, n.cmd.Process.Pid, h.sz.settle)
	if err != nil {
		return err
	}
	h.table.add("w6create", sideWeir, created.Seconds())
	h.table.add("w6start", sideWeir, restarted.Seconds())
	h.table.add("w6rss", sideWeir, float64(rss)/(1<<20))
	return nil
}

func (h *harness) weirPartitionsReady(ctx context.Context, adm *kadm.Client) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	for {
		offs, err := adm.ListEndOffsets(ctx, "scale")
		if err == nil && offs.Error() == nil && len(offs["scale"]) == h.sz.scaleN {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("partitions not ready: %w (last: %w)", ctx.Err(), errors.Join(err, offs.Error()))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// idleRSS waits for a process to settle and reads its resident memory.
func idleRSS(ctx context.Context, pid int, settle time.Duration) (int64, error) {
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(settle):
	}
	return rssBytes(pid)
}

func (h *harness) natsRound(ctx context.Context) error {
	for _, p := range h.pairs {
		if err := h.natsPairing(ctx, p); err != nil {
			return err
		}
	}
	return h.natsScale(ctx)
}

func (h *harness) natsPairing(ctx context.Context, p *pairing) error {
	n, err := startNATS(ctx, h.natsBin, h.fresh("nats"), p.natsAlways)
	if err != nil {
		return err
	}
	defer n.stop()
	c, err := n.client()
	if err != nil {
		return err
	}
	defer c.close()
	for _, s := range []string{"w1", "w2", "w3", "w4"} {
		if err := c.createStream(ctx, s); err != nil {
			return err
		}
	}
	if _, err := h.diskNow(); err != nil {
		return err
	}
	pid := n.cmd.Process.Pid
	var rate float64
	var lat *samples
	cpu, err := cpuDuring(pid, func() (err error) {
		rate, lat, err = c.publish(ctx, "w1", h.sz.maxRecords, h.sz.dur, 0)
		return err
	})
	if err != nil {
		return err
	}
	h.table.add("w1-"+p.name, sidePeer, rate)
	h.table.add("cpugb-w1-"+p.name, sidePeer, cpu/gigabytes(int64(lat.count())))
	_, lat, err = c.publish(ctx, "w2", 0, h.sz.latDur, p.rate2)
	if err != nil {
		return err
	}
	h.table.add("w2p50-"+p.name, sidePeer, lat.quantile(0.5))
	h.table.add("w2p99-"+p.name, sidePeer, lat.quantile(0.99))
	lat, err = c.e2e(ctx, "w4", h.sz.latDur, p.rate4)
	if err != nil {
		return err
	}
	h.table.add("w4p50-"+p.name, sidePeer, lat.quantile(0.5))
	h.table.add("w4p99-"+p.name, sidePeer, lat.quantile(0.99))
	if p.natsAlways {
		return nil
	}
	cpu, err = cpuDuring(pid, func() (err error) {
		_, lat, err = c.publish(ctx, "w3", h.sz.consumeN, 0, 0)
		return err
	})
	if err != nil {
		return err
	}
	h.table.add("cpugb-w3produce", sidePeer, cpu/gigabytes(int64(lat.count())))
	cpu, err = cpuDuring(pid, func() (err error) {
		rate, err = c.consumeAll(ctx, "w3", h.sz.consumeN)
		return err
	})
	if err != nil {
		return err
	}
	h.table.add("w3", sidePeer, rate)
	h.table.add("cpugb-w3", sidePeer, cpu/gigabytes(int64(h.sz.consumeN)))
	peak, err := peakRSSBytes(pid)
	if err != nil {
		return err
	}
	h.table.add("peakrss", sidePeer, float64(peak)/(1<<20))
	return nil
}

// natsScale creates scaleN file streams of one subject each (JetStream's unit of ordering, as a
// partition is weir's), restarts the server and times it until /healthz, then reads its idle RSS.
func (h *harness) natsScale(ctx context.Context) error {
	dir := h.fresh("nats")
	n, err := startNATS(ctx, h.natsBin, dir, false)
	if err != nil {
		return err
	}
	c, err := n.client()
	if err != nil {
		n.stop()
		return err
	}
	start := time.Now()
	for i := range h.sz.scaleN {
		if err = c.createStream(ctx, fmt.Sprintf("s%d", i)); err != nil {
			break
		}
	}
	created := time.Since(start)
	c.close()
	n.stop()
	if err != nil {
		return fmt.Errorf("scale: %w", err)
	}
	start = time.Now()
	n, err = startNATS(ctx, h.natsBin, dir, false)
	if err != nil {
		return err
	}
	defer n.stop()
	restarted := time.Since(start)
	rss, err := idleRSS(ctx, n.cmd.Process.Pid, h.sz.settle)
	if err != nil {
		return err
	}
	h.table.add("w6create", sidePeer, created.Seconds())
	h.table.add("w6start", sidePeer, restarted.Seconds())
	h.table.add("w6rss", sidePeer, float64(rss)/(1<<20))
	return nil
}

func (h *harness) fakeRound(ctx context.Context) error {
	f, err := startFake(ctx, h.fakeBin, h.fresh("kfake")+".log")
	if err != nil {
		return err
	}
	defer f.stop()
	t := f.target(h.weirBin)
	r, err := t.bench(ctx, "produce", h.maxArgs("w1")...)
	if err != nil {
		return err
	}
	h.table.add("fake-w1", sidePeer, r.RecordsPerSec)
	if _, err := t.bench(ctx, "produce", "--topic", "w3", "--records", strconv.Itoa(h.sz.consumeN)); err != nil {
		return err
	}
	r, err = t.bench(ctx, "consume", "--topic", "w3")
	if err != nil {
		return err
	}
	h.table.add("fake-w3", sidePeer, r.RecordsPerSec)
	return nil
}

// median of a non-empty slice (the upper middle for even lengths).
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func machine() string {
	return fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
}
