package test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// In the transactional mode of a scenario, a transactional franz-go producer writes netTopic
// alongside the plain one: a transaction every netTxnEvery, each of netTxnRecords records over the
// three partitions, every third aborted on purpose and the others committed unless something
// failed. A read_committed reader polls throughout, and once the producers have stopped and every
// transaction has ended, a final read_committed read takes every partition from its start; the
// checker holds both to what the producer learned (G1a, partial-txn, lost).

const (
	// netTxnID is the producer's transactional id.
	netTxnID = "netfault-txn"
	// netTxnEvery paces the transactions; netTxnRecords is the records in each.
	netTxnEvery   = 100 * time.Millisecond
	netTxnRecords = 6
	// netTxnTimeout is the producer's transaction timeout: a transaction left open when the
	// producer's session failed is aborted by the coordinator after it (netArgs check for timed-out
	// transactions every second), so read_committed readers wait on it no longer.
	netTxnTimeout = 10 * time.Second
	// netTxnWait bounds each of a transaction's flush, abort of buffered records and end.
	netTxnWait = 15 * time.Second
)

// txnOpts are the transactional producer's options.
func (c *netCluster) txnOpts() []kgo.Opt {
	return append(c.clientOpts(), kgo.TransactionalID(netTxnID), kgo.TransactionTimeout(netTxnTimeout),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
}

// startTxnProducer runs transactions until stopped. A client whose transaction failed is closed and
// a new one made with the same transactional id, as an application restarts: its InitProducerId
// fences the old session and ends what that left open.
func (c *netCluster) startTxnProducer() {
	ctx, cancel := context.WithCancel(context.Background())
	c.stopTxn, c.txnDone = cancel, make(chan struct{})
	go func() {
		defer close(c.txnDone)
		var cl *kgo.Client
		defer func() {
			if cl != nil {
				cl.Close()
			}
		}()
		tick := time.NewTicker(netTxnEvery)
		defer tick.Stop()
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if cl == nil {
				var err error
				if cl, err = kgo.NewClient(c.txnOpts()...); err != nil {
					c.noteErr("transactional client", err)
					continue
				}
			}
			if !c.runTxn(cl, n) {
				cl.Close()
				cl = nil
			}
		}
	}()
}

// runTxn runs transaction n on cl and records it: committed unless n is a multiple of 3 or a record
// failed. Its outcome is what the producer can know: committed when the commit was acknowledged,
// aborted when no commit was asked for (the coordinator can then only abort it), unknown when a
// commit was asked for and not acknowledged. It reports whether cl can go on.
func (c *netCluster) runTxn(cl *kgo.Client, n int) bool {
	id := c.hist.beginTxn()
	if err := cl.BeginTransaction(); err != nil {
		c.noteErr("begin transaction", err)
		c.hist.endTxn(id, txnAborted)
		return false
	}
	var failed atomic.Bool
	for i := range netTxnRecords {
		p := int32(i % netPartitions)
		key := fmt.Sprintf("txn-p%d", p)
		value := fmt.Sprintf("t%06d-%d", n, i)
		seq := c.hist.txnSend(id, key, value)
		r := &kgo.Record{Topic: netTopic, Partition: p, Key: []byte(key), Value: []byte(value)}
		cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
			if err != nil {
				failed.Store(true)
				c.noteErr("transactional produce", err)
				return
			}
			c.hist.wrote(seq, r.Partition, r.Offset)
		})
	}
	ok := true
	flushCtx, cancel := context.WithTimeout(context.Background(), netTxnWait)
	defer cancel()
	if err := cl.Flush(flushCtx); err != nil {
		c.noteErr("transactional flush", err)
		ok = false
		abortCtx, cancel := context.WithTimeout(context.Background(), netTxnWait)
		defer cancel()
		if err := cl.AbortBufferedRecords(abortCtx); err != nil {
			c.noteErr("abort buffered records", err)
		}
	}
	ok = ok && !failed.Load()
	commit := ok && n%3 != 0
	endCtx, cancel := context.WithTimeout(context.Background(), netTxnWait)
	defer cancel()
	if err := cl.EndTransaction(endCtx, kgo.TransactionEndTry(commit)); err != nil {
		c.noteErr("end transaction", err)
		if commit {
			c.hist.endTxn(id, txnUnknown)
		} else {
			c.hist.endTxn(id, txnAborted)
		}
		return false
	}
	if commit {
		c.hist.endTxn(id, txnCommitted)
	} else {
		c.hist.endTxn(id, txnAborted)
	}
	return ok
}

// stopTxnProducer stops the transactions after the one under way.
func (c *netCluster) stopTxnProducer() {
	if c.stopTxn == nil {
		return
	}
	c.stopTxn()
	<-c.txnDone
	c.stopTxn = nil
}

// waitTxnsEnded waits until no transaction is open on netTopic: every partition's last stable
// offset has reached its high watermark.
func (c *netCluster) waitTxnsEnded(ctx context.Context, adm *kadm.Client) {
	c.t.Helper()
	for {
		ends, err := adm.ListEndOffsets(ctx, netTopic)
		if err == nil {
			err = ends.Error()
		}
		var stable kadm.ListedOffsets
		if err == nil {
			stable, err = adm.ListCommittedOffsets(ctx, netTopic)
		}
		if err == nil {
			err = stable.Error()
		}
		open := 0
		if err == nil {
			ends.Each(func(o kadm.ListedOffset) {
				if s, ok := stable.Lookup(netTopic, o.Partition); !ok || s.Offset < o.Offset {
					open++
				}
			})
			if open == 0 {
				return
			}
		}
		if ctx.Err() != nil {
			c.t.Fatalf("transactions still open on %s (%d partitions, %v): %v", netTopic, open, err, ctx.Err())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// finalCommittedRead reads every partition from its start with read_committed into the history.
func (c *netCluster) finalCommittedRead(ctx context.Context) {
	c.t.Helper()
	var ops []pollOp
	for p, recs := range c.nodes[0].readAllAt(ctx, c.t, netTopic, kgo.ReadCommitted()) {
		for _, r := range recs {
			ops = append(ops, pollOp{reader: readerFinalCommitted, partition: p, offset: r.Offset, value: string(r.Value), committed: true})
		}
	}
	c.hist.poll(ops...)
}
