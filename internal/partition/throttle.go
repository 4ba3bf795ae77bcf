package partition

import (
	"sync"
	"time"
)

// ThrottleChunkMin is the least a throttled partition is fetched or sent in one fetch: a leader
// answers a partition whose first batch is larger than its limit with nothing when other partitions
// come first, so a smaller limit could starve it.
const ThrottleChunkMin = 64 << 10

// throttleBurst is how much of the rate the bucket holds: what throttled partitions may fetch at once
// after a pause.
const throttleBurst = 250 * time.Millisecond

// Bucket is a node's replication throttle (docs/reassignment.md, "Throttle"): one bucket of bytes for
// the throttled partitions, refilled at the rate (follower.replication.throttled.rate for every
// fetcher of the node; leader.replication.throttled.rate for what the node's leaders send) and
// holding at most throttleBurst of it (or ThrottleChunkMin). A fetch takes what it moved, and may
// overdraw the bucket: throttled partitions then wait until the debt is repaid, so the rate over a
// few seconds is the limit whatever the batch sizes. The zero Bucket is ready.
type Bucket struct {
	mu     sync.Mutex
	rate   int64
	tokens float64
	last   time.Time
}

// Grant refills the bucket at rate up to now and returns the bytes throttled partitions may move: 0
// while the bucket is empty or in debt, and under rate 0 (no throttle). A new rate starts an empty
// bucket.
func (t *Bucket) Grant(now time.Time, rate int64) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if rate != t.rate {
		t.rate, t.tokens, t.last = rate, 0, now
	}
	t.tokens += float64(rate) * now.Sub(t.last).Seconds()
	t.tokens = min(t.tokens, max(float64(rate)*throttleBurst.Seconds(), ThrottleChunkMin))
	t.last = now
	return max(int64(t.tokens), 0)
}

// Take removes n bytes moved for throttled partitions from the bucket.
func (t *Bucket) Take(n int) {
	t.mu.Lock()
	t.tokens -= float64(n)
	t.mu.Unlock()
}

// Wait is how long, from the last grant, until the bucket holds a byte again; 0 when it does.
func (t *Bucket) Wait() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tokens >= 1 || t.rate <= 0 {
		return 0
	}
	return time.Duration((1 - t.tokens) / float64(t.rate) * float64(time.Second))
}
