package share

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// keyed is the attributes of a record whose key hashes to k; 0 is a record with a null key.
func keyed(keys ...uint64) []Attr {
	attrs := make([]Attr, len(keys))
	for i, k := range keys {
		attrs[i] = Attr{Key: k, Keyed: k != 0}
	}
	return attrs
}

// TestShareKeyOrder: in a key-ordered partition at most one record of a key is in flight, a key's
// records go out in offset order (a released one before the later ones), records with a null key are
// not held, and a record not yet due holds its key's later records.
func TestShareKeyOrder(t *testing.T) {
	p := newPartition(t, Config{KeyOrdered: true}, 0)
	const a, b, c = 1, 2, 3
	track(t, p, t0, keyed(a, b, a, c, b, a, 0, 0)...)
	if got := offsets(p.Acquire("m1", 10, 8, t0)); !slices.Equal(got, []int64{0, 1, 3, 6, 7}) {
		t.Fatalf("first acquisition %v, want the first record of each key and the unkeyed ones", got)
	}
	if got := offsets(p.Acquire("m2", 10, 8, t0)); len(got) != 0 {
		t.Fatalf("with every key in flight, acquired %v", got)
	}
	mustAck(t, p, "m1", t0, ack(0, 0, AckAccept))
	if got := offsets(p.Acquire("m2", 10, 8, t0)); !slices.Equal(got, []int64{2}) {
		t.Fatalf("after key a's first record was accepted: %v, want 2", got)
	}
	// A released record of b goes out again before b's later record.
	mustAck(t, p, "m1", t0, ack(1, 1, AckRelease))
	if got := offsets(p.Acquire("m3", 10, 8, t0)); !slices.Equal(got, []int64{1}) {
		t.Fatalf("after key b's record was released: %v, want 1 again", got)
	}

	// A record not yet due holds its key's later records, not the other keys'.
	q := newPartition(t, Config{KeyOrdered: true}, 0)
	attrs := keyed(a, a, b)
	attrs[0].Due = t0.Add(time.Minute).UnixMilli()
	track(t, q, t0, attrs...)
	if got := offsets(q.Acquire("m1", 10, 3, t0)); !slices.Equal(got, []int64{2}) {
		t.Fatalf("with key a's first record not due: %v, want only 2", got)
	}
	if got := offsets(q.Acquire("m1", 10, 3, t0.Add(time.Minute))); !slices.Equal(got, []int64{0}) {
		t.Fatalf("once it is due: %v, want 0", got)
	}
	// A batch extension (AcquireThrough) holds keys as Acquire does.
	r := newPartition(t, Config{KeyOrdered: true}, 0)
	track(t, r, t0, keyed(a, b, a, c)...)
	if got := offsets(r.Acquire("m1", 1, 4, t0)); !slices.Equal(got, []int64{0}) {
		t.Fatalf("acquire 1: %v", got)
	}
	if got := offsets(r.AcquireThrough("m1", 1, 3, 4, t0)); !slices.Equal(got, []int64{1, 3}) {
		t.Fatalf("extension: %v, want 1 and 3 but not a's second record", got)
	}
	// An available record below the extension's first offset holds its key too.
	attrs = keyed(a, b, a)
	attrs[0].Due = t0.Add(time.Minute).UnixMilli()
	x := newPartition(t, Config{KeyOrdered: true}, 0)
	track(t, x, t0, attrs...)
	if got := offsets(x.Acquire("m1", 1, 3, t0)); !slices.Equal(got, []int64{1}) {
		t.Fatalf("acquire 1 with key a's first record not due: %v, want 1", got)
	}
	if got := offsets(x.AcquireThrough("m1", 2, 2, 3, t0)); len(got) != 0 {
		t.Fatalf("extension over key a's second record: %v, want nothing", got)
	}
}

// TestShareKeyOrderProperty drives key-ordered partitions through random acquisitions by several
// members (batch extensions from a random offset among them), accepts, releases, rejects, lock expiries and members leaving, over records of a few keys
// (some null), and checks after every step that no two records of a key are in flight and that a
// record in flight has every earlier record of its key finished; at the end, with every record
// finished, each key's records were first handed out in offset order.
func TestShareKeyOrderProperty(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		cfg := Config{KeyOrdered: true, LockDuration: time.Second, DeliveryCountLimit: 3, RecordLocksMax: 64}
		p := newPartition(t, cfg, 0)
		const total = 120
		keys := make([]uint64, total)
		for i := range keys {
			keys[i] = uint64(rng.IntN(6)) // 0: a null key
		}
		now := t0
		firstOut := map[int64]int{}
		step := 0
		members := []string{"m0", "m1", "m2", "m3"}
		for ; p.StartOffset() < total && step < 5000; step++ {
			if tr := p.Tracked(); tr < min(int64(total), p.TrackLimit()) {
				track(t, p, now, keyed(keys[tr:min(int64(total), p.TrackLimit())]...)...)
			}
			m := members[rng.IntN(len(members))]
			switch op := rng.IntN(10); {
			case op < 4:
				for _, off := range offsets(p.Acquire(m, 1+rng.IntN(8), min(int64(total), p.Tracked()), now)) {
					if _, ok := firstOut[off]; !ok {
						firstOut[off] = step
					}
				}
			case op < 5:
				first := p.StartOffset() + int64(rng.IntN(int(p.End()-p.StartOffset())+1))
				for _, off := range offsets(p.AcquireThrough(m, first, first+int64(rng.IntN(8)), min(int64(total), p.Tracked()), now)) {
					if _, ok := firstOut[off]; !ok {
						firstOut[off] = step
					}
				}
			case op < 8:
				var mine []int64
				for off := p.StartOffset(); off < p.End(); off++ {
					if e, _ := p.Lookup(off); e.State == Acquired && e.Member == m {
						mine = append(mine, off)
					}
				}
				if len(mine) > 0 {
					off := mine[rng.IntN(len(mine))]
					typ := []AckType{AckAccept, AckAccept, AckRelease, AckReject}[rng.IntN(4)]
					mustAck(t, p, m, now, ack(off, off, typ))
				}
			case op < 9:
				now = now.Add(time.Duration(rng.IntN(1500)) * time.Millisecond)
				p.Expire(now)
			default:
				p.ReleaseMember(m)
			}
			checkKeyOrder(t, seed, step, p, keys)
		}
		if p.StartOffset() < total {
			t.Fatalf("seed %d: stuck at SPSO %d of %d after %d steps", seed, p.StartOffset(), total, step)
		}
		for k := uint64(1); k < 6; k++ {
			var steps []int
			for off := range int64(total) {
				if keys[off] == k {
					if s, ok := firstOut[off]; ok {
						steps = append(steps, s)
					}
				}
			}
			if !slices.IsSorted(steps) {
				t.Fatalf("seed %d: key %d's records first went out at steps %v, not in offset order", seed, k, steps)
			}
		}
	}
}

// checkKeyOrder fails unless every record in flight is its key's only one in flight and every
// earlier record of its key in the window is finished.
func checkKeyOrder(t *testing.T, seed uint64, step int, p *Partition, keys []uint64) {
	t.Helper()
	for off := p.StartOffset(); off < p.End(); off++ {
		e, _ := p.Lookup(off)
		if e.State != Acquired || keys[off] == 0 {
			continue
		}
		for before := p.StartOffset(); before < off; before++ {
			if keys[before] != keys[off] {
				continue
			}
			if b, _ := p.Lookup(before); !b.State.final() {
				t.Fatalf("seed %d step %d: %s", seed, step, fmt.Sprintf("offset %d (key %d) in flight while %d of its key is %s",
					off, keys[off], before, b.State))
			}
		}
	}
}
