package partition

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/weir-mq/weir/internal/storage"
)

// Transport is how followers reach leader brokers. The Kafka API layer implements it over the Kafka
// protocol (Fetch v12 and OffsetForLeaderEpoch with this node's replica id); tests wire replicas
// together in memory.
type Transport interface {
	// Dial connects to the broker at addr (host:port). A failure wraps ErrLeaderUnreachable.
	Dial(ctx context.Context, addr string) (LeaderConn, error)
}

// LeaderConn is one connection to a leader broker, used by one fetcher goroutine at a time.
type LeaderConn interface {
	// Fetch sends one follower fetch. An error (wrapping ErrLeaderUnreachable) means the connection is
	// unusable; per-partition errors are in the results.
	Fetch(ctx context.Context, req FetchRequest) ([]FetchedPartition, error)
	// OffsetForLeaderEpoch asks the leader for the end of epoch (the largest epoch at or below it and
	// where that ends), with currentEpoch checked as in a fetch. A partition error (ErrNotLeader,
	// ErrFencedLeaderEpoch, ErrUnknownLeaderEpoch, ...) is returned as is; a connection failure wraps
	// ErrLeaderUnreachable.
	OffsetForLeaderEpoch(ctx context.Context, req EpochRequest) (EpochEnd, error)
	// Close closes the connection.
	Close() error
}

// FetchRequest is a follower's fetch of every partition it follows from one leader broker.
type FetchRequest struct {
	ReplicaID  int32
	MaxWait    time.Duration
	Partitions []FetchPartition
}

// FetchPartition is one partition of a FetchRequest.
type FetchPartition struct {
	Topic              string
	Partition          int32
	FetchOffset        int64
	CurrentLeaderEpoch int32
	LastFetchedEpoch   int32
	// MaxBytes is the partition's byte limit; 0 leaves it to the transport.
	MaxBytes int32
}

// FetchedPartition is the leader's answer for one partition.
type FetchedPartition struct {
	Topic     string
	Partition int32
	// Err is nil, or wraps ErrNotLeader, ErrFencedLeaderEpoch, ErrUnknownLeaderEpoch,
	// storage.ErrOffsetOutOfRange or another failure.
	Err            error
	HighWatermark  int64
	LogStartOffset int64
	Records        []byte
	// Diverging is set when the follower's last fetched epoch ends before its fetch offset on the
	// leader (Fetch v12's DivergingEpoch).
	Diverging *EpochEnd
}

// EpochRequest is a follower's OffsetForLeaderEpoch for one partition.
type EpochRequest struct {
	ReplicaID          int32
	Topic              string
	Partition          int32
	CurrentLeaderEpoch int32
	LeaderEpoch        int32
}

const (
	// fetchMaxWait is how long a leader parks a follower fetch with nothing new.
	fetchMaxWait = 500 * time.Millisecond
	// fetchBackoff is the pause after a failed connection or a round in which every partition failed.
	fetchBackoff = 200 * time.Millisecond
)

// fetcher copies the partitions this node follows from one source broker: one goroutine, one
// connection, one Fetch for all of them per round (docs/replication.md, "The follower").
type fetcher struct {
	m      *Manager
	source int32

	mu    sync.Mutex
	parts map[replicaKey]*Replica
	wake  chan struct{}

	cancel context.CancelFunc
	done   chan struct{}
}

func newFetcher(m *Manager, source int32) *fetcher {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fetcher{m: m, source: source, parts: map[replicaKey]*Replica{}, wake: make(chan struct{}, 1),
		cancel: cancel, done: make(chan struct{})}
	go f.run(ctx)
	return f
}

// set replaces the partitions the fetcher follows and wakes it.
func (f *fetcher) set(parts map[replicaKey]*Replica) {
	f.mu.Lock()
	f.parts = parts
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *fetcher) snapshot() map[replicaKey]*Replica {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.parts
}

// stop ends the goroutine and waits for it.
func (f *fetcher) stop() {
	f.cancel()
	<-f.done
}

func (f *fetcher) run(ctx context.Context) {
	defer close(f.done)
	var conn LeaderConn
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	for ctx.Err() == nil {
		parts := f.snapshot()
		if len(parts) == 0 {
			select {
			case <-f.wake:
			case <-ctx.Done():
			}
			continue
		}
		if conn == nil {
			addr, ok := f.m.brokerAddr(f.source)
			var err error
			if ok {
				conn, err = f.m.transport.Dial(ctx, addr)
			}
			if !ok || err != nil {
				conn = nil
				f.pause(ctx)
				continue
			}
		}
		if err := f.round(ctx, conn, parts); err != nil {
			if ctx.Err() == nil {
				f.m.logger.Debug("follower fetch failed", "leader", f.source, "err", err)
			}
			_ = conn.Close()
			conn = nil
			f.pause(ctx)
		}
	}
}

// pause waits fetchBackoff, or less if the fetcher is stopped or given new partitions.
func (f *fetcher) pause(ctx context.Context) { f.pauseFor(ctx, 0) }

// pauseFor waits d, or fetchBackoff when d is 0 or longer, or less if the fetcher is stopped or given
// new partitions.
func (f *fetcher) pauseFor(ctx context.Context, d time.Duration) {
	if d <= 0 || d > fetchBackoff {
		d = fetchBackoff
	}
	select {
	case <-f.m.clock.After(d):
	case <-f.wake:
	case <-ctx.Done():
	}
}

type fetchEntry struct {
	r   *Replica
	key replicaKey
	pos position
	// throttled is set when the partition's copy counts against the node's throttle.
	throttled bool
}

// round truncates the partitions that must, then fetches all of them once and applies the answers.
// It returns an error only when the connection failed.
func (f *fetcher) round(ctx context.Context, conn LeaderConn, parts map[replicaKey]*Replica) error {
	req := FetchRequest{ReplicaID: f.m.self, MaxWait: fetchMaxWait}
	var entries []fetchEntry
	for k, r := range parts {
		pos, ok := r.following()
		if !ok || pos.leader != f.source {
			continue
		}
		if pos.truncate {
			answer := EpochEnd{Epoch: -1, EndOffset: -1}
			if pos.lastEpoch >= 0 {
				var err error
				answer, err = conn.OffsetForLeaderEpoch(ctx, EpochRequest{ReplicaID: f.m.self, Topic: k.topic,
					Partition: k.partition, CurrentLeaderEpoch: pos.epoch, LeaderEpoch: pos.lastEpoch})
				if errors.Is(err, ErrLeaderUnreachable) {
					return err
				}
				if err != nil {
					f.m.logger.Debug("offset for leader epoch refused", "topic", k.topic, "partition", k.partition, "err", err)
					continue
				}
			}
			if err := r.truncateTo(pos.epoch, answer); err != nil {
				f.m.logger.Error("follower truncation failed", "topic", k.topic, "partition", k.partition, "err", err)
				continue
			}
			if pos, ok = r.following(); !ok || pos.truncate || pos.leader != f.source {
				continue
			}
		}
		entries = append(entries, fetchEntry{r: r, key: k, pos: pos})
	}
	entries, grant, heldBack := f.throttled(entries)
	entries = waitDurable(ctx, entries)
	// throttled partitions held back are fetched again once the bucket refills, not after a long poll
	var held time.Duration
	if heldBack {
		held = f.m.throttle.Wait()
		req.MaxWait = min(req.MaxWait, max(held, time.Millisecond))
	}
	nThrottled := 0
	for _, e := range entries {
		if e.throttled {
			nThrottled++
		}
	}
	for _, e := range entries {
		fp := FetchPartition{Topic: e.key.topic, Partition: e.key.partition,
			FetchOffset: e.pos.offset, CurrentLeaderEpoch: e.pos.epoch, LastFetchedEpoch: e.pos.lastEpoch}
		if e.throttled {
			fp.MaxBytes = int32(min(max(grant/int64(nThrottled), ThrottleChunkMin), 1<<30))
		}
		req.Partitions = append(req.Partitions, fp)
	}
	if len(entries) == 0 {
		f.pauseFor(ctx, held)
		return nil
	}
	resp, err := conn.Fetch(ctx, req)
	if err != nil {
		return err
	}
	byKey := make(map[replicaKey]*FetchedPartition, len(resp))
	for i := range resp {
		byKey[replicaKey{resp[i].Topic, resp[i].Partition}] = &resp[i]
	}
	failed := 0
	// the partitions' syncs start together once all are appended (storage.Syncer.Hold)
	release := f.m.syncer.Hold()
	defer release()
	for _, e := range entries {
		fp, ok := byKey[e.key]
		if !ok {
			failed++
			continue
		}
		if e.throttled {
			f.m.throttle.Take(len(fp.Records))
		}
		if err := f.apply(e, fp); err != nil {
			failed++
			f.m.logger.Debug("follower fetch of a partition failed", "topic", e.key.topic, "partition", e.key.partition, "err", err)
		}
	}
	if failed == len(entries) {
		f.pause(ctx)
	}
	return nil
}

// throttled marks the entries whose copy is throttled (controller.Image.FollowerThrottled) while
// follower.replication.throttled.rate is set, and leaves them out while the node's bucket is empty. It
// returns the entries to fetch, the bytes the throttled ones may ask for together, and whether any was
// left out.
func (f *fetcher) throttled(entries []fetchEntry) ([]fetchEntry, int64, bool) {
	img := f.m.img.Load()
	var rate int64
	if img != nil {
		rate = img.FollowerThrottleRate()
	}
	grant := f.m.throttle.Grant(f.m.clock.Now(), rate)
	if rate == 0 {
		return entries, 0, false
	}
	out := entries[:0]
	heldBack := false
	for _, e := range entries {
		t, ok := img.Topic(e.key.topic)
		e.throttled = ok && img.FollowerThrottled(t, e.key.partition, f.m.self)
		if !e.throttled || grant > 0 {
			out = append(out, e)
		} else {
			heldBack = true
		}
	}
	return out, grant, heldBack
}

// waitDurable waits, for all entries at once (so their fsyncs share the directory's group commit),
// until each log is durable up to its end, and returns the entries whose wait succeeded: a follower
// reports only durable offsets.
func waitDurable(ctx context.Context, entries []fetchEntry) []fetchEntry {
	ok := make([]bool, len(entries))
	var wg sync.WaitGroup
	for i := range entries {
		if entries[i].r.durableToEnd() {
			ok[i] = true
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok[i] = entries[i].r.waitDurableEnd(ctx) == nil
		}()
	}
	wg.Wait()
	out := entries[:0]
	for i, e := range entries {
		if ok[i] {
			out = append(out, e)
		}
	}
	return out
}

// apply hands the leader's answer for one partition to its replica.
func (f *fetcher) apply(e fetchEntry, fp *FetchedPartition) error {
	switch {
	case fp.Err == nil && fp.Diverging != nil:
		return e.r.truncateTo(e.pos.epoch, *fp.Diverging)
	case fp.Err == nil:
		e.r.leaderHW.Store(fp.HighWatermark)
		return e.r.appendFetched(e.pos.epoch, fetched{records: fp.Records, highWatermark: fp.HighWatermark, logStartOffset: fp.LogStartOffset})
	case errors.Is(fp.Err, storage.ErrOffsetOutOfRange):
		if fp.LogStartOffset >= 0 && e.pos.offset < fp.LogStartOffset {
			if err := e.r.resetTo(e.pos.epoch, fp.LogStartOffset); err != nil {
				return err
			}
		} else {
			e.r.retruncate(e.pos.epoch)
		}
		return fp.Err
	default:
		return fp.Err
	}
}

// brokerAddr returns the Kafka address of broker id in the latest image.
func (m *Manager) brokerAddr(id int32) (string, bool) {
	img := m.img.Load()
	if img == nil {
		return "", false
	}
	b, ok := img.Broker(id)
	if !ok || b.Host == "" {
		return "", false
	}
	return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), true
}
