package api_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// txnCommitInterval is how often the transactional producer of the benchmarks commits.
const txnCommitInterval = 100 * time.Millisecond

// BenchmarkTxnProduceRatio produces b.N records of 1 KiB to 4 partitions with acks=all twice on one
// node: through a transactional producer that commits every 100 ms, and through an idempotent
// producer without transactions. The two alternate in four rounds (which goes first alternates too),
// so that both see the same machine; a round's last transaction commits at its end. The metric
// txn/idempotent is the ratio of their times; run it with -benchtime 3s or more, so that a round
// spans several commit intervals.
func BenchmarkTxnProduceRatio(b *testing.B) {
	n := startNodeWith(b, nodeConfig(b.TempDir()))
	createBenchTopicNamed(b, n.KafkaAddr(), "bench-txn-produce")
	opts := []kgo.Opt{kgo.SeedBrokers(n.KafkaAddr()), kgo.DefaultProduceTopic("bench-txn-produce"),
		kgo.RequiredAcks(kgo.AllISRAcks())}
	txn := newBenchClientOpts(b, append(opts, kgo.TransactionalID("bench-txn"))...)
	plain := newBenchClientOpts(b, opts...)
	value := make([]byte, 1024)
	b.SetBytes(2 * int64(len(value)))
	b.ResetTimer()
	var tTxn, tPlain time.Duration
	const rounds = 4
	for r := range rounds {
		count := b.N / rounds
		if r < b.N%rounds {
			count++
		}
		if count == 0 {
			continue
		}
		runTxn := func() { tTxn += produceTxn(b, txn, value, count) }
		runPlain := func() { tPlain += producePlain(b, plain, value, count) }
		if r%2 == 0 {
			runTxn()
			runPlain()
		} else {
			runPlain()
			runTxn()
		}
	}
	b.StopTimer()
	if tPlain > 0 {
		b.ReportMetric(float64(tTxn)/float64(tPlain), "txn/idempotent")
		b.ReportMetric(float64(tTxn.Nanoseconds())/float64(b.N), "txn-ns/record")
		b.ReportMetric(float64(tPlain.Nanoseconds())/float64(b.N), "idempotent-ns/record")
	}
}

// produceTxn produces count records in transactions, committing every txnCommitInterval and at the
// end, and returns the time it took.
func produceTxn(b *testing.B, cl *kgo.Client, value []byte, count int) time.Duration {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	if err := cl.BeginTransaction(); err != nil {
		b.Fatal(err)
	}
	began := start
	errs := &firstErr{}
	for range count {
		cl.Produce(ctx, &kgo.Record{Value: value}, errs.promise)
		if time.Since(began) >= txnCommitInterval {
			endTxn(b, cl, errs)
			if err := cl.BeginTransaction(); err != nil {
				b.Fatal(err)
			}
			began = time.Now()
		}
	}
	endTxn(b, cl, errs)
	return time.Since(start)
}

// endTxn flushes the transaction's records and commits it.
func endTxn(b *testing.B, cl *kgo.Client, errs *firstErr) {
	b.Helper()
	if err := cl.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	if err := errs.get(); err != nil {
		b.Fatal(err)
	}
	if err := cl.EndTransaction(context.Background(), kgo.TryCommit); err != nil {
		b.Fatal(err)
	}
}

// producePlain produces count records and waits for all of them, and returns the time it took.
func producePlain(b *testing.B, cl *kgo.Client, value []byte, count int) time.Duration {
	b.Helper()
	start := time.Now()
	errs := &firstErr{}
	for range count {
		cl.Produce(context.Background(), &kgo.Record{Value: value}, errs.promise)
	}
	if err := cl.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	if err := errs.get(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// BenchmarkTxnConsumeRatio reads b.N records of 1 KiB from 4 partitions, written before the timer
// starts by a transactional producer committing every 100 ms, twice per round over four rounds: once
// read_committed and once read_uncommitted, in alternating order. The metric
// read_committed/read_uncommitted is the ratio of their times.
func BenchmarkTxnConsumeRatio(b *testing.B) {
	n := startNodeWith(b, nodeConfig(b.TempDir()))
	const topic = "bench-txn-consume"
	createBenchTopicNamed(b, n.KafkaAddr(), topic)
	txn := newBenchClientOpts(b, kgo.SeedBrokers(n.KafkaAddr()), kgo.DefaultProduceTopic(topic),
		kgo.TransactionalID("bench-txn-consume"))
	value := make([]byte, 1024)
	produceTxn(b, txn, value, b.N)
	read := func(level kgo.IsolationLevel) time.Duration {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(level))
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		start := time.Now()
		for got := 0; got < b.N; {
			fs := cl.PollFetches(context.Background())
			if err := fs.Err(); err != nil {
				b.Fatal(err)
			}
			got += fs.NumRecords()
		}
		return time.Since(start)
	}
	const rounds = 4
	b.SetBytes(2 * rounds * int64(len(value)))
	b.ResetTimer()
	var tCommitted, tUncommitted time.Duration
	for r := range rounds {
		if r%2 == 0 {
			tCommitted += read(kgo.ReadCommitted())
			tUncommitted += read(kgo.ReadUncommitted())
		} else {
			tUncommitted += read(kgo.ReadUncommitted())
			tCommitted += read(kgo.ReadCommitted())
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(tCommitted)/float64(tUncommitted), "read_committed/read_uncommitted")
}

// firstErr keeps the first error of produce promises.
type firstErr struct {
	mu  sync.Mutex
	err error
}

func (f *firstErr) promise(_ *kgo.Record, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}

func (f *firstErr) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// newBenchClientOpts is a franz-go client with opts, closed when the benchmark ends.
func newBenchClientOpts(b *testing.B, opts ...kgo.Opt) *kgo.Client {
	b.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return cl
}

// createBenchTopicNamed creates a topic of 4 partitions on the node at addr.
func createBenchTopicNamed(b *testing.B, addr, topic string) {
	b.Helper()
	cl := newBenchClientOpts(b, kgo.SeedBrokers(addr))
	resp, err := kadm.NewClient(cl).CreateTopic(context.Background(), 4, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		b.Fatalf("create %s: %v", topic, err)
	}
}

// BenchmarkTxnCommitLatency measures, on one node, how long a transaction's commit takes (franz-go's
// EndTransaction after one 1 KiB record, as a client waits for it) against one round of the disk's own
// durability: a 1 KiB write and an fdatasync of a file in the node's data directory. The two alternate
// record by record, so both see the same machine, and the metric commit-p99/fsync-p99 is the ratio of
// their 99th percentiles (the target: at most 3).
func BenchmarkTxnCommitLatency(b *testing.B) {
	dir := b.TempDir()
	n := startNodeWith(b, nodeConfig(dir))
	createBenchTopicNamed(b, n.KafkaAddr(), "bench-txn-commit")
	cl := newBenchClientOpts(b, kgo.SeedBrokers(n.KafkaAddr()), kgo.DefaultProduceTopic("bench-txn-commit"),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.TransactionalID("bench-commit"))
	f, err := os.Create(filepath.Join(dir, "fsync-probe"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	value := make([]byte, 1024)
	commits := make([]time.Duration, 0, b.N)
	syncs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		if err := cl.BeginTransaction(); err != nil {
			b.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			b.Fatal(err)
		}
		commits = append(commits, time.Since(start))
		start = time.Now()
		if _, err := f.Write(value); err != nil {
			b.Fatal(err)
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
		syncs = append(syncs, time.Since(start))
	}
	b.StopTimer()
	p99 := func(ds []time.Duration) time.Duration {
		slices.Sort(ds)
		return ds[min(len(ds)-1, len(ds)*99/100)]
	}
	c, s := p99(commits), p99(syncs)
	b.ReportMetric(float64(c.Microseconds()), "commit-p99-µs")
	b.ReportMetric(float64(s.Microseconds()), "fsync-p99-µs")
	b.ReportMetric(float64(c)/float64(s), "commit-p99/fsync-p99")
}
