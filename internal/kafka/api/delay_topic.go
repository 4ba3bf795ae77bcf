package api

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/compress"
	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/delay"
	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/share"
)

// The headers a released record carries after its own (docs/queues.md, "Delay topics (as built)").
const (
	delayHeaderTopic     = "weir.delay.topic"
	delayHeaderPartition = "weir.delay.partition"
	delayHeaderOffset    = "weir.delay.offset"
)

const (
	// delayReadBytes is what one read of a delay partition asks for.
	delayReadBytes = 1 << 20
	// delayRecordsReadBytes is what one read of the records to release asks for.
	delayRecordsReadBytes = 64 << 10
	// delayBatchBytes bounds the records section of one released batch.
	delayBatchBytes = 512 << 10
	// delayLoadWindow is the first window of offsets, back from the high watermark, searched for the
	// last progress record; each next window is twice as large.
	delayLoadWindow = 4096
	// delayLoadWait bounds a starting releaser's wait for its replica's high watermark to reach the
	// log end.
	delayLoadWait = 5 * time.Second
	// delayRetry is the wait before a releaser that failed starts again from its last progress.
	delayRetry = time.Second
	// delayProduceTimeoutMs bounds the wait for acks=all of a release or a progress record.
	delayProduceTimeoutMs = 10000
)

// DelayReleasers runs one delay.Releaser for each partition of a delay topic (a topic with
// weir.delay.target.topic) that this node leads, following the metadata images the node hands it.
type DelayReleasers struct {
	b      *Broker
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	running map[delayPartition]*delayRun

	// statsMu guards released (records released by topic, since the topic's first releaser here
	// started; dropped when it has none left) and lateness.
	statsMu  sync.Mutex
	released map[string]uint64
	lateness DelayLateness
}

// DelayLatenessBuckets are the upper bounds, in seconds, of DelayLateness's buckets: from a release
// on time (the releaser wakes at the due time, the copy then takes an acks=all produce) to one held
// up for minutes by a target that refused it.
var DelayLatenessBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// DelayLateness counts the records released by this node's releasers by the time from their due time
// to the commit of their copy: Counts[i] those within DelayLatenessBuckets[i] and above the bucket
// before (the last, beyond every bound, one more), Sum the seconds of all of them. A record already
// due when it was written (no delay, a deliver-at in the past) counts from its due time too.
type DelayLateness struct {
	Counts []uint64
	Sum    float64
}

// DelayTopicStats is what the releasers of one delay topic hold on this node.
type DelayTopicStats struct {
	// Partitions is the number of the topic's partitions whose releaser runs here.
	Partitions int
	// Held is the number of pending records their indexes hold (delay.Stats.Held, a lower bound of
	// the pending records when a partition has more than its index's cap).
	Held int
	// NextDue is the earliest due time among them, Unix milliseconds; 0 when they hold none.
	NextDue int64
	// Released is the number of records released since the topic's first releaser here started.
	Released uint64
}

// delayPartition names one partition of a delay topic.
type delayPartition struct {
	topic     string
	partition int32
}

// delaySpec is what a partition's releaser is started with: another leader epoch, topic id, target
// or delivery config restarts it.
type delaySpec struct {
	epoch  int32
	id     controller.TopicID
	target string
	dc     controller.DeliveryConfig
}

// delayRun is a running releaser and its spec. done is closed once it has stopped.
type delayRun struct {
	delaySpec
	cancel context.CancelFunc
	done   chan struct{}
	// rel is the releaser running now, or the last one while the next waits to start, for Stats.
	rel atomic.Pointer[delay.Releaser]
}

// NewDelayReleasers returns the releasers of b's node, none running until Reconcile.
func NewDelayReleasers(b *Broker) *DelayReleasers {
	ctx, cancel := context.WithCancel(context.Background())
	return &DelayReleasers{b: b, ctx: ctx, cancel: cancel, running: map[delayPartition]*delayRun{},
		released: map[string]uint64{}, lateness: DelayLateness{Counts: make([]uint64, len(DelayLatenessBuckets)+1)}}
}

// Stats returns, by topic, what the releasers running here hold and have released, and the lateness
// of every release since the node started.
func (d *DelayReleasers) Stats() (map[string]DelayTopicStats, DelayLateness) {
	out := map[string]DelayTopicStats{}
	d.mu.Lock()
	for dp, run := range d.running {
		ts := out[dp.topic]
		ts.Partitions++
		if rel := run.rel.Load(); rel != nil {
			s := rel.Stats()
			ts.Held += s.Held
			if s.NextDue != 0 && (ts.NextDue == 0 || s.NextDue < ts.NextDue) {
				ts.NextDue = s.NextDue
			}
		}
		out[dp.topic] = ts
	}
	d.mu.Unlock()
	d.statsMu.Lock()
	defer d.statsMu.Unlock()
	for topic, ts := range out {
		ts.Released = d.released[topic]
		out[topic] = ts
	}
	return out, DelayLateness{Counts: slices.Clone(d.lateness.Counts), Sum: d.lateness.Sum}
}

// observe returns the delay.Options.Released of topic's releasers: it counts their releases and
// their lateness.
func (d *DelayReleasers) observe(topic string) func([]delay.Entry, time.Time) {
	return func(es []delay.Entry, at time.Time) {
		d.statsMu.Lock()
		defer d.statsMu.Unlock()
		d.released[topic] += uint64(len(es))
		for _, e := range es {
			late := max(float64(at.UnixMilli()-e.Due)/1000, 0)
			i, _ := slices.BinarySearch(DelayLatenessBuckets, late)
			d.lateness.Counts[i]++
			d.lateness.Sum += late
		}
	}
}

// forget drops the release counts of the topics with no releaser left here. Called with mu held.
func (d *DelayReleasers) forget() {
	topics := map[string]bool{}
	for dp := range d.running {
		topics[dp.topic] = true
	}
	d.statsMu.Lock()
	defer d.statsMu.Unlock()
	for topic := range d.released {
		if !topics[topic] {
			delete(d.released, topic)
		}
	}
}

// Reconcile starts a releaser for every delay-topic partition whose replica leads here in img, and
// stops those of partitions it no longer leads (a stopped releaser's writes are fenced anyway by
// the leader epoch its replica lost). A releaser restarted here begins once the one it replaces
// has stopped, so that one partition never has two on this node.
func (d *DelayReleasers) Reconcile(img *controller.Image) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ctx.Err() != nil {
		return
	}
	want := map[delayPartition]delaySpec{}
	for _, name := range img.TopicNames() {
		t := img.Topics[name]
		target := t.Configs[controller.ConfigDelayTargetTopic]
		if target == "" {
			continue
		}
		dc := img.DeliveryConfigOn(t, d.b.nodeID)
		dc.Headers = true
		for p := range t.Partitions {
			st, ok := t.Partition(p)
			if !ok || st.Leader != d.b.nodeID {
				continue
			}
			if r, ok := d.b.replicas.Replica(name, p); ok && r.IsLeader() {
				want[delayPartition{name, p}] = delaySpec{epoch: r.LeaderEpoch(), id: t.ID, target: target, dc: dc}
			}
		}
	}
	stopped := map[delayPartition]chan struct{}{}
	for dp, run := range d.running {
		if w, ok := want[dp]; !ok || w != run.delaySpec {
			run.cancel()
			stopped[dp] = run.done
			delete(d.running, dp)
		}
	}
	for dp, w := range want {
		if _, ok := d.running[dp]; ok {
			continue
		}
		r, ok := d.b.replicas.Replica(dp.topic, dp.partition)
		if !ok {
			continue
		}
		ctx, cancel := context.WithCancel(d.ctx)
		run := &delayRun{delaySpec: w, cancel: cancel, done: make(chan struct{})}
		d.running[dp] = run
		d.wg.Add(1)
		go d.run(ctx, stopped[dp], run, &delayLog{b: d.b, r: r, dp: dp, target: w.target, dc: w.dc})
	}
	d.forget()
}

// run runs one partition's releaser, once after has closed (when it is not nil), until ctx ends,
// starting it again from its last progress delayRetry after it fails; then it closes run.done.
func (d *DelayReleasers) run(ctx context.Context, after <-chan struct{}, run *delayRun, l *delayLog) {
	defer d.wg.Done()
	defer close(run.done)
	if after != nil {
		// the releaser replaced was cancelled: it stops at its next step
		<-after
	}
	for ctx.Err() == nil {
		rel := delay.NewReleaser(l, d.b.clock, delay.Options{Released: d.observe(l.dp.topic)})
		run.rel.Store(rel)
		err := rel.Run(ctx)
		if ctx.Err() != nil {
			return
		}
		d.b.log.Warn("delay: releaser stopped; starting again from its last progress",
			"topic", l.dp.topic, "partition", l.dp.partition, "target", l.target, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-d.b.clock.After(delayRetry):
		}
	}
}

// Close stops every releaser and waits for them.
func (d *DelayReleasers) Close() {
	d.mu.Lock()
	d.cancel()
	d.running = map[delayPartition]*delayRun{}
	d.mu.Unlock()
	d.wg.Wait()
}

// delayLog is a delay partition's replica at its leader: the delay.Log of its releaser.
type delayLog struct {
	b      *Broker
	r      *partition.Replica
	dp     delayPartition
	target string
	dc     controller.DeliveryConfig
}

var _ delay.Log = (*delayLog)(nil)

// Watch implements delay.Log.
func (l *delayLog) Watch(ch chan<- struct{}) func() { return l.r.Watch(ch) }

// Scan implements delay.Log: each record's due time is its share attributes' (batchAttrs), read with
// the weir.* headers on whatever weir.delivery.headers.enable says. It reads below the last stable
// offset, as a read_committed consumer does, and passes over the batches of aborted transactions.
func (l *delayLog) Scan(_ context.Context, from int64) ([]delay.Entry, int64, error) {
	from = max(from, l.r.LogStartOffset())
	res, err := l.r.Read(from, delayReadBytes, true)
	if err != nil {
		return nil, 0, err
	}
	var out []delay.Entry
	var attrs []share.Attr
	committed := partition.NewCommitted(res.Aborted)
	next := from
	for batch, err := range record.Batches(res.Records) {
		if err != nil {
			return nil, 0, fmt.Errorf("%w: %w", record.ErrCorrupt, err)
		}
		h, err := record.ParseHeader(batch)
		if err != nil {
			return nil, 0, err
		}
		skip := committed.Skip(h)
		if h.LastOffset() < next {
			continue
		}
		first := max(next, h.BaseOffset)
		next = h.NextOffset()
		if skip {
			continue
		}
		if _, marker, err := progressValue(h, batch); err != nil || marker {
			if err != nil {
				return nil, 0, err
			}
			continue
		}
		if attrs, err = batchAttrs(attrs[:0], record.Checked{Header: h, Bytes: batch}, first, l.dc, false); err != nil {
			return nil, 0, err
		}
		for i, a := range attrs {
			out = append(out, delay.Entry{Due: a.Due, Offset: first + int64(i)})
		}
	}
	return out, next, nil
}

// progressValue reports whether batch is a progress record (a batch of one record carrying
// delay.ProgressHeader) and returns the header's value.
func progressValue(h record.Header, batch []byte) ([]byte, bool, error) {
	body := record.Body(batch)
	if h.NumRecords != 1 || h.Compression() == int8(compress.None) && !bytes.Contains(body, []byte(delay.ProgressHeader)) {
		return nil, false, nil
	}
	raw, err := compress.Decode(compress.Codec(h.Compression()), body, delayReadBytes)
	if err != nil {
		return nil, false, err
	}
	recs, err := record.DecodeRecords(raw, 1)
	if err != nil {
		return nil, false, err
	}
	for _, rh := range slices.Backward(recs[0].Headers) {
		if string(rh.Key) == delay.ProgressHeader {
			return rh.Value, true, nil
		}
	}
	return nil, false, nil
}

// Load implements delay.Log: it reads windows of offsets back from the high watermark, each twice
// the last, for the last progress record that parses and whose scan end is not past its own offset. It first waits, up to delayLoadWait, for the
// high watermark to reach the log end: a new leader's high watermark can trail the last progress
// its predecessor committed until its followers fetch again.
func (l *delayLog) Load(ctx context.Context) (delay.Progress, error) {
	if err := l.waitCommitted(ctx); err != nil {
		return delay.Progress{}, err
	}
	start, end := l.r.LogStartOffset(), l.r.HighWatermark()
	for w := int64(delayLoadWindow); end > start; w *= 2 {
		from := max(start, end-w)
		p, ok, err := l.lastProgress(from, end)
		if err != nil || ok {
			return p, err
		}
		end = from
	}
	return delay.Initial(l.r.LogStartOffset()), nil
}

// waitCommitted waits until the replica's high watermark reaches its log end, ctx ends or
// delayLoadWait passes.
func (l *delayLog) waitCommitted(ctx context.Context) error {
	moved := make(chan struct{}, 1)
	stop := l.r.Watch(moved)
	defer stop()
	timeout := l.b.clock.After(delayLoadWait)
	for l.r.HighWatermark() < l.r.LogEndOffset() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout:
			return nil
		case <-moved:
		}
	}
	return nil
}

// lastProgress returns the last progress record that parses among the batches from from below end.
func (l *delayLog) lastProgress(from, end int64) (last delay.Progress, found bool, err error) {
	for off := from; off < end; {
		res, err := l.r.Read(off, delayReadBytes, false)
		if err != nil || len(res.Records) == 0 {
			return last, found, err
		}
		next := off
		for batch, err := range record.Batches(res.Records) {
			if err != nil {
				return last, found, fmt.Errorf("%w: %w", record.ErrCorrupt, err)
			}
			h, err := record.ParseHeader(batch)
			if err != nil {
				return last, found, err
			}
			if h.BaseOffset >= end {
				return last, found, nil
			}
			next = h.NextOffset()
			if h.Control() {
				continue
			}
			v, marker, err := progressValue(h, batch)
			if err != nil || !marker {
				continue
			}
			// a progress record follows what it says was read: one that does not is not the
			// releaser's, and is passed over
			if p, err := delay.ParseProgress(v); err == nil && p.ScanEnd <= h.BaseOffset {
				last, found = p, true
			}
		}
		if next <= off {
			break
		}
		off = next
	}
	return last, found, nil
}

// Save implements delay.Log: p goes into the delay partition as one record of its own, appended to the
// replica the releaser runs on (ErrNotLeader once it no longer leads) and committed at acks=all. It
// does not go through the produce path, which refuses the progress header from every producer
// (checkDelivery), so that only the releaser writes progress.
func (l *delayLog) Save(ctx context.Context, p delay.Progress) error {
	rec := record.Record{Headers: []record.RecordHeader{{Key: []byte(delay.ProgressHeader), Value: delay.AppendProgress(nil, p)}}}
	now := l.b.clock.Now().UnixMilli()
	_, wait, err := l.r.Append(record.AppendBatch(nil, record.PlainHeader(1, now, now), record.AppendRecord(nil, rec)))
	if err != nil {
		return err
	}
	return wait(ctx)
}

// Release implements delay.Log: the records of es, each with its key, value and headers and the
// delay headers naming where it came from, stamped with the time of their release, go to the
// target topic's partition the Kafka default partitioner gives their key (a record without a key:
// the source partition modulo the target's partition count), in es's order, in batches of at most
// delayBatchBytes produced one after another at acks=all.
func (l *delayLog) Release(ctx context.Context, es []delay.Entry) error {
	t, ok := l.b.meta.Image().Topic(l.target)
	if !ok {
		return fmt.Errorf("%w: delay target topic %s", errTopicNotReady, l.target)
	}
	recs, err := l.records(es)
	if err != nil {
		return err
	}
	now := l.b.clock.Now().UnixMilli()
	bodies := map[int32][]byte{}
	counts := map[int32]int32{}
	var order []int32
	flush := func(p int32) error {
		if counts[p] == 0 {
			return nil
		}
		err := l.produce(ctx, l.target, p, record.AppendBatch(nil, record.PlainHeader(int(counts[p]), now, now), bodies[p]))
		bodies[p], counts[p] = bodies[p][:0], 0
		return err
	}
	for _, e := range es {
		rec, ok := recs[e.Offset]
		if !ok {
			continue
		}
		p := l.dp.partition % t.Partitions
		if rec.Key != nil {
			p = record.KeyPartition(rec.Key, t.Partitions)
		}
		if !slices.Contains(order, p) {
			order = append(order, p)
		}
		rec.Attributes, rec.TimestampDelta, rec.OffsetDelta = 0, 0, counts[p]
		rec.Headers = append(rec.Headers[:len(rec.Headers):len(rec.Headers)],
			dlqHeader(delayHeaderTopic, l.dp.topic),
			dlqHeader(delayHeaderPartition, strconv.Itoa(int(l.dp.partition))),
			dlqHeader(delayHeaderOffset, strconv.FormatInt(e.Offset, 10)))
		bodies[p] = record.AppendRecord(bodies[p], rec)
		counts[p]++
		if len(bodies[p]) >= delayBatchBytes {
			if err := flush(p); err != nil {
				return err
			}
		}
	}
	for _, p := range order {
		if err := flush(p); err != nil {
			return err
		}
	}
	return nil
}

// records reads the records at the offsets of es from the replica: in offset order, a read of
// delayRecordsReadBytes from each offset not read yet. Offsets with no record (compacted away, below
// the log start) are left out.
func (l *delayLog) records(es []delay.Entry) (map[int64]record.Record, error) {
	offs := make([]int64, 0, len(es))
	for _, e := range es {
		offs = append(offs, e.Offset)
	}
	slices.Sort(offs)
	out := make(map[int64]record.Record, len(offs))
	for i := 0; i < len(offs); {
		off := max(offs[i], l.r.LogStartOffset())
		res, err := l.r.Read(off, delayRecordsReadBytes, false)
		if err != nil {
			return nil, err
		}
		next := off
		for batch, err := range record.Batches(res.Records) {
			if err != nil {
				return nil, fmt.Errorf("%w: %w", record.ErrCorrupt, err)
			}
			h, err := record.ParseHeader(batch)
			if err != nil {
				return nil, err
			}
			next = h.NextOffset()
			lo, _ := slices.BinarySearch(offs, h.BaseOffset)
			hi, _ := slices.BinarySearch(offs, next)
			if lo == hi || h.Control() {
				continue
			}
			if err := batchRecords(out, h, batch, offs[lo:hi]); err != nil {
				return nil, err
			}
		}
		if next <= off {
			break
		}
		for i < len(offs) && offs[i] < next {
			i++
		}
	}
	return out, nil
}

// batchRecords puts in out the records of the batch with header h whose offsets are among want
// (sorted).
func batchRecords(out map[int64]record.Record, h record.Header, batch []byte, want []int64) error {
	raw, err := compress.Decode(compress.Codec(h.Compression()), record.Body(batch), dlqMaxBatchBytes)
	if err != nil {
		return err
	}
	recs, err := record.DecodeRecords(raw, int(h.NumRecords))
	if err != nil {
		return err
	}
	for _, rec := range recs {
		off := h.BaseOffset + int64(rec.OffsetDelta)
		if _, ok := slices.BinarySearch(want, off); ok {
			out[off] = rec
		}
	}
	return nil
}

// produce appends batch to topic's partition p at its leader, at acks=all.
func (l *delayLog) produce(ctx context.Context, topic string, p int32, batch []byte) error {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = dlqProduceVersion, -1, delayProduceTimeoutMs
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = p, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := l.b.produceAtLeader(ctx, l.b.meta.Image(), req)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return fmt.Errorf("delay: produce to %s-%d: %w", topic, p, err)
			}
			return nil
		}
	}
	return fmt.Errorf("%w: no answer for %s-%d", errInvalidRequest, topic, p)
}
