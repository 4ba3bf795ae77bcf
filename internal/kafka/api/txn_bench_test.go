package api_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// txnBenchRecords is how many records of 1 KiB one round produces each way.
const txnBenchRecords = 100000

// BenchmarkTxnProduceRatio compares, on one node, a franz-go transactional producer committing every
// 100 ms with an idempotent producer, both producing 1 KiB records to 4 partitions with acks=all. Each
// round produces txnBenchRecords records each way; the ratio metric is the transactional throughput
// over the idempotent one (the target is at least 0.8).
func BenchmarkTxnProduceRatio(b *testing.B) {
	n, idem := benchNode(b)
	tx, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.DefaultProduceTopic("bench"),
		kgo.TransactionalID("bench-txn"), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(tx.Close)
	value := make([]byte, 1024)
	ctx := context.Background()
	var idemTime, txnTime time.Duration
	b.SetBytes(2 * txnBenchRecords * int64(len(value)))
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := produceAll(ctx, idem, value, nil); err != nil {
			b.Fatal(err)
		}
		idemTime += time.Since(start)

		start = time.Now()
		if err := tx.BeginTransaction(); err != nil {
			b.Fatal(err)
		}
		last := time.Now()
		commitDue := func() error {
			if time.Since(last) < 100*time.Millisecond {
				return nil
			}
			last = time.Now()
			if err := tx.Flush(ctx); err != nil {
				return err
			}
			if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
				return err
			}
			return tx.BeginTransaction()
		}
		if err := produceAll(ctx, tx, value, commitDue); err != nil {
			b.Fatal(err)
		}
		if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
			b.Fatal(err)
		}
		txnTime += time.Since(start)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*txnBenchRecords)/idemTime.Seconds(), "idem-rec/s")
	b.ReportMetric(float64(b.N*txnBenchRecords)/txnTime.Seconds(), "txn-rec/s")
	b.ReportMetric(idemTime.Seconds()/txnTime.Seconds(), "ratio")
}

// produceAll produces txnBenchRecords records of value with cl and flushes; between records it calls
// between (when not nil), which may flush and commit.
func produceAll(ctx context.Context, cl *kgo.Client, value []byte, between func() error) error {
	var wg sync.WaitGroup
	var errOnce sync.Once
	var firstErr error
	for range txnBenchRecords {
		if between != nil {
			if err := between(); err != nil {
				return err
			}
		}
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				errOnce.Do(func() { firstErr = err })
			}
			wg.Done()
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	wg.Wait()
	return firstErr
}
