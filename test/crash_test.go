package test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// crashPartitions is the partition count of every crash-test topic.
const crashPartitions = 4

// ackedRecord is a record the broker acknowledged with acks=all: where it said the record is.
type ackedRecord struct {
	partition int32
	offset    int64
	value     string
}

// recordValue is record i of a producer session, about 100 bytes. Values are unique across
// sessions, and their lexicographic order is the produce order, so per partition they must grow
// with the offset.
func recordValue(session, i int) string {
	return fmt.Sprintf("s%02d-%08d-%s", session, i, padding)
}

// padding fills a record value up to about 100 bytes.
var padding = strings.Repeat("w", 86)

// smallSegments makes a crash-test topic roll a segment every few hundred records, so that the
// newest segment is not the first and recovery meets several segments and their indexes.
var smallSegments = map[string]string{"segment.bytes": "16384"}

// stream is an idempotent acks=all franz-go producer writing uncompressed records round-robin to
// the partitions of a topic as fast as the broker acknowledges, until stopped.
type stream struct {
	cl       *kgo.Client
	cancel   context.CancelFunc
	done     chan struct{}
	progress chan struct{} // receives (without blocking) after each acknowledgement
	sent     chan struct{} // receives (without blocking) after each Produce request written
	stopOnce sync.Once

	mu    sync.Mutex
	acked []ackedRecord
	err   error // first produce error, for the log
}

// startStream starts producing records of the given session to topic on n.
func startStream(t testing.TB, n *node, topic string, session int) *stream {
	t.Helper()
	sent := make(chan struct{}, 1)
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(n.kafkaAddr()),
		kgo.WithHooks(produceWritten(sent)),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(256),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
	)
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &stream{cl: cl, cancel: cancel, done: make(chan struct{}), progress: make(chan struct{}, 1), sent: sent}
	t.Cleanup(func() { s.stop() })
	go func() {
		defer close(s.done)
		for i := 0; ctx.Err() == nil; i++ {
			r := &kgo.Record{
				Topic:     topic,
				Partition: int32(i % crashPartitions),
				Value:     []byte(recordValue(session, i)),
			}
			cl.Produce(ctx, r, s.onAck)
		}
	}()
	return s
}

func (s *stream) onAck(r *kgo.Record, err error) {
	s.mu.Lock()
	if err != nil {
		if s.err == nil {
			s.err = err
		}
		s.mu.Unlock()
		return
	}
	s.acked = append(s.acked, ackedRecord{partition: r.Partition, offset: r.Offset, value: string(r.Value)})
	s.mu.Unlock()
	select {
	case s.progress <- struct{}{}:
	default:
	}
}

func (s *stream) ackedCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.acked)
}

// waitAcked waits until at least n records are acknowledged and then until one more Produce
// request has been written, so that the caller acts while that request is in flight.
func (s *stream) waitAcked(ctx context.Context, t testing.TB, n int) {
	t.Helper()
	for s.ackedCount() < n {
		select {
		case <-s.progress:
		case <-ctx.Done():
			s.mu.Lock()
			defer s.mu.Unlock()
			t.Fatalf("only %d of %d records acknowledged: %v (first produce error: %v)", len(s.acked), n, ctx.Err(), s.err)
		}
	}
	select {
	case <-s.sent:
	default:
	}
	select {
	case <-s.sent:
	case <-ctx.Done():
		t.Fatalf("no Produce request written after %d acknowledgements: %v", n, ctx.Err())
	}
}

// produceWritten is a kgo hook that signals sent after each Produce request written to a broker.
type produceWritten chan struct{}

// OnBrokerWrite implements kgo.HookBrokerWrite.
func (h produceWritten) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key != 0 || err != nil {
		return
	}
	select {
	case h <- struct{}{}:
	default:
	}
}

// stop ends the stream (failing whatever is not acknowledged yet) and returns the acknowledgements.
func (s *stream) stop() []ackedRecord {
	s.stopOnce.Do(func() {
		s.cancel()
		s.cl.Close()
		<-s.done
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ackedRecord(nil), s.acked...)
}

// produceSync writes count records of a session with acks=all, round-robin over the partitions, and
// returns where the broker put them.
func produceSync(ctx context.Context, t testing.TB, n *node, topic string, session, count int) []ackedRecord {
	t.Helper()
	cl := n.client(t, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	rs := make([]*kgo.Record, count)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: topic, Partition: int32(i % crashPartitions), Value: []byte(recordValue(session, i))}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce session %d to %s: %v", session, topic, err)
	}
	out := make([]ackedRecord, count)
	for i, r := range rs {
		out[i] = ackedRecord{partition: r.Partition, offset: r.Offset, value: string(r.Value)}
	}
	return out
}

// verifyLog reads the whole topic and checks the durability contract against what was acknowledged:
// every acknowledged record is at its acknowledged offset; no value appears twice; per partition the
// offsets have no gaps and the values are in produce order. Records that were sent but never
// acknowledged may or may not be there.
func verifyLog(ctx context.Context, t testing.TB, n *node, topic string, acked []ackedRecord) {
	t.Helper()
	got := n.readAll(ctx, t, topic)
	const maxReports = 10
	reports := 0
	report := func(format string, args ...any) {
		if reports < maxReports {
			t.Errorf(format, args...)
		}
		reports++
	}
	at := map[int32]map[int64]string{}
	seen := map[string]int64{}
	total := 0
	for p, recs := range got {
		at[p] = map[int64]string{}
		for i, r := range recs {
			v := string(r.Value)
			total++
			at[p][r.Offset] = v
			if i > 0 {
				prev := recs[i-1]
				if r.Offset != prev.Offset+1 {
					report("partition %d: offset %d follows %d (gap)", p, r.Offset, prev.Offset)
				}
				if v <= string(prev.Value) {
					report("partition %d: %q at %d after %q at %d (out of produce order)", p, v, r.Offset, prev.Value, prev.Offset)
				}
			}
			if o, dup := seen[v]; dup {
				report("partition %d: %q at offset %d and again at %d (duplicate)", p, v, o, r.Offset)
			}
			seen[v] = r.Offset
		}
	}
	for _, a := range acked {
		v, ok := at[a.partition][a.offset]
		switch {
		case !ok:
			report("acknowledged %q at partition %d offset %d: offset missing", a.value, a.partition, a.offset)
		case v != a.value:
			report("acknowledged %q at partition %d offset %d: found %q there", a.value, a.partition, a.offset, v)
		}
	}
	if reports > maxReports {
		t.Errorf("... and %d more problems", reports-maxReports)
	}
	t.Logf("%s: %d records read back, %d acknowledged ones checked", topic, total, len(acked))
}

// crashCycle streams one producer session into topic, lets at least minAcked records be
// acknowledged, calls stopNode while a Produce request is in flight, and returns the
// acknowledgements.
func crashCycle(ctx context.Context, t *testing.T, n *node, topic string, session, minAcked int, stopNode func()) []ackedRecord {
	t.Helper()
	s := startStream(t, n, topic, session)
	s.waitAcked(ctx, t, minAcked)
	stopNode()
	acked := s.stop()
	t.Logf("session %d: %d records acknowledged before the broker stopped", session, len(acked))
	return acked
}

func TestCrashKillLosesNoAckedRecord(t *testing.T) {
	ctx := testContext(t, 60*time.Second)
	n := startNode(t, nodeOptions{})
	const topic = "crash-kill"
	n.createTopic(ctx, t, topic, crashPartitions, smallSegments)

	acked := crashCycle(ctx, t, n, topic, 1, 2000, n.kill)
	n.restart()
	verifyLog(ctx, t, n, topic, acked)
}

func TestCrashKillRepeatedly(t *testing.T) { crashKillRepeatedly(t) }

// TestCrashKillRepeatedlyJournal is TestCrashKillRepeatedly on a node whose durable appends go through
// the data directory's journal (--storage-journal): a kill -9 leaves acknowledged records in segments
// not yet synced, and the restart replays the journal over them.
func TestCrashKillRepeatedlyJournal(t *testing.T) { crashKillRepeatedly(t, "--storage-journal") }

func crashKillRepeatedly(t *testing.T, args ...string) {
	ctx := testContext(t, 90*time.Second)
	n := startNode(t, nodeOptions{Args: args})
	const topic = "crash-repeat"
	n.createTopic(ctx, t, topic, crashPartitions, smallSegments)

	var acked []ackedRecord
	for session := 1; session <= 5; session++ {
		acked = append(acked, crashCycle(ctx, t, n, topic, session, 1000, n.kill)...)
		n.restart()
		verifyLog(ctx, t, n, topic, acked)
		if t.Failed() {
			t.FailNow()
		}
	}
}

func TestCrashSIGTERMKeepsEverything(t *testing.T) {
	ctx := testContext(t, 60*time.Second)
	n := startNode(t, nodeOptions{})
	const topic = "crash-term"
	n.createTopic(ctx, t, topic, crashPartitions, smallSegments)

	acked := crashCycle(ctx, t, n, topic, 1, 2000, func() {
		if err := n.terminate(); err != nil {
			t.Errorf("exit after SIGTERM: %v (want status 0)", err)
		}
	})
	n.restart()
	verifyLog(ctx, t, n, topic, acked)

	acked = append(acked, produceSync(ctx, t, n, topic, 2, 40)...)
	verifyLog(ctx, t, n, topic, acked)
}

// TestCrashTornTail kills the broker, then makes the newest segment of every partition end in a
// different kind of torn write, all of it bytes the broker never acknowledged: a partial copy of a
// batch, random-looking garbage, a batch header that promises more bytes than follow, and a run of
// zeros (what a file extended by the kernel but never written holds after power loss). Recovery
// must keep every acknowledged record, drop the tails, and append after them.
func TestCrashTornTail(t *testing.T) {
	ctx := testContext(t, 60*time.Second)
	n := startNode(t, nodeOptions{})
	const topic = "crash-torn"
	n.createTopic(ctx, t, topic, crashPartitions, smallSegments)

	acked := crashCycle(ctx, t, n, topic, 1, 2000, n.kill)
	tears := []func(first []byte) []byte{
		func(first []byte) []byte { return first[:len(first)-5] },
		func([]byte) []byte { return pseudoRandom(97) },
		func([]byte) []byte {
			h := make([]byte, 12+20)
			binary.BigEndian.PutUint64(h, 1<<40)
			binary.BigEndian.PutUint32(h[8:], 1<<30)
			return h
		},
		func([]byte) []byte { return make([]byte, 4096) },
	}
	for p, tear := range tears {
		seg := newestSegment(t, filepath.Join(n.dataDir, fmt.Sprintf("%s-%d", topic, p)))
		appendTo(t, seg, tear(firstBatch(t, seg)))
	}
	n.restart()
	verifyLog(ctx, t, n, topic, acked)

	acked = append(acked, produceSync(ctx, t, n, topic, 2, 40)...)
	verifyLog(ctx, t, n, topic, acked)
}

// newestSegment is the .log file with the highest base offset in a partition directory.
func newestSegment(t testing.TB, dir string) string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) == 0 {
		entries, _ := os.ReadDir(filepath.Dir(dir))
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("no .log segment in %s (err %v); data dir holds %v", dir, err, names)
	}
	sort.Strings(logs)
	return logs[len(logs)-1]
}

// firstBatch returns the bytes of the first record batch of a segment file.
func firstBatch(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	if len(data) < 12 {
		t.Fatalf("%s holds %d bytes: no batch to copy", path, len(data))
	}
	size := 12 + int(binary.BigEndian.Uint32(data[8:12]))
	if size <= 12 || size > len(data) {
		t.Fatalf("%s: first batch claims %d bytes of %d", path, size, len(data))
	}
	return data[:size]
}

// appendTo appends b to the file at path and syncs it.
func appendTo(t testing.TB, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatalf("append to %s: %v", path, err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("sync %s: %v", path, err)
	}
	t.Logf("tore %s: %d bytes appended after %d", filepath.Base(filepath.Dir(path))+"/"+filepath.Base(path), len(b), st.Size())
}

// pseudoRandom returns n deterministic bytes that look like noise.
func pseudoRandom(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}
