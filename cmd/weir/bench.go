package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// errBenchFailed is returned when a benchmark ran but some records failed or never arrived.
var errBenchFailed = errors.New("bench failed")

// benchOpts are the flags of weir bench produce|consume|e2e.
type benchOpts struct {
	topic             string
	size              int
	records           int64
	duration          time.Duration
	rate              float64
	acks              string
	compression       string
	partitions        int32
	replicationFactor int16
	topicConfigs      []string
	producers         int
	consumers         int
	linger            time.Duration
	batchBytes        int32
	json              bool
	interval          time.Duration
}

func newBenchCmd(g *globalOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure produce, consume and end-to-end throughput and latency against any Kafka-protocol cluster",
		Long: "bench drives a cluster with franz-go clients and reports records/s, MB/s (10^6 bytes) and latency\n" +
			"percentiles. produce and e2e create the topic with --partitions when it is missing. Before the clock\n" +
			"starts, each producer sends one warm-up record and waits for its acknowledgement (e2e: until a consumer\n" +
			"has read it too), so the results do not carry the clients' start; warm-up records are not counted. A\n" +
			"progress line is printed every --interval (in place on a terminal); the summary, or one JSON object with\n" +
			"--json, comes last.",
	}
	cmd.AddCommand(
		newBenchModeCmd(g, benchProduce, "Produce records as fast as allowed; report acknowledged records/s and ack latency"),
		newBenchModeCmd(g, benchConsume, "Read the topic from its start (to its end at startup unless --records or --duration says otherwise)"),
		newBenchModeCmd(g, benchE2E, "Produce and consume at once; report produce-to-consume latency from a timestamp in each record"),
	)
	return cmd
}

// newBenchModeCmd builds one bench subcommand with the flags its mode uses: produce has no consumer
// flags, consume no producer flags, e2e both.
func newBenchModeCmd(g *globalOpts, mode benchMode, short string) *cobra.Command {
	o := &benchOpts{}
	cmd := &cobra.Command{
		Use:   string(mode),
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := g.resolve(cmd); err != nil {
				return err
			}
			if err := o.check(mode); err != nil {
				return err
			}
			return runBench(cmd, g, o, mode)
		},
	}
	f := cmd.Flags()
	if mode == benchConsume {
		f.StringVar(&o.topic, "topic", "weir-bench", "topic to read")
		f.Int64Var(&o.records, "records", 0, "stop after this many records (0: the records up to the end offsets at start, or no limit with --duration)")
		f.DurationVar(&o.duration, "duration", 0, "stop after this long (0: no time limit)")
		// Scripts that pass one set of flags to every mode (bench/kafka.go does) may give consume the
		// producers' --size and --linger: it accepts them, unlisted, and ignores them.
		f.Int("size", 0, "")
		f.Duration("linger", 0, "")
		_ = f.MarkHidden("size")
		_ = f.MarkHidden("linger")
	} else {
		f.StringVar(&o.topic, "topic", "weir-bench", "topic to use (created with --partitions when missing)")
		f.Int64Var(&o.records, "records", 0, "stop after this many records (0: no count limit)")
		f.DurationVar(&o.duration, "duration", 0, "stop after this long (0: no time limit; 10s when --records is 0 too)")
		f.IntVar(&o.size, "size", 1024, "record value size in bytes")
		f.Float64Var(&o.rate, "rate", 0, "target records per second across all producers (0: as fast as possible)")
		f.StringVar(&o.acks, "acks", "all", "acknowledgement to wait for: all, 1 or 0")
		f.StringVar(&o.compression, "compression", "none", "batch compression: none, gzip, snappy, lz4 or zstd")
		f.Int32Var(&o.partitions, "partitions", 1, "partitions of the topic when bench creates it")
		f.Int16Var(&o.replicationFactor, "replication-factor", -1, "replication factor when bench creates the topic (-1: the broker's default)")
		f.StringArrayVar(&o.topicConfigs, "topic-config", nil, "topic config KEY=VALUE when bench creates the topic (repeatable)")
		f.IntVar(&o.producers, "producers", 1, "producer clients, each on its own connection")
		f.DurationVar(&o.linger, "linger", 10*time.Millisecond, "how long a producer waits to fill a batch")
		f.Int32Var(&o.batchBytes, "batch-bytes", 1<<20, "largest record batch a producer builds")
	}
	if mode != benchProduce {
		f.IntVar(&o.consumers, "consumers", 1, "consumer clients; the partitions are split between them")
	}
	f.BoolVar(&o.json, "json", false, "print the summary as one JSON object (progress goes to stderr)")
	f.DurationVar(&o.interval, "interval", time.Second, "progress line period (0: no progress)")
	return cmd
}

// benchMode names a bench subcommand.
type benchMode string

const (
	benchProduce benchMode = "produce"
	benchConsume benchMode = "consume"
	benchE2E     benchMode = "e2e"
)

// defaultBenchDuration bounds a produce or e2e run given neither --records nor --duration.
const defaultBenchDuration = 10 * time.Second

func (o *benchOpts) check(mode benchMode) error {
	switch {
	case o.records < 0 || o.duration < 0 || o.interval < 0:
		return fmt.Errorf("%w: --records, --duration and --interval cannot be negative", errUsage)
	case mode != benchProduce && o.consumers < 1:
		return fmt.Errorf("%w: --consumers %d: want at least 1", errUsage, o.consumers)
	case mode == benchConsume:
		return nil
	case o.size < 0:
		return fmt.Errorf("%w: --size %d is negative", errUsage, o.size)
	case mode == benchE2E && o.size < 8:
		return fmt.Errorf("%w: e2e needs --size of at least 8 for its timestamp, got %d", errUsage, o.size)
	case o.rate < 0 || o.linger < 0:
		return fmt.Errorf("%w: --rate and --linger cannot be negative", errUsage)
	case o.partitions < 1:
		return fmt.Errorf("%w: --partitions %d: want at least 1", errUsage, o.partitions)
	case o.producers < 1:
		return fmt.Errorf("%w: --producers %d: want at least 1", errUsage, o.producers)
	case o.batchBytes < 1:
		return fmt.Errorf("%w: --batch-bytes %d: want at least 1", errUsage, o.batchBytes)
	}
	for _, kv := range o.topicConfigs {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("%w: --topic-config %q: want KEY=VALUE", errUsage, kv)
		}
	}
	if o.records == 0 && o.duration == 0 {
		o.duration = defaultBenchDuration
	}
	return nil
}

// benchRun is the shared state of one benchmark: counters the clients bump and the histograms they fill.
type benchRun struct {
	o        *benchOpts
	g        *globalOpts
	mode     benchMode
	claimed  atomic.Int64  // records producers have started
	acked    atomic.Int64  // records acknowledged
	received atomic.Int64  // records consumed, at most limit
	limit    int64         // records to consume (consume); 0 for no limit
	bytes    atomic.Int64  // value bytes of the records consumed
	warm     atomic.Int64  // warm-up records consumed (e2e)
	warmed   chan struct{} // closed once every producer's warm-up record was consumed (e2e)
	failed   atomic.Int64
	errOnce  sync.Once
	firstErr error
	lat      latencyHist // ack latency (produce) or produce-to-consume latency (e2e)
	ackLat   latencyHist // ack latency during e2e
	pace     pacer
}

func (r *benchRun) fail(err error) {
	r.failed.Add(1)
	r.errOnce.Do(func() { r.firstErr = err })
}

// done is the count the progress line and the summary report: acknowledged records when producing,
// consumed ones otherwise.
func (r *benchRun) done() int64 {
	if r.mode == benchProduce {
		return r.acked.Load()
	}
	return r.received.Load()
}

// doneBytes is the value bytes of done's records: counted when consuming, which reads whatever the
// topic holds, and --size each otherwise.
func (r *benchRun) doneBytes() int64 {
	if r.mode == benchConsume {
		return r.bytes.Load()
	}
	return r.done() * int64(r.o.size)
}

func runBench(cmd *cobra.Command, g *globalOpts, o *benchOpts, mode benchMode) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	adm, admCl, err := g.admin(ctx)
	if err != nil {
		return err
	}
	defer admCl.Close()
	if mode != benchConsume {
		if err := ensureBenchTopic(ctx, g, adm, o); err != nil {
			return err
		}
	}
	partitions, err := benchPartitions(ctx, g, adm, o.topic, mode)
	if err != nil {
		return err
	}

	r := &benchRun{o: o, g: g, mode: mode}
	progressOut := cmd.OutOrStdout()
	if o.json {
		progressOut = cmd.ErrOrStderr()
	}
	prog := startProgress(progressOut, o.interval, r)
	var res benchResult
	switch mode {
	case benchProduce:
		res, err = r.produce(ctx)
	case benchConsume:
		res, err = r.consume(ctx, partitions)
	case benchE2E:
		res, err = r.e2e(ctx, partitions)
	}
	prog.stop()
	if err != nil {
		return err
	}
	res.Partitions = int32(len(partitions))
	if err := res.write(cmd.OutOrStdout(), o.json); err != nil {
		return err
	}
	if res.Errors > 0 {
		return fmt.Errorf("%w: %d records failed, first error: %w", errBenchFailed, res.Errors, g.describe(r.firstErr))
	}
	if res.Missing > 0 {
		return fmt.Errorf("%w: %d acknowledged records were not consumed within --timeout", errBenchFailed, res.Missing)
	}
	return nil
}

// ensureBenchTopic creates the topic with --partitions and --topic-config unless it exists.
func ensureBenchTopic(ctx context.Context, g *globalOpts, adm *kadm.Client, o *benchOpts) error {
	configs := map[string]*string{}
	for _, kv := range o.topicConfigs {
		k, v, _ := strings.Cut(kv, "=")
		configs[k] = &v
	}
	resp, err := call(ctx, g, "create topic", func(c context.Context) (kadm.CreateTopicResponse, error) {
		return adm.CreateTopic(c, o.partitions, o.replicationFactor, configs, o.topic)
	})
	if err != nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
		return err
	}
	return nil
}

// listOffsets lists offsets, retrying within --timeout while a partition has no leader yet or the broker
// asked has not learned of a topic just created (on a cluster, the nodes apply a new topic one after the
// other).
func listOffsets(ctx context.Context, g *globalOpts, what string, fn func(context.Context) (kadm.ListedOffsets, error)) (kadm.ListedOffsets, error) {
	deadline := time.Now().Add(g.timeout)
	for {
		offs, err := call(ctx, g, what, fn)
		if err == nil {
			err = offs.Error()
		}
		retriable := errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.LeaderNotAvailable) ||
			errors.Is(err, kerr.NotLeaderForPartition)
		if !retriable || time.Now().After(deadline) {
			return offs, err
		}
		select {
		case <-ctx.Done():
			return offs, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// benchPartition is one partition and the offsets a run starts reading at and, for consume, stops at.
type benchPartition struct {
	id         int32
	start, end int64
}

// benchPartitions lists the topic's partitions: consume reads from each start offset, e2e from each end.
func benchPartitions(ctx context.Context, g *globalOpts, adm *kadm.Client, topic string, mode benchMode) ([]benchPartition, error) {
	ends, err := listOffsets(ctx, g, "list end offsets", func(c context.Context) (kadm.ListedOffsets, error) {
		return adm.ListEndOffsets(c, topic)
	})
	if err != nil {
		return nil, err
	}
	starts, err := listOffsets(ctx, g, "list start offsets", func(c context.Context) (kadm.ListedOffsets, error) {
		return adm.ListStartOffsets(c, topic)
	})
	if err != nil {
		return nil, err
	}
	var out []benchPartition
	ends.Each(func(e kadm.ListedOffset) {
		p := benchPartition{id: e.Partition, start: e.Offset, end: e.Offset}
		if mode == benchConsume {
			if s, ok := starts.Lookup(topic, e.Partition); ok {
				p.start = s.Offset
			}
		}
		out = append(out, p)
	})
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: topic %q has no partitions", errUsage, topic)
	}
	return out, nil
}

// pacer spaces record sends evenly at a rate shared by every producer; a zero rate never waits.
type pacer struct {
	start time.Time
	rate  float64
	n     atomic.Int64
}

// wait blocks until the next record's slot.
func (p *pacer) wait(ctx context.Context) error {
	if p.rate == 0 {
		return nil
	}
	i := p.n.Add(1) - 1
	at := p.start.Add(time.Duration(float64(i) * float64(time.Second) / p.rate))
	d := time.Until(at)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// claim reserves one record for a producer; false once --records are all claimed.
func (r *benchRun) claim() bool {
	n := r.claimed.Add(1)
	return r.o.records == 0 || n <= r.o.records
}

func (r *benchRun) producerClient(ctx context.Context) (*kgo.Client, error) {
	opts, err := produceOpts{acks: r.o.acks, partition: -1, compression: r.o.compression}.clientOpts(r.g)
	if err != nil {
		return nil, err
	}
	opts = append(opts,
		kgo.DefaultProduceTopic(r.o.topic),
		kgo.ProducerLinger(r.o.linger),
		kgo.ProducerBatchMaxBytes(r.o.batchBytes),
		kgo.RecordDeliveryTimeout(max(r.g.timeout, 30*time.Second)),
	)
	return r.g.connect(ctx, opts...)
}

// runProducers sends records from --producers clients until --records are claimed, --duration passes or
// ctx ends, and waits for every acknowledgement. It returns the time from the first send to the last ack.
// stamp makes each value carry its send time (e2e). Each client first sends one warm-up record (a zero
// timestamp when stamped) and waits for it; then ready, when set, must return before the clock starts.
func (r *benchRun) runProducers(ctx context.Context, stamp bool, hist *latencyHist, ready func(context.Context) error) (time.Duration, error) {
	clients := make([]*kgo.Client, r.o.producers)
	defer func() {
		for _, cl := range clients {
			if cl != nil {
				cl.Close()
			}
		}
	}()
	for i := range clients {
		cl, err := r.producerClient(ctx)
		if err != nil {
			return 0, err
		}
		clients[i] = cl
	}
	for _, cl := range clients {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: make([]byte, r.o.size)}).FirstErr(); err != nil {
			return 0, fmt.Errorf("warm-up record: %w", err)
		}
	}
	if ready != nil {
		if err := ready(ctx); err != nil {
			return 0, err
		}
	}
	sendCtx := ctx
	if r.o.duration > 0 {
		var cancel context.CancelFunc
		sendCtx, cancel = context.WithTimeout(ctx, r.o.duration)
		defer cancel()
	}
	shared := make([]byte, r.o.size)
	start := time.Now()
	r.pace.start, r.pace.rate = start, r.o.rate
	var wg sync.WaitGroup
	for _, cl := range clients {
		wg.Go(func() {
			for sendCtx.Err() == nil && r.claim() {
				if r.pace.wait(sendCtx) != nil {
					return
				}
				value := shared
				sent := time.Now()
				if stamp {
					value = make([]byte, r.o.size)
					binary.BigEndian.PutUint64(value, uint64(sent.UnixNano()))
				}
				cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
					if err != nil {
						r.fail(err)
						return
					}
					hist.Record(time.Since(sent))
					r.acked.Add(1)
				})
			}
		})
	}
	wg.Wait()
	for _, cl := range clients {
		if err := cl.Flush(ctx); err != nil {
			return time.Since(start), err
		}
	}
	return time.Since(start), nil
}

func (r *benchRun) produce(ctx context.Context) (benchResult, error) {
	elapsed, err := r.runProducers(ctx, false, &r.lat, nil)
	if err != nil {
		return benchResult{}, err
	}
	return r.result(r.acked.Load(), elapsed), nil
}

// consumePollSlice bounds one poll, so a consumer notices promptly that it may stop.
const consumePollSlice = 100 * time.Millisecond

// consumer reads its share of the partitions until stop says enough; on records with a timestamp
// (e2e) it records their age, and counts those with a zero timestamp as warm-up records, not received
// ones. firstAt receives the arrival time of the run's first record.
func (r *benchRun) consumer(ctx context.Context, parts []benchPartition, stamped bool, firstAt *atomic.Int64,
	stop func() bool,
) error {
	offsets := map[int32]kgo.Offset{}
	for _, p := range parts {
		offsets[p.id] = kgo.NewOffset().At(p.start)
	}
	cl, err := r.g.connect(ctx,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{r.o.topic: offsets}),
		kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(16<<20), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	var recs []*kgo.Record
	for !stop() {
		// Poll in short slices so stop is checked even when no more records come.
		pctx, cancel := context.WithTimeout(ctx, consumePollSlice)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				ferr = err
			}
		})
		if ferr != nil {
			return fmt.Errorf("consume: %w", ferr)
		}
		now := time.Now()
		recs = recs[:0]
		fs.EachRecord(func(rec *kgo.Record) {
			if stamped && len(rec.Value) >= 8 && binary.BigEndian.Uint64(rec.Value) == 0 {
				if r.warm.Add(1) == int64(r.o.producers) {
					close(r.warmed)
				}
				return
			}
			recs = append(recs, rec)
		})
		recs = recs[:r.take(len(recs))]
		if len(recs) == 0 {
			continue
		}
		firstAt.CompareAndSwap(0, now.UnixNano())
		nBytes := 0
		for _, rec := range recs {
			nBytes += len(rec.Value)
			if stamped && len(rec.Value) >= 8 {
				r.lat.Record(time.Duration(now.UnixNano() - int64(binary.BigEndian.Uint64(rec.Value))))
			}
		}
		r.bytes.Add(int64(nBytes))
	}
	return nil
}

// take counts n more consumed records, or fewer once the run's limit is reached, and returns how many
// it counted: a fetch returns whole batches, and a run counts exactly the records asked for.
func (r *benchRun) take(n int) int {
	for {
		cur := r.received.Load()
		k := int64(n)
		if r.limit > 0 {
			k = min(k, max(r.limit-cur, 0))
		}
		if r.received.CompareAndSwap(cur, cur+k) {
			return int(k)
		}
	}
}

// runConsumers starts --consumers clients over the partitions, split round-robin, and returns when all
// have stopped; the first error wins.
func (r *benchRun) runConsumers(ctx context.Context, parts []benchPartition, stamped bool, firstAt *atomic.Int64,
	stop func() bool,
) error {
	shares := make([][]benchPartition, min(r.o.consumers, len(parts)))
	for i, p := range parts {
		shares[i%len(shares)] = append(shares[i%len(shares)], p)
	}
	errs := make([]error, len(shares))
	var wg sync.WaitGroup
	for i, share := range shares {
		wg.Go(func() { errs[i] = r.consumer(ctx, share, stamped, firstAt, stop) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (r *benchRun) consume(ctx context.Context, parts []benchPartition) (benchResult, error) {
	target := r.o.records
	if target == 0 && r.o.duration == 0 {
		for _, p := range parts {
			target += p.end - p.start
		}
	}
	if r.o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.o.duration)
		defer cancel()
	}
	r.limit = target
	var firstAt atomic.Int64
	stop := func() bool { return target > 0 && r.received.Load() >= target }
	if err := r.runConsumers(ctx, parts, false, &firstAt, stop); err != nil {
		return benchResult{}, err
	}
	var elapsed time.Duration
	if f := firstAt.Load(); f != 0 {
		elapsed = time.Since(time.Unix(0, f))
	}
	return r.result(r.received.Load(), elapsed), nil
}

func (r *benchRun) e2e(ctx context.Context, parts []benchPartition) (benchResult, error) {
	cctx, cancelConsumers := context.WithCancel(ctx)
	defer cancelConsumers()
	var produced atomic.Bool
	var firstAt atomic.Int64
	stop := func() bool { return produced.Load() && r.received.Load() >= r.acked.Load() }
	r.warmed = make(chan struct{})
	consumed := make(chan error, 1)
	consumersDone := make(chan struct{})
	go func() {
		consumed <- r.runConsumers(cctx, parts, true, &firstAt, stop)
		close(consumersDone)
	}()

	ready := func(ctx context.Context) error {
		t := time.NewTimer(r.g.timeout)
		defer t.Stop()
		select {
		case <-r.warmed:
			return nil
		case <-consumersDone:
			return fmt.Errorf("%w: the consumers stopped before reading the warm-up records", errBenchFailed)
		case <-t.C:
			return fmt.Errorf("%w: the consumers did not read the warm-up records within %v", errBenchFailed, r.g.timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	elapsed, err := r.runProducers(ctx, true, &r.ackLat, ready)
	produced.Store(true)
	if err != nil {
		cancelConsumers()
		return benchResult{}, errors.Join(err, <-consumed)
	}
	// Give the consumers --timeout to catch up with the last acknowledged record.
	grace := time.NewTimer(r.g.timeout)
	defer grace.Stop()
	select {
	case err = <-consumed:
	case <-grace.C:
		cancelConsumers()
		err = <-consumed
	}
	if err != nil {
		return benchResult{}, err
	}
	res := r.result(r.received.Load(), elapsed)
	ack := summarize(r.ackLat.Snapshot())
	res.ProduceLatency = &ack
	res.Missing = max(r.acked.Load()-r.received.Load(), 0)
	return res, nil
}

func (r *benchRun) result(n int64, elapsed time.Duration) benchResult {
	res := benchResult{
		Mode:        string(r.mode),
		Topic:       r.o.topic,
		RecordBytes: r.o.size,
		Records:     n,
		Errors:      r.failed.Load(),
		Seconds:     elapsed.Seconds(),
	}
	if r.mode == benchConsume && n > 0 {
		res.RecordBytes = int(r.bytes.Load() / n)
	}
	if elapsed > 0 {
		res.RecordsPerSec = float64(n) / elapsed.Seconds()
		res.MBPerSec = res.RecordsPerSec * float64(r.o.size) / 1e6
		if r.mode == benchConsume {
			res.MBPerSec = float64(r.bytes.Load()) / elapsed.Seconds() / 1e6
		}
	}
	if r.mode != benchConsume {
		l := summarize(r.lat.Snapshot())
		res.Latency = &l
	}
	return res
}
