package test

import (
	"fmt"
	"testing"
	"time"
)

// histBuilder builds hand-made histories for checkQueue's tests.
type histBuilder struct {
	h   queueHistory
	now time.Time
}

func newHistBuilder() *histBuilder {
	return &histBuilder{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// ack adds a send of key/value acknowledged at partition/offset, a millisecond after the last.
func (b *histBuilder) ack(key, value string, partition int32, offset int64) *histBuilder {
	b.now = b.now.Add(time.Millisecond)
	b.h.sends = append(b.h.sends, sendOp{seq: len(b.h.sends), key: key, value: value, outcome: sendAcked,
		partition: partition, offset: offset, at: b.now})
	return b
}

// fail adds a send with the given non-acknowledged outcome.
func (b *histBuilder) fail(key, value string, outcome sendOutcome) *histBuilder {
	b.now = b.now.Add(time.Millisecond)
	b.h.sends = append(b.h.sends, sendOp{seq: len(b.h.sends), key: key, value: value, outcome: outcome, at: b.now})
	return b
}

// read adds reads by reader of partition at the offsets, each with the value given after it.
func (b *histBuilder) read(reader string, partition int32, offsetValues ...any) *histBuilder {
	for i := 0; i < len(offsetValues); i += 2 {
		b.h.polls = append(b.h.polls, pollOp{reader: reader, partition: partition,
			offset: int64(offsetValues[i].(int)), value: offsetValues[i+1].(string)})
	}
	return b
}

// commit adds an acknowledged commit of partition at offset, then a read-back sent after it that
// answered got.
func (b *histBuilder) commit(partition int32, offset, got int64) *histBuilder {
	b.now = b.now.Add(time.Millisecond)
	b.h.commits = append(b.h.commits, commitOp{partition: partition, offset: offset, acked: true, at: b.now})
	b.now = b.now.Add(time.Millisecond)
	b.h.fetches = append(b.h.fetches, fetchOp{partition: partition, offset: got, sent: b.now})
	return b
}

// readCommitted adds reads by a read_committed reader, as read does.
func (b *histBuilder) readCommitted(reader string, partition int32, offsetValues ...any) *histBuilder {
	n := len(b.h.polls)
	b.read(reader, partition, offsetValues...)
	for i := n; i < len(b.h.polls); i++ {
		b.h.polls[i].committed = true
	}
	return b
}

// txnWrite is one record of a hand-made transaction, and where its produce put it.
type txnWrite struct {
	key, value string
	partition  int32
	offset     int64
}

// txn adds a transaction of writes that ended with outcome, a millisecond after the last send.
func (b *histBuilder) txn(outcome txnOutcome, writes ...txnWrite) *histBuilder {
	id := b.h.beginTxn()
	for _, w := range writes {
		seq := b.h.txnSend(id, w.key, w.value)
		b.h.sends[seq].partition, b.h.sends[seq].offset = w.partition, w.offset
		b.h.sends[seq].at = b.now
	}
	b.h.endTxn(id, outcome)
	b.now = b.now.Add(time.Millisecond)
	for _, seq := range b.h.txns[id-1].sends {
		b.h.sends[seq].at = b.now
	}
	return b
}

// txnBase is clean plus three transactions, read by the read_uncommitted final read: one committed
// (t1a, t1b), one aborted (t2a, at 0/3; 0/4 is its marker) and one committed (t3a).
func txnBase() *histBuilder {
	return clean().
		txn(txnCommitted, txnWrite{"a", "t1a", 0, 2}, txnWrite{"b", "t1b", 1, 1}).
		txn(txnAborted, txnWrite{"a", "t2a", 0, 3}).
		txn(txnCommitted, txnWrite{"a", "t3a", 0, 5}).
		read("final", 0, 2, "t1a", 3, "t2a", 5, "t3a").read("final", 1, 1, "t1b")
}

// txnClean is txnBase with a final read_committed read of everything committed: no anomaly.
func txnClean() *histBuilder {
	return txnBase().
		readCommitted(readerFinalCommitted, 0, 0, "v0", 1, "v2", 2, "t1a", 5, "t3a").
		readCommitted(readerFinalCommitted, 1, 0, "v1", 1, "t1b")
}

// withUnknownTxn adds a transaction whose commit is unknown (t4a at 0/6, t4b at 1/2), which the
// read_uncommitted final read shows.
func withUnknownTxn(b *histBuilder) *histBuilder {
	return b.txn(txnUnknown, txnWrite{"a", "t4a", 0, 6}, txnWrite{"b", "t4b", 1, 2}).
		read("final", 0, 6, "t4a").read("final", 1, 2, "t4b")
}

// clean is a history with no anomaly: three acknowledged sends of two keys on two partitions, a
// live reader that saw part, and a final read of everything. Each case below breaks it one way.
func clean() *histBuilder {
	return newHistBuilder().
		ack("a", "v0", 0, 0).ack("b", "v1", 1, 0).ack("a", "v2", 0, 1).
		read("live", 0, 0, "v0").
		read("final", 0, 0, "v0", 1, "v2").read("final", 1, 0, "v1")
}

// TestQueueCheck gives checkQueue one hand-made history per anomaly; each must be reported as
// that anomaly and as nothing else, and the clean history as nothing at all.
func TestQueueCheck(t *testing.T) {
	cases := []struct {
		name string
		h    *histBuilder
		want string // "" for none
	}{
		{"clean", clean(), ""},
		{"indeterminate sends never read", clean().fail("c", "v3", sendUnknown).fail("c", "v4", sendPending), ""},
		{"an indeterminate send read once", clean().fail("b", "v3", sendUnknown).read("final", 1, 1, "v3"), ""},
		{"lost", clean().ack("b", "v3", 1, 1), anomalyLost},
		{"duplicate", clean().read("final", 0, 2, "v2"), anomalyDuplicate},
		{"an indeterminate send read twice", clean().fail("b", "v3", sendUnknown).
			read("final", 1, 1, "v3", 2, "v3"), anomalyDuplicate},
		{"inconsistent offsets between reads", clean().read("other", 1, 0, "vX"), anomalyInconsistentOffsets},
		{"inconsistent offsets between a send and a read", clean().fail("b", "v3", sendUnknown).
			ack("b", "v4", 1, 1).read("final", 1, 1, "v3", 2, "v4"), anomalyInconsistentOffsets},
		{"poll skip", clean().read("live", 0, 2, "v5").read("final", 0, 2, "v5").fail("a", "v5", sendUnknown), anomalyPollSkip},
		{"nonmonotonic poll", clean().read("live", 0, 0, "v0"), anomalyNonmonotonicPoll},
		{"nonmonotonic send", clean().ack("a", "v3", 0, 2).ack("a", "v4", 1, 1).
			read("final", 0, 2, "v3").read("final", 1, 1, "v4"), anomalyNonmonotonicSend},
		{"commits read back", clean().commit(0, 5, 5).commit(0, 9, 9), ""},
		{"an unacknowledged commit read back lower", func() *histBuilder {
			b := clean().commit(0, 5, 5)
			b.h.commits = append(b.h.commits, commitOp{partition: 0, offset: 9, at: b.now.Add(time.Millisecond)})
			b.h.fetches = append(b.h.fetches, fetchOp{partition: 0, offset: 5, sent: b.now.Add(2 * time.Millisecond)})
			return b
		}(), ""},
		{"commit regressed", clean().commit(0, 5, 5).commit(0, 9, 5), anomalyCommitRegressed},
		{"transactions read right", txnClean(), ""},
		{"G1a: read_committed shows an aborted record", txnClean().readCommitted("live-rc", 0, 3, "t2a"), anomalyAbortedRead},
		{"read_committed skips a committed record", txnClean().readCommitted("live-rc", 0, 1, "v2", 5, "t3a"), anomalyPollSkip},
		{"a committed record read only by read_uncommitted", txnBase().
			readCommitted(readerFinalCommitted, 0, 0, "v0", 1, "v2", 2, "t1a").
			readCommitted(readerFinalCommitted, 1, 0, "v1", 1, "t1b"), anomalyLost},
		{"an unknown transaction read in part", withUnknownTxn(txnClean()).readCommitted(readerFinalCommitted, 0, 6, "t4a"), anomalyPartialTxn},
		{"an unknown transaction read whole", withUnknownTxn(txnClean()).
			readCommitted(readerFinalCommitted, 0, 6, "t4a").readCommitted(readerFinalCommitted, 1, 2, "t4b"), ""},
		{"an unknown transaction not read by read_committed", withUnknownTxn(txnClean()), ""},
		{"nonmonotonic send within a partition", newHistBuilder().ack("a", "v0", 0, 1).ack("a", "v1", 0, 0).
			read("final", 0, 0, "v1", 1, "v0"), anomalyNonmonotonicSend},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := checkQueue(&c.h.h)
			for _, k := range anomalyKinds {
				want := 0
				if k == c.want {
					want = 1
				}
				if r.anomalies[k] != want {
					t.Errorf("%s: %d, want %d\n%s", k, r.anomalies[k], want, r)
				}
			}
		})
	}
}

// TestQueueCheckTxnCounts checks that sends in transactions count by their transactions' outcomes,
// not as sends.
func TestQueueCheckTxnCounts(t *testing.T) {
	r := checkQueue(&withUnknownTxn(txnClean()).h)
	if r.offered != 3 || r.acked != 3 || r.txnsCommitted != 2 || r.txnsAborted != 1 || r.txnsUnknown != 1 {
		t.Errorf("counts: %s", r)
	}
}

// TestQueueCheckCounts checks the send counts and the share acknowledged.
func TestQueueCheckCounts(t *testing.T) {
	b := clean().fail("c", "v3", sendFailed).fail("c", "v4", sendUnknown).fail("c", "v5", sendPending)
	r := checkQueue(&b.h)
	if r.offered != 6 || r.acked != 3 || r.failed != 1 || r.unknown != 2 || r.read != 3 {
		t.Errorf("counts: %s", r)
	}
	if r.ackedShare() != 0.5 {
		t.Errorf("acknowledged share %v, want 0.5", r.ackedShare())
	}
}

// TestQueueCheckUnavailability checks the longest gap between acknowledgements per fault: the
// gap of the partition that stalled, not of the one that went on, and only for the fault whose
// window it overlaps.
func TestQueueCheckUnavailability(t *testing.T) {
	b := newHistBuilder()
	t0 := b.now
	for i := range 10 {
		b.ack("a", fmt.Sprintf("a%d", i), 0, int64(i))
	}
	b.now = t0.Add(time.Second)
	b.ack("b", "b0", 1, 0)
	for i := range 5 {
		b.ack("a", fmt.Sprintf("a%d", 10+i), 0, int64(10+i))
	}
	b.ack("b", "b1", 1, 1)
	b.h.faults = []faultWindow{
		{name: "cut", start: t0.Add(100 * time.Millisecond), end: t0.Add(200 * time.Millisecond)},
		{name: "later", start: t0.Add(1100 * time.Millisecond), end: t0.Add(1200 * time.Millisecond)},
	}
	r := checkQueue(&b.h)
	if len(r.unavailable) != 2 {
		t.Fatalf("unavailable: %v", r.unavailable)
	}
	// Partition 1's first acknowledgement comes a second after the first send's: the whole second.
	if u := r.unavailable[0]; u.partition != 1 || u.gap != time.Second {
		t.Errorf("cut: %+v, want partition 1 for 1s", u)
	}
	if u := r.unavailable[1]; u.gap != 0 {
		t.Errorf("later: %+v, want no gap: no acknowledgement gap overlaps it", u)
	}
}
