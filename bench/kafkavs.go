package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The -kafka mode: weir against Apache Kafka on the same machine, alternating rounds (a fresh weir and a
// fresh Kafka, at least three times, which goes first alternating from round to round), both driven by
// `weir bench` (franz-go) and, as a second load generator, by Kafka's own ProducerPerformance and
// ConsumerPerformance. Beside records/s it reads each broker process's CPU time (utime and stime) before
// and after every measured phase and its resident memory, so that the report gives CPU seconds per GB
// produced and consumed, CPU per record, idle and peak RSS and the time from the process's start to
// serving a producer.

// kafkaSizes are the -kafka mode's counts and durations.
type kafkaSizes struct {
	dur        time.Duration // each as-fast-as-possible produce of the partition scaling row
	latDur     time.Duration // each end-to-end latency phase
	warm       time.Duration // the untimed produce that warms each broker (the JVM's JIT above all) before measuring
	consumeN   int           // records produced, then consumed from the start
	perfN      int           // records ProducerPerformance sends and ConsumerPerformance reads
	partitions []int         // the partition scaling row
	settle     time.Duration // idle time after serving, before reading the idle RSS
}

var (
	fullKafkaSizes  = kafkaSizes{dur: 5 * time.Second, latDur: 10 * time.Second, warm: 3 * time.Second, consumeN: 500_000, perfN: 200_000, partitions: []int{4, 64, 512, 4096}, settle: 2 * time.Second}
	quickKafkaSizes = kafkaSizes{dur: 500 * time.Millisecond, latDur: 500 * time.Millisecond, warm: 200 * time.Millisecond, consumeN: 5_000, perfN: 2_000, partitions: []int{4}, settle: 200 * time.Millisecond}
)

// brokerConfig is one durability setting of a system: topic configs every topic of the setting gets.
type brokerConfig struct {
	name    string
	configs map[string]string
}

// system is one broker under test: weir (sideWeir) or Apache Kafka (sidePeer), with its two
// durability settings, the first being its default.
type system struct {
	name    string
	side    side
	configs []brokerConfig
	start   func(ctx context.Context, dir string) (*runningBroker, error)
}

// runningBroker is a started broker process, not yet known to serve.
type runningBroker struct {
	pid  int
	addr string
	stop func()
}

// Durability settings. weir's default fsyncs before it acknowledges (group commit); `never` leaves
// writeback to the kernel. Kafka's default never fsyncs on the produce path (it relies on replication);
// flush.messages=1 fsyncs the partition's log after every appended batch, before the acknowledgement.
var (
	weirDurable  = brokerConfig{name: "durable"}
	weirNever    = brokerConfig{name: "never", configs: map[string]string{"weir.flush.policy": "never"}}
	kafkaDefault = brokerConfig{name: "default"}
	kafkaFlush1  = brokerConfig{name: "flush1", configs: map[string]string{"flush.messages": "1"}}
)

// kafkaHarness runs the -kafka mode.
type kafkaHarness struct {
	*harness
	ksz   kafkaSizes
	kafka apacheKafka
	// failed lists the scaling row's phases a broker failed, for the report.
	failed []string
}

// runKafkaVs fetches Apache Kafka (or finds it cached), measures the disk's 1 KiB append+fdatasync
// latency, runs the rounds and writes the report to out.
func runKafkaVs(ctx context.Context, h *harness, quick bool, out string) error {
	k := &kafkaHarness{harness: h, ksz: fullKafkaSizes}
	if quick {
		k.ksz = quickKafkaSizes
	}
	if err := h.build(ctx, "weir"); err != nil {
		return err
	}
	libs, err := fetchKafka(ctx, h.progress)
	if err != nil {
		return err
	}
	java, err := javaBin()
	if err != nil {
		return fmt.Errorf("Apache Kafka needs java: %w", err)
	}
	k.kafka = apacheKafka{java: java, libs: libs}
	h.progress("measuring the disk's 1 KiB append+fdatasync latency")
	fsyncLat, err := fsyncLatency(h.root, e2eRate, h.sz.dur)
	if err != nil {
		return fmt.Errorf("fsync latency: %w", err)
	}
	systems := []*system{
		{name: "weir", side: sideWeir, configs: []brokerConfig{weirDurable, weirNever}, start: k.startWeir},
		{name: "Kafka", side: sidePeer, configs: []brokerConfig{kafkaDefault, kafkaFlush1}, start: k.startKafka},
	}
	for r := range h.rounds {
		// Which system goes first alternates: what a round writes changes what the next one's page
		// cache costs (docs/bench.md, "What the page cache costs here").
		order := slices.Clone(systems)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, s := range order {
			h.progress("round %d of %d: %s", r+1, h.rounds, s.name)
			if err := k.round(ctx, s); err != nil {
				return fmt.Errorf("round %d, %s: %w", r+1, s.name, err)
			}
		}
	}
	rep := k.report(quick, fsyncLat.quantile(0.5), fsyncLat.quantile(0.99))
	fmt.Print(rep.markdown)
	return writeReport(out, "kafka", quick, rep)
}

func (k *kafkaHarness) startWeir(_ context.Context, dir string) (*runningBroker, error) {
	n, err := launchWeir(k.weirBin, dir, freeAddr(), freeAddr(), freeAddr())
	if err != nil {
		return nil, err
	}
	return &runningBroker{pid: n.cmd.Process.Pid, addr: n.kafkaAddr, stop: n.stop}, nil
}

// startKafka formats a fresh KRaft data folder (timed apart, as the "kafka-format" key: a first start
// needs it, a restart does not) and starts the JVM.
func (k *kafkaHarness) startKafka(ctx context.Context, dir string) (*runningBroker, error) {
	addr := freeAddr()
	began := time.Now()
	conf, err := k.kafka.formatKafka(ctx, dir, addr, freeAddr())
	if err != nil {
		return nil, err
	}
	k.table.add("kafka-format", sidePeer, time.Since(began).Seconds())
	b, err := k.kafka.launchKafka(conf)
	if err != nil {
		return nil, err
	}
	return &runningBroker{pid: b.cmd.Process.Pid, addr: addr, stop: b.stop}, nil
}

// round starts system s on a fresh data folder and measures, in order: the time from the process's
// start to serving, idle RSS, produce then consume of consumeN records, end-to-end latency in each
// setting, ProducerPerformance and ConsumerPerformance, the partition scaling row in each durability
// setting, each topic warmed by an untimed produce first (last, so that its thousands of partitions
// are not in the broker during the other phases), and the peak RSS. The data folder is removed at the end.
func (k *kafkaHarness) round(ctx context.Context, s *system) error {
	dir := k.fresh(strings.ToLower(s.name))
	defer os.RemoveAll(dir)
	began := time.Now()
	b, err := s.start(ctx, dir)
	if err != nil {
		return err
	}
	defer b.stop()
	if err := serving(ctx, b.addr); err != nil {
		return err
	}
	k.table.add("serve", s.side, time.Since(began).Seconds())
	rss, err := idleRSS(ctx, b.pid, k.ksz.settle)
	if err != nil {
		return err
	}
	k.table.add("idlerss", s.side, float64(rss)/(1<<20))
	t := kafkaTarget{weirBin: k.weirBin, brokers: b.addr}
	def := s.configs[0]
	if err := createReady(ctx, b.addr, "warm", 4, def); err != nil {
		return err
	}
	if _, err := t.bench(ctx, "produce", "--topic", "warm", "--duration", k.ksz.warm.String()); err != nil {
		return err
	}
	if _, err := t.bench(ctx, "consume", "--topic", "warm"); err != nil {
		return err
	}
	if err := createReady(ctx, b.addr, "w3", 4, def); err != nil {
		return err
	}
	r, cpu, err := k.measured(ctx, t, b.pid, "produce", "--topic", "w3", "--records", strconv.Itoa(k.ksz.consumeN))
	if err != nil {
		return err
	}
	k.table.add("w3produce", s.side, r.RecordsPerSec)
	k.table.add("cpugb-produce", s.side, cpu.total()/gigabytes(r.Records))
	r, cpu, err = k.measured(ctx, t, b.pid, "consume", "--topic", "w3")
	if err != nil {
		return err
	}
	k.table.add("w3", s.side, r.RecordsPerSec)
	k.table.add("cpugb-consume", s.side, cpu.total()/gigabytes(r.Records))
	for _, c := range s.configs {
		topic := "e2e-" + c.name
		if err := createReady(ctx, b.addr, topic, 1, c); err != nil {
			return err
		}
		r, err := t.bench(ctx, "e2e", "--topic", topic, "--duration", k.ksz.latDur.String(), "--rate", rateArg(e2eRate))
		if err != nil {
			return err
		}
		k.table.add("e2ep50-"+c.name, s.side, r.Latency.P50)
		k.table.add("e2ep99-"+c.name, s.side, r.Latency.P99)
	}
	if err := createReady(ctx, b.addr, "perf", 4, def); err != nil {
		return err
	}
	settleDisk()
	pr, err := k.kafka.producerPerf(ctx, b.addr, "perf", k.ksz.perfN)
	if err != nil {
		return err
	}
	k.table.add("perf-produce", s.side, pr)
	pr, err = k.kafka.consumerPerf(ctx, b.addr, "perf", k.ksz.perfN)
	if err != nil {
		return err
	}
	k.table.add("perf-consume", s.side, pr)
	for _, p := range k.ksz.partitions {
		for _, c := range s.configs {
			// A phase the broker fails (a produce that times out) is a result too: it is listed in the
			// report, and the row goes on.
			if err := k.scalePhase(ctx, t, b.pid, dir, s, c, p); err != nil {
				k.progress("  %s %s, %d partitions: failed: %v", s.name, c.name, p, err)
				k.failed = append(k.failed, fmt.Sprintf("%s %s, %d partitions: %v", s.name, c.name, p, firstLine(err)))
			}
		}
	}
	peak, err := peakRSSBytes(b.pid)
	if err != nil {
		return err
	}
	k.table.add("peakrss", s.side, float64(peak)/(1<<20))
	return nil
}

// scalePhase runs one phase of the partition scaling row: a topic of p partitions in setting c, warmed by an
// untimed produce, then a measured one; with the broker's CPU, the writeback it left to the kernel and what
// the page cache cost right after.
func (k *kafkaHarness) scalePhase(ctx context.Context, t kafkaTarget, pid int, dir string, s *system, c brokerConfig, p int) error {
	topic := fmt.Sprintf("p%d-%s", p, c.name)
	if err := createReady(ctx, t.brokers, topic, p, c); err != nil {
		return err
	}
	// A broker's first seconds on a new topic are not its steady state: Kafka's first 5 s on 512 new
	// partitions ran at a fifth of its next 5 s.
	if _, err := t.bench(ctx, "produce", "--topic", topic, "--duration", k.ksz.warm.String()); err != nil {
		return err
	}
	settleDisk()
	kernel, err := readKernelThreads()
	if err != nil {
		return err
	}
	r, cpu, err := k.measured(ctx, t, pid, "produce", "--topic", topic, "--duration", k.ksz.dur.String())
	if err != nil {
		return err
	}
	// What writing the phase's records back cost outside the broker: the kernel's threads during the
	// phase, and a sync(2) right after it for what they had not written yet.
	wb, err := syncCost()
	if err != nil {
		return err
	}
	after, err := readKernelThreads()
	if err != nil {
		return err
	}
	wb += after.since(kernel)
	// The kernel's own cost of a write into the page cache, right after the phase: the system part of
	// the broker's CPU moves with it.
	raw, err := pageCacheWriteCost(dir, pageCacheProbe)
	if err != nil {
		return err
	}
	perRec := func(sec float64) float64 { return sec / float64(r.Records) * 1e6 }
	k.progress("  %s %s, %d partitions: %.0f records/s, %.3g µs CPU per record (%.3g user), writeback outside it %.3g, page cache %.3g s/GB",
		s.name, c.name, p, r.RecordsPerSec, perRec(cpu.total()), perRec(cpu.user), perRec(wb), raw)
	k.table.add(scaleKey("rps", c, p), s.side, r.RecordsPerSec)
	k.table.add(scaleKey("cpurec", c, p), s.side, perRec(cpu.total()))
	k.table.add(scaleKey("userrec", c, p), s.side, perRec(cpu.user))
	k.table.add(scaleKey("pagecache", c, p), s.side, raw)
	k.table.add(scaleKey("writeback", c, p), s.side, perRec(wb))
	return nil
}

// firstLine is err's message up to its first line break.
func firstLine(err error) string {
	line, _, _ := strings.Cut(err.Error(), "\n")
	return line
}

// pageCacheProbe is how many bytes pageCacheWriteCost writes after each phase of the scaling row.
const pageCacheProbe = 128 << 20

// scaleKey names a measurement of the partition scaling row.
func scaleKey(what string, c brokerConfig, partitions int) string {
	return fmt.Sprintf("%s-%s-p%d", what, c.name, partitions)
}

// gigabytes is the record values' size of n records in GB (10^9 bytes).
func gigabytes(n int64) float64 { return float64(n) * recordSize / 1e9 }

// measured runs `weir bench MODE` against t and returns its result with the CPU seconds the broker
// process (pid) used meanwhile. The machine's dirty pages are written back first, so that the broker is
// not charged for an earlier phase's writeback.
func (k *kafkaHarness) measured(ctx context.Context, t kafkaTarget, pid int, mode string, args ...string) (benchResult, cpuTime, error) {
	settleDisk()
	var r benchResult
	cpu, err := cpuTimesDuring(pid, func() (err error) {
		r, err = t.bench(ctx, mode, args...)
		return err
	})
	if err != nil {
		return r, cpuTime{}, err
	}
	if r.Records == 0 {
		return r, cpuTime{}, fmt.Errorf("weir bench %s %v: no records", mode, args)
	}
	return r, cpu, nil
}

// fastRetries makes a client retry every 20 ms, so that the time to serve is not rounded up to a
// back-off.
func fastRetries(addr string) (*kgo.Client, error) {
	return kgo.NewClient(kgo.SeedBrokers(addr), kgo.MetadataMinAge(20*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
}

// serving waits until a broker just started at addr serves a producer: it has created a one-partition
// topic and that partition answers ListOffsets.
func serving(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, serveTimeout)
	defer cancel()
	return createReady(ctx, addr, "serve", 1, brokerConfig{})
}

// createReady creates topic with the given partitions and c's configs (a topic that already exists is
// kept) and waits until every partition answers ListOffsets.
func createReady(ctx context.Context, addr, topic string, partitions int, c brokerConfig) error {
	cl, err := fastRetries(addr)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(600_000)
	configs := map[string]*string{}
	for key, v := range c.configs {
		configs[key] = &v
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	for {
		_, err := adm.CreateTopic(ctx, int32(partitions), 1, configs, topic)
		if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("create %s: %w", topic, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		offs, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = offs.Error()
		}
		if err == nil && len(offs[topic]) == partitions {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s not ready: %w (last: %w)", topic, ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// writeReport writes rep to out/<date>-<time>[-suffix][-quick].md and .svg; out empty writes nothing.
func writeReport(out, suffix string, quick bool, rep report) error {
	if out == "" {
		return nil
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	name := time.Now().Format("2006-01-02-1504")
	if suffix != "" {
		name += "-" + suffix
	}
	if quick {
		name += "-quick"
	}
	if err := os.WriteFile(filepath.Join(out, name+".svg"), []byte(rep.svg), 0o644); err != nil {
		return err
	}
	md := strings.Replace(rep.markdown, "CHART", name+".svg", 1)
	return os.WriteFile(filepath.Join(out, name+".md"), []byte(md), 0o644)
}
