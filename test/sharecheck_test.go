package test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// A shareHistory is what the clients of a share-group fault test saw: the records the producer had
// acknowledged, every record a share consumer got (a delivery), and for each delivery the outcome of
// its ACCEPT as the broker answered it. checkShare reads it back; nothing in it comes from the
// brokers' own view.
type shareHistory struct {
	mu         sync.Mutex
	produced   map[string]bool
	deliveries []shareDelivery
}

// shareDelivery is one record handed to a consumer, and what became of its ACCEPT.
type shareDelivery struct {
	value    string
	consumer string
	at       time.Time
	// outcome is the ACCEPT's: acceptConfirmed when the broker answered it without error (at
	// confirmedAt), acceptFailed when it answered an error, acceptUnknown when no answer came.
	outcome     acceptOutcome
	confirmedAt time.Time
}

type acceptOutcome int

const (
	acceptUnknown acceptOutcome = iota
	acceptFailed
	acceptConfirmed
)

func newShareHistory() *shareHistory { return &shareHistory{produced: map[string]bool{}} }

// produce records a send the producer had acknowledged.
func (h *shareHistory) produce(value string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.produced[value] = true
}

// deliver records deliveries of values to consumer at at and returns their indexes, for settle.
func (h *shareHistory) deliver(consumer string, at time.Time, values ...string) []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	idx := make([]int, len(values))
	for i, v := range values {
		idx[i] = len(h.deliveries)
		h.deliveries = append(h.deliveries, shareDelivery{value: v, consumer: consumer, at: at})
	}
	return idx
}

// settle records the outcome of the ACCEPTs of the deliveries at idx.
func (h *shareHistory) settle(idx []int, outcome acceptOutcome, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, i := range idx {
		h.deliveries[i].outcome = outcome
		if outcome == acceptConfirmed {
			h.deliveries[i].confirmedAt = at
		}
	}
}

// confirmed returns how many produced records have a confirmed ACCEPT, and how many were produced.
func (h *shareHistory) confirmed() (int, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	done := map[string]bool{}
	for _, d := range h.deliveries {
		if d.outcome == acceptConfirmed && h.produced[d.value] {
			done[d.value] = true
		}
	}
	return len(done), len(h.produced)
}

// shareReport is checkShare's reading of a history: the anomalies, each a violation of the share
// group's promise, and counts that describe the run.
type shareReport struct {
	// lost: produced, acknowledged by the broker, and never delivered.
	lost []string
	// acceptedTwice: two ACCEPTs of one record both answered without error.
	acceptedTwice []string
	// redelivered: delivered (arrived at a consumer) after an ACCEPT of it was answered without error.
	redelivered []string
	// unconfirmedProduce counts records delivered whose produce was not acknowledged (its outcome
	// unknown to the producer): not an anomaly.
	unconfirmedProduce int

	produced, delivered, confirmed int
	// finishedUnconfirmed: records whose ACCEPTs all failed or went unanswered and that were never
	// delivered again: the broker may have kept the acknowledgement (docs/queues.md), which is allowed.
	// lastFailed counts those whose last ACCEPT was answered with an error (the rest had no answer).
	finishedUnconfirmed, lastFailed int
	// redeliveries counts deliveries after the first, all allowed (lock loss at a leader change).
	redeliveries int
}

func (r shareReport) anomalies() []string {
	var out []string
	add := func(name string, vs []string) {
		if len(vs) > 0 {
			sort.Strings(vs)
			out = append(out, fmt.Sprintf("%s: %d %v", name, len(vs), vs[:min(len(vs), 10)]))
		}
	}
	add("lost", r.lost)
	add("accepted twice", r.acceptedTwice)
	add("redelivered after an accepted acknowledgement", r.redelivered)
	return out
}

func (r shareReport) String() string {
	return fmt.Sprintf("produced %d, delivered %d distinct, confirmed accepted %d, finished unconfirmed %d (%d last answered with an error), redeliveries %d, delivered without an acknowledged produce %d",
		r.produced, r.delivered, r.confirmed, r.finishedUnconfirmed, r.lastFailed, r.redeliveries, r.unconfirmedProduce)
}

// checkShare reads h: every produced record delivered; per record at most one ACCEPT answered
// without error; and no delivery of a record arriving after its ACCEPT was answered without error.
// Delivery times are arrivals in the client, not polls: a consumer may poll a copy it received from a
// leader that has since lost the record's lock (and whose acknowledgement then fails) after another
// consumer accepted the record, which is no redelivery.
func checkShare(h *shareHistory) shareReport {
	h.mu.Lock()
	defer h.mu.Unlock()
	byValue := map[string][]shareDelivery{}
	for _, d := range h.deliveries {
		byValue[d.value] = append(byValue[d.value], d)
	}
	r := shareReport{produced: len(h.produced), delivered: len(byValue)}
	for v := range h.produced {
		if len(byValue[v]) == 0 {
			r.lost = append(r.lost, v)
		}
	}
	for v, ds := range byValue {
		if !h.produced[v] {
			r.unconfirmedProduce++
		}
		r.redeliveries += len(ds) - 1
		slices.SortStableFunc(ds, func(a, b shareDelivery) int { return a.at.Compare(b.at) })
		var accepted []shareDelivery
		for _, d := range ds {
			if d.outcome == acceptConfirmed {
				accepted = append(accepted, d)
			}
		}
		switch {
		case len(accepted) > 1:
			r.acceptedTwice = append(r.acceptedTwice, v)
		case len(accepted) == 1:
			r.confirmed++
			if last := ds[len(ds)-1]; last.at.After(accepted[0].confirmedAt) {
				r.redelivered = append(r.redelivered, fmt.Sprintf("%s (accepted by %s, delivered again to %s)", v, accepted[0].consumer, last.consumer))
			}
		default:
			r.finishedUnconfirmed++
			if ds[len(ds)-1].outcome == acceptFailed {
				r.lastFailed++
			}
		}
	}
	return r
}

// shareHist builds hand-made histories for checkShare's tests.
type shareHist struct {
	h   *shareHistory
	now time.Time
}

func newShareHist(produced ...string) *shareHist {
	b := &shareHist{h: newShareHistory(), now: time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)}
	for _, v := range produced {
		b.h.produce(v)
	}
	return b
}

// got adds a delivery of value to consumer, a millisecond after the last event, with its outcome.
func (b *shareHist) got(consumer, value string, outcome acceptOutcome) *shareHist {
	b.now = b.now.Add(time.Millisecond)
	idx := b.h.deliver(consumer, b.now, value)
	b.now = b.now.Add(time.Millisecond)
	b.h.settle(idx, outcome, b.now)
	return b
}

// stale adds a delivery of value to consumer that arrived half-way between the last delivery and its
// ACCEPT's answer (a copy from a leader that then lost the lock), with its outcome.
func (b *shareHist) stale(consumer, value string, outcome acceptOutcome) *shareHist {
	idx := b.h.deliver(consumer, b.now.Add(-time.Millisecond/2), value)
	b.now = b.now.Add(time.Millisecond)
	b.h.settle(idx, outcome, b.now)
	return b
}

// TestShareCheck gives checkShare one hand-made history per anomaly; each must be reported as that
// anomaly and nothing else, and the clean histories as nothing at all.
func TestShareCheck(t *testing.T) {
	clean := func() *shareHist {
		return newShareHist("a", "b", "c").got("c1", "a", acceptConfirmed).got("c2", "b", acceptConfirmed).got("c1", "c", acceptConfirmed)
	}
	for _, tc := range []struct {
		name string
		h    *shareHist
		want string // the anomaly's name, "" for none
	}{
		{"clean", clean(), ""},
		// A failed accept, then a redelivery accepted: allowed.
		{"failed then accepted", clean().got("c1", "d", acceptFailed).got("c2", "d", acceptConfirmed), ""},
		// Unknown outcomes, never delivered again: allowed, counted as finished unconfirmed.
		{"unknown, not redelivered", clean().got("c1", "d", acceptUnknown), ""},
		{"lost", newShareHist("a", "b").got("c1", "a", acceptConfirmed), "lost"},
		{"accepted twice", clean().got("c2", "a", acceptConfirmed), "accepted twice"},
		{"redelivered after accept", clean().got("c2", "a", acceptFailed), "redelivered"},
		// c2 received a copy before c1's accept was answered, and polled it later: no redelivery.
		{"stale copy", clean().stale("c2", "c", acceptFailed), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := checkShare(tc.h.h)
			an := r.anomalies()
			switch {
			case tc.want == "" && len(an) != 0:
				t.Fatalf("anomalies %v in a clean history (%s)", an, r)
			case tc.want != "" && (len(an) != 1 || !strings.HasPrefix(an[0], tc.want)):
				t.Fatalf("anomalies %v, want exactly %q", an, tc.want)
			}
		})
	}
	r := checkShare(clean().got("c1", "d", acceptUnknown).got("c2", "e", acceptFailed).got("c3", "e", acceptConfirmed).h)
	if r.confirmed != 4 || r.finishedUnconfirmed != 1 || r.lastFailed != 0 || r.redeliveries != 1 || r.unconfirmedProduce != 2 {
		t.Fatalf("counts: %s", r)
	}
}
