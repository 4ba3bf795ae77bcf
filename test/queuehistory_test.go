package test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// A queueHistory is what the clients of a fault test saw, in the terms of Jepsen's queue
// workloads: every record handed to a producer (a send) with its outcome, every record a reader
// got (a poll) with its partition and offset, the transactions sends were made in with their
// outcome, and the faults injected meanwhile. checkQueue reads it back; nothing in it is computed
// from the brokers' own view.
type queueHistory struct {
	mu     sync.Mutex
	sends  []sendOp // by seq
	polls  []pollOp // in the order each reader got them
	faults []faultWindow
	// commits are a group's offset commits, fetches what OffsetFetch answered for the group.
	commits []commitOp
	fetches []fetchOp
	// txns are the transactions of a transactional producer; a send's txn indexes them from 1.
	txns []txnOp
}

// txnOutcome is what a transactional producer learned about one transaction.
type txnOutcome int

const (
	txnOpen      txnOutcome = iota // not ended yet; an open transaction at the end is indeterminate
	txnCommitted                   // EndTxn with commit was acknowledged
	txnAborted                     // never asked to commit (so it can only end aborted), or EndTxn with abort was acknowledged
	txnUnknown                     // the commit was asked for and not acknowledged: it may have committed
)

// txnOp is one transaction: the seqs of its sends and its outcome.
type txnOp struct {
	sends   []int
	outcome txnOutcome
}

// commitOp is one offset commit of one partition, with its outcome: acked is set when the
// coordinator acknowledged it, at the time the answer came.
type commitOp struct {
	partition int32
	offset    int64
	acked     bool
	at        time.Time
}

// fetchOp is one committed offset OffsetFetch answered; sent is when the request was sent.
type fetchOp struct {
	partition int32
	offset    int64
	sent      time.Time
}

// sendOutcome is what a producer learned about one send.
type sendOutcome int

const (
	sendPending sendOutcome = iota // no answer yet; a pending send at the end is indeterminate
	sendAcked                      // acknowledged at a partition and offset
	sendFailed                     // definitely not written: refused before it was sent
	sendUnknown                    // may or may not have been written (a timeout, a lost connection)
	sendAborted                    // written in a transaction that aborted: read_committed must never show it
)

// sendOp is one send; seq is the order the producer was handed the records in. A send in a
// transaction is acknowledged once its transaction's commit is: until then partition and offset
// are where its produce request put it, and its outcome is pending.
type sendOp struct {
	seq        int
	key, value string
	outcome    sendOutcome
	partition  int32
	offset     int64
	at         time.Time // when the outcome was learned
	txn        int       // the transaction, from 1; 0 for none
}

// pollOp is one record a reader got; committed is set for a read_committed reader.
type pollOp struct {
	reader    string
	partition int32
	offset    int64
	value     string
	committed bool
}

// readerFinalCommitted is the reader of the final read_committed read, made once every transaction
// has ended: it reads each partition from its start to its end, so it shows every committed
// transaction whole and nothing of an aborted one.
const readerFinalCommitted = "final-committed"

// faultWindow is one fault, from its injection to its healing.
type faultWindow struct {
	name       string
	start, end time.Time
}

// send records a new send and returns its seq.
func (h *queueHistory) send(key, value string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sends = append(h.sends, sendOp{seq: len(h.sends), key: key, value: value})
	return len(h.sends) - 1
}

// complete records the outcome of send seq.
func (h *queueHistory) complete(seq int, outcome sendOutcome, partition int32, offset int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &h.sends[seq]
	s.outcome, s.partition, s.offset, s.at = outcome, partition, offset, time.Now()
}

// beginTxn records a new transaction and returns its number (from 1).
func (h *queueHistory) beginTxn() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.txns = append(h.txns, txnOp{})
	return len(h.txns)
}

// txnSend records a new send in transaction txn and returns its seq.
func (h *queueHistory) txnSend(txn int, key, value string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	seq := len(h.sends)
	h.sends = append(h.sends, sendOp{seq: seq, key: key, value: value, txn: txn})
	h.txns[txn-1].sends = append(h.txns[txn-1].sends, seq)
	return seq
}

// wrote records where the produce request of send seq, in a transaction, put it (at is set to the
// answer's time; the outcome stays pending until the transaction ends).
func (h *queueHistory) wrote(seq int, partition int32, offset int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &h.sends[seq]
	s.partition, s.offset, s.at = partition, offset, time.Now()
}

// endTxn records the outcome of transaction txn and so of its sends: committed ones are
// acknowledged where their produce put them (or indeterminate if no produce answer came), aborted
// ones aborted, the others indeterminate.
func (h *queueHistory) endTxn(txn int, outcome txnOutcome) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := &h.txns[txn-1]
	t.outcome = outcome
	now := time.Now()
	for _, seq := range t.sends {
		s := &h.sends[seq]
		switch {
		case outcome == txnCommitted && !s.at.IsZero():
			s.outcome = sendAcked
		case outcome == txnAborted:
			s.outcome = sendAborted
		default:
			s.outcome = sendUnknown
		}
		s.at = now
	}
}

// poll records what one reader got.
func (h *queueHistory) poll(ops ...pollOp) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.polls = append(h.polls, ops...)
}

// commit records the outcome of an offset commit.
func (h *queueHistory) commit(ops ...commitOp) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.commits = append(h.commits, ops...)
}

// fetched records committed offsets read back.
func (h *queueHistory) fetched(ops ...fetchOp) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fetches = append(h.fetches, ops...)
}

// fault records a fault window.
func (h *queueHistory) fault(name string, start, end time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults = append(h.faults, faultWindow{name: name, start: start, end: end})
}

// ackedSince reports whether every one of partitions has an acknowledgement after t.
func (h *queueHistory) ackedSince(t time.Time, partitions int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[int32]bool{}
	for i := len(h.sends) - 1; i >= 0 && len(seen) < partitions; i-- {
		if s := h.sends[i]; s.outcome == sendAcked && s.at.After(t) {
			seen[s.partition] = true
		}
	}
	return len(seen) == partitions
}

// The anomalies checkQueue reports, by Jepsen's names for queues.
const (
	anomalyLost                = "lost"                 // acknowledged, never read
	anomalyDuplicate           = "duplicate"            // one value read at two offsets
	anomalyInconsistentOffsets = "inconsistent-offsets" // one offset, two values (read or acknowledged)
	anomalyPollSkip            = "poll-skip"            // a reader went past offsets that exist
	anomalyNonmonotonicPoll    = "nonmonotonic-poll"    // a reader went back (or read an offset again)
	anomalyNonmonotonicSend    = "nonmonotonic-send"    // a later send of a key acknowledged before an earlier one
	// Jepsen's queue workloads have no group offsets; this one is weir's: a committed offset read
	// back below one whose commit was acknowledged before the read was sent.
	anomalyCommitRegressed = "commit-regressed"
	// A read_committed reader got a record of an aborted transaction: Jepsen's Kafka workload
	// (jepsen.tests.kafka) reports this aborted read as G1a, Adya's name.
	anomalyAbortedRead = "G1a"
	// The final read_committed read shows some records of a transaction and not the others: a
	// transaction is all or nothing to read_committed. Jepsen's Kafka workload has no check of its
	// own for it (its notes call it an intermediate read, not clearly defined); the name is weir's.
	anomalyPartialTxn = "partial-txn"
)

// anomalyKinds are every anomaly checkQueue knows, in report order.
var anomalyKinds = []string{anomalyLost, anomalyDuplicate, anomalyInconsistentOffsets,
	anomalyPollSkip, anomalyNonmonotonicPoll, anomalyNonmonotonicSend, anomalyCommitRegressed,
	anomalyAbortedRead, anomalyPartialTxn}

// queueReport is checkQueue's verdict. The send counts are of sends outside transactions; those in
// transactions are counted by their transactions' outcomes.
type queueReport struct {
	offered, acked, failed, unknown int
	read                            int // distinct values read
	readCommitted                   int // distinct values read by read_committed readers
	// Transactions committed, aborted, and open or indeterminate at the end.
	txnsCommitted, txnsAborted, txnsUnknown int
	commitsAcked, commitsRead               int // group offset commits acknowledged, and read back
	anomalies                               map[string]int
	examples                                map[string][]string // the first few of each kind
	unavailable                             []unavailability
}

// unavailability is, for one fault, the longest time a partition went without an acknowledged
// send, over the gaps between acknowledgements that overlap the fault's window.
type unavailability struct {
	fault     string
	partition int32
	gap       time.Duration
}

// maxExamples bounds the examples kept per anomaly kind.
const maxExamples = 5

func (r *queueReport) add(kind, format string, args ...any) {
	r.anomalies[kind]++
	if len(r.examples[kind]) < maxExamples {
		r.examples[kind] = append(r.examples[kind], fmt.Sprintf(format, args...))
	}
}

// total is the count of every anomaly.
func (r *queueReport) total() int {
	n := 0
	for _, c := range r.anomalies {
		n += c
	}
	return n
}

// String is the report as the tests log it.
func (r *queueReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d offered, %d acknowledged (%.2f%%), %d failed, %d indeterminate, %d distinct values read",
		r.offered, r.acked, 100*r.ackedShare(), r.failed, r.unknown, r.read)
	if r.commitsAcked+r.commitsRead > 0 {
		fmt.Fprintf(&b, "; %d offset commits acknowledged, %d read back", r.commitsAcked, r.commitsRead)
	}
	if r.txnsCommitted+r.txnsAborted+r.txnsUnknown > 0 {
		fmt.Fprintf(&b, "; transactions: %d committed, %d aborted, %d indeterminate; %d distinct values read with read_committed",
			r.txnsCommitted, r.txnsAborted, r.txnsUnknown, r.readCommitted)
	}
	for _, k := range anomalyKinds {
		if r.anomalies[k] > 0 {
			fmt.Fprintf(&b, "\n%s: %d, e.g. %s", k, r.anomalies[k], strings.Join(r.examples[k], "; "))
		}
	}
	if r.total() == 0 {
		b.WriteString("\nno anomalies")
	}
	for _, u := range r.unavailable {
		fmt.Fprintf(&b, "\nunavailable during %s: %v (partition %d)", u.fault, u.gap.Round(time.Millisecond), u.partition)
	}
	return b.String()
}

// ackedShare is the fraction of offered records that were acknowledged.
func (r *queueReport) ackedShare() float64 {
	if r.offered == 0 {
		return 0
	}
	return float64(r.acked) / float64(r.offered)
}

// position is one offset of one partition.
type position struct {
	partition int32
	offset    int64
}

// checkQueue checks a history, which must be complete: its polls include a final read of every
// partition made after the last send had its answer.
func checkQueue(h *queueHistory) *queueReport {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := &queueReport{anomalies: map[string]int{}, examples: map[string][]string{}}
	for _, t := range h.txns {
		switch t.outcome {
		case txnCommitted:
			r.txnsCommitted++
		case txnAborted:
			r.txnsAborted++
		default:
			r.txnsUnknown++
		}
	}
	for _, s := range h.sends {
		if s.txn != 0 {
			continue
		}
		r.offered++
		switch s.outcome {
		case sendAcked:
			r.acked++
		case sendFailed:
			r.failed++
		default:
			r.unknown++
		}
	}
	readAt := checkOffsets(r, h)
	checkReaders(r, h, readAt)
	checkSendOrder(r, h)
	checkCommits(r, h)
	checkTxns(r, h)
	r.unavailable = unavailabilities(h)
	return r
}

// checkOffsets reports inconsistent offsets, duplicates and lost records, and returns what was
// read at each position.
func checkOffsets(r *queueReport, h *queueHistory) map[position]string {
	readAt := map[position]string{}
	where := map[string][]position{} // distinct positions each value was read at
	readCommitted := map[string]bool{}
	for _, p := range h.polls {
		if p.committed {
			readCommitted[p.value] = true
		}
		pos := position{p.partition, p.offset}
		if v, ok := readAt[pos]; ok && v != p.value {
			r.add(anomalyInconsistentOffsets, "%d/%d read as %s and as %s", pos.partition, pos.offset, v, p.value)
			continue
		}
		readAt[pos] = p.value
		if !slices.Contains(where[p.value], pos) {
			where[p.value] = append(where[p.value], pos)
		}
	}
	r.read, r.readCommitted = len(where), len(readCommitted)
	for v, ps := range where {
		if len(ps) > 1 {
			r.add(anomalyDuplicate, "%s read at %v", v, ps)
		}
	}
	for _, s := range h.sends {
		if s.outcome != sendAcked {
			continue
		}
		pos := position{s.partition, s.offset}
		if v, ok := readAt[pos]; ok && v != s.value {
			r.add(anomalyInconsistentOffsets, "%d/%d acknowledged for %s, read as %s", pos.partition, pos.offset, s.value, v)
		}
		if len(where[s.value]) == 0 {
			r.add(anomalyLost, "%s acknowledged at %d/%d, never read", s.value, pos.partition, pos.offset)
		} else if s.txn != 0 && !readCommitted[s.value] {
			r.add(anomalyLost, "%s committed at %d/%d, never read by a read_committed reader", s.value, pos.partition, pos.offset)
		}
	}
	return readAt
}

// checkReaders reports, per reader and partition, a poll that goes back or repeats an offset
// (nonmonotonic poll) and one that jumps over offsets some reader saw (poll skip). A read_committed
// reader skips, rightly, the records of transactions that did not commit: for it the offsets that
// exist are those a read_committed reader saw and those holding a record sent outside a
// transaction or in a committed one, or in one whose outcome is unknown if a read_committed reader
// saw it (then it committed).
func checkReaders(r *queueReport, h *queueHistory, readAt map[position]string) {
	sendOf := map[string]sendOp{}
	for _, s := range h.sends {
		sendOf[s.value] = s
	}
	seenCommitted := map[position]bool{}
	for _, p := range h.polls {
		if p.committed {
			seenCommitted[position{p.partition, p.offset}] = true
		}
	}
	known := map[int32][]int64{}          // per partition, every offset read, sorted
	knownCommitted := map[int32][]int64{} // per partition, the offsets a read_committed reader must not skip
	for pos, v := range readAt {
		known[pos.partition] = append(known[pos.partition], pos.offset)
		if s, ok := sendOf[v]; !ok || s.txn == 0 || s.outcome == sendAcked || s.outcome != sendAborted && seenCommitted[pos] {
			knownCommitted[pos.partition] = append(knownCommitted[pos.partition], pos.offset)
		}
	}
	for _, m := range []map[int32][]int64{known, knownCommitted} {
		for _, offs := range m {
			slices.Sort(offs)
		}
	}
	last := map[string]int64{} // by reader and partition
	for _, p := range h.polls {
		k := fmt.Sprintf("%s/%d", p.reader, p.partition)
		prev, ok := last[k]
		last[k] = p.offset
		if !ok {
			continue
		}
		if p.offset <= prev {
			r.add(anomalyNonmonotonicPoll, "%s read %d/%d after %d", p.reader, p.partition, p.offset, prev)
			continue
		}
		offs := known[p.partition]
		if p.committed {
			offs = knownCommitted[p.partition]
		}
		i, _ := slices.BinarySearch(offs, prev+1)
		if i < len(offs) && offs[i] < p.offset {
			r.add(anomalyPollSkip, "%s read %d/%d after %d, skipping %d", p.reader, p.partition, p.offset, prev, offs[i])
		}
	}
}

// checkSendOrder reports a key whose acknowledged sends are not at increasing offsets of one
// partition in the order they were sent.
func checkSendOrder(r *queueReport, h *queueHistory) {
	last := map[string]sendOp{}
	for _, s := range h.sends {
		if s.outcome != sendAcked {
			continue
		}
		prev, ok := last[s.key]
		last[s.key] = s
		if ok && (s.partition != prev.partition || s.offset <= prev.offset) {
			r.add(anomalyNonmonotonicSend, "key %s: %s at %d/%d sent after %s at %d/%d",
				s.key, s.value, s.partition, s.offset, prev.value, prev.partition, prev.offset)
		}
	}
}

// checkCommits reports a committed offset read back below the highest one whose commit was
// acknowledged before the read was sent: an acknowledged commit the group coordinator lost. Commits
// of one partition only ever go up, so the highest acknowledged one is what must be kept.
func checkCommits(r *queueReport, h *queueHistory) {
	acked := map[int32][]commitOp{}
	for _, c := range h.commits {
		if c.acked {
			acked[c.partition] = append(acked[c.partition], c)
			r.commitsAcked++
		}
	}
	r.commitsRead = len(h.fetches)
	for _, f := range h.fetches {
		floor := int64(-1)
		for _, c := range acked[f.partition] {
			if c.at.Before(f.sent) {
				floor = max(floor, c.offset)
			}
		}
		if f.offset < floor {
			r.add(anomalyCommitRegressed, "partition %d read back at %d, after the commit of %d was acknowledged", f.partition, f.offset, floor)
		}
	}
}

// checkTxns reports a read_committed reader that got a record of an aborted transaction (G1a), and
// a transaction the final read_committed read shows in part. A transaction that committed is read
// whole; one whose commit is unknown is read whole or not at all; none of an aborted one is read.
func checkTxns(r *queueReport, h *queueHistory) {
	sendOf := map[string]sendOp{}
	for _, s := range h.sends {
		sendOf[s.value] = s
	}
	finalRead := map[string]bool{}
	for _, p := range h.polls {
		if !p.committed {
			continue
		}
		if s, ok := sendOf[p.value]; ok && s.outcome == sendAborted {
			r.add(anomalyAbortedRead, "%s read at %d/%d by %s, its transaction %d aborted", p.value, p.partition, p.offset, p.reader, s.txn)
		}
		if p.reader == readerFinalCommitted {
			finalRead[p.value] = true
		}
	}
	for i, t := range h.txns {
		if t.outcome == txnAborted || len(t.sends) == 0 {
			continue
		}
		var got, missing []string
		for _, seq := range t.sends {
			if v := h.sends[seq].value; finalRead[v] {
				got = append(got, v)
			} else {
				missing = append(missing, v)
			}
		}
		if len(got) > 0 && len(missing) > 0 {
			r.add(anomalyPartialTxn, "transaction %d: read %v, not %v", i+1, got, missing)
		}
	}
}

// unavailabilities measures each fault: per partition, the acknowledgement times in order, from
// the first send to the last answer; the longest gap that overlaps the fault's window, over the
// partitions.
func unavailabilities(h *queueHistory) []unavailability {
	if len(h.sends) == 0 {
		return nil
	}
	var begin, end time.Time
	ats := map[int32][]time.Time{}
	for _, s := range h.sends {
		if s.at.After(end) {
			end = s.at
		}
		if s.outcome == sendAcked {
			ats[s.partition] = append(ats[s.partition], s.at)
			if begin.IsZero() || s.at.Before(begin) {
				begin = s.at
			}
		}
	}
	parts := make([]int32, 0, len(ats))
	for p, ts := range ats {
		sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
		parts = append(parts, p)
	}
	slices.Sort(parts)
	var out []unavailability
	for _, f := range h.faults {
		worst := unavailability{fault: f.name, partition: -1}
		for _, p := range parts {
			ts := append(append([]time.Time{begin}, ats[p]...), end)
			for i := 1; i < len(ts); i++ {
				if ts[i].After(f.start) && ts[i-1].Before(f.end) && ts[i].Sub(ts[i-1]) > worst.gap {
					worst = unavailability{fault: f.name, partition: p, gap: ts[i].Sub(ts[i-1])}
				}
			}
		}
		out = append(out, worst)
	}
	return out
}
