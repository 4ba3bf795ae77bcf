package api

import (
	"context"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/kafka/wire"
)

// Kafka's defaults for the window over which client byte rates are measured:
// quota.window.num samples of quota.window.size.seconds each.
const (
	DefaultQuotaWindowNum  = 11
	DefaultQuotaWindowSize = time.Second
)

// quotaKind is what a byte-rate quota limits: the bytes a client produces, or those it fetches.
type quotaKind int8

const (
	quotaProduce quotaKind = iota
	quotaFetch
)

// quotaKeys names each kind's quota key.
var quotaKeys = [...]string{quotaProduce: controller.QuotaProducerByteRate, quotaFetch: controller.QuotaConsumerByteRate}

// quotaSensorKey names one measured rate. As Kafka's metric tags, it holds the request's user when
// the matched quota entity has a user component and its client id when the entity has a client id
// component; so a default applies to each user or client on its own, and a quota on a user alone is
// shared by all its clients.
type quotaSensorKey struct {
	kind            quotaKind
	hasUser, hasCli bool
	user, client    string
}

// quotaSample is one sample of a rate: what was recorded from start for one window size.
type quotaSample struct {
	start time.Time
	value float64
}

// quotaSensor is the rate of one sensor key, measured as Kafka's Rate does over a ring of samples,
// and the time until which its client is muted.
type quotaSensor struct {
	samples []quotaSample
	cur     int
	muted   time.Time
}

// record adds v at now, starting a new sample when the current one is a window size old.
func (s *quotaSensor) record(now time.Time, v float64, size time.Duration) {
	c := &s.samples[s.cur]
	if c.start.IsZero() {
		c.start = now
	} else if now.Sub(c.start) >= size {
		s.cur = (s.cur + 1) % len(s.samples)
		c = &s.samples[s.cur]
		*c = quotaSample{start: now}
	}
	c.value += v
}

// rate is the recorded total over the elapsed window, per second, and the window: samples older
// than the whole window are forgotten, and the window is at least all samples but one (Kafka's
// Rate.windowSize), so that a first burst is spread over the window rather than measured alone.
func (s *quotaSensor) rate(now time.Time, size time.Duration) (perSecond float64, window time.Duration) {
	n := len(s.samples)
	var total float64
	oldest := now
	for i := range s.samples {
		c := &s.samples[i]
		if c.start.IsZero() {
			continue
		}
		if now.Sub(c.start) >= time.Duration(n)*size {
			*c = quotaSample{}
			continue
		}
		total += c.value
		if c.start.Before(oldest) {
			oldest = c.start
		}
	}
	window = now.Sub(oldest)
	if full := int(window / size); full < n-1 {
		window += time.Duration(n-1-full) * size
	}
	return total / window.Seconds(), window
}

// quotaTable is the client quotas of one image, by entity.
type quotaTable struct {
	src      []controller.ClientQuota
	byEntity map[controller.QuotaEntity]map[string]float64
}

// quotas enforces the client byte-rate quotas of the image: it resolves a request's quota as Kafka
// does, measures each sensor's rate and tells how long a client exceeding its quota is throttled.
// The sensors are a leaf structure under mu; nothing blocks while it is held.
type quotas struct {
	meta   *controller.Store
	clock  Clock
	num    int
	size   time.Duration
	table  atomic.Pointer[quotaTable]
	mu     sync.Mutex
	sensor map[quotaSensorKey]*quotaSensor
	// swept is when record last dropped the sensors idle for a whole window.
	swept time.Time
	// throttledNanos counts the throttle time given, by kind (weir_quota_throttle_seconds_total).
	throttledNanos [2]atomic.Int64
}

func newQuotas(meta *controller.Store, clock Clock, num int, size time.Duration) *quotas {
	if num < 1 {
		num = DefaultQuotaWindowNum
	}
	if size <= 0 {
		size = DefaultQuotaWindowSize
	}
	return &quotas{meta: meta, clock: clock, num: num, size: size, sensor: map[quotaSensorKey]*quotaSensor{}}
}

// active reports whether the image has any client quota; the only cost a request pays without one.
func (q *quotas) active() bool { return len(q.meta.Image().ClientQuotas) > 0 }

// current returns the table of the image's quotas, building it when they changed.
func (q *quotas) current() *quotaTable {
	src := q.meta.Image().ClientQuotas
	if t := q.table.Load(); t != nil && len(t.src) == len(src) && (len(src) == 0 || &t.src[0] == &src[0]) {
		return t
	}
	t := &quotaTable{src: src, byEntity: make(map[controller.QuotaEntity]map[string]float64, len(src))}
	for _, c := range src {
		t.byEntity[c.Entity] = c.Values
	}
	q.table.Store(t)
	return t
}

// quotaUser is the user a principal's quota is looked up by: the principal's name without its type.
func quotaUser(principal string) string {
	if _, name, ok := strings.Cut(principal, ":"); ok {
		return name
	}
	return principal
}

// resolve finds the quota of kind for user and client in Kafka's order (KIP-55): user and client
// id, user and default client id, user, default user and client id, default user and default client
// id, default user, client id, default client id. ok is false when none applies.
func (t *quotaTable) resolve(kind quotaKind, user, client string) (limit float64, key quotaSensorKey, ok bool) {
	named, def, none := controller.QuotaNamed, controller.QuotaDefault(), controller.QuotaName{}
	for _, e := range [...]controller.QuotaEntity{
		{User: named(user), ClientID: named(client)},
		{User: named(user), ClientID: def},
		{User: named(user)},
		{User: def, ClientID: named(client)},
		{User: def, ClientID: def},
		{User: def},
		{ClientID: named(client)},
		{User: none, ClientID: def},
	} {
		if v, found := t.byEntity[e][quotaKeys[kind]]; found {
			key = quotaSensorKey{kind: kind, hasUser: e.User.Set, hasCli: e.ClientID.Set}
			if key.hasUser {
				key.user = user
			}
			if key.hasCli {
				key.client = client
			}
			return v, key, true
		}
	}
	return 0, key, false
}

// quotaCall is one request's place under a quota.
type quotaCall struct {
	limit float64
	key   quotaSensorKey
}

// lookup returns the quota of kind that applies to req, if any.
func (q *quotas) lookup(kind quotaKind, req *wire.Request) (quotaCall, bool) {
	client := ""
	if req.ClientID != nil {
		client = *req.ClientID
	}
	limit, key, ok := q.current().resolve(kind, quotaUser(req.Principal), client)
	return quotaCall{limit: limit, key: key}, ok
}

// mutedFor is how long the sensor's client has yet to wait before its next request is read.
func (q *quotas) mutedFor(c quotaCall) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	if s := q.sensor[c.key]; s != nil {
		return s.muted.Sub(q.clock.Now())
	}
	return 0
}

// waitMuted blocks the connection's reading (Handle runs on its reader) while the sensor's client is
// muted: a client that ignores the throttle time it was given is held back all the same.
func (q *quotas) waitMuted(ctx context.Context, c quotaCall) {
	if d := q.mutedFor(c); d > 0 {
		select {
		case <-ctx.Done():
		case <-q.clock.After(d):
		}
	}
}

// record adds bytes to the sensor and returns the throttle time Kafka's QuotaUtils.throttleTime
// gives ((rate − quota) / quota × window, at most the whole window), muting the client for as long.
func (q *quotas) record(c quotaCall, bytes int) time.Duration {
	now := q.clock.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sweep(now)
	s := q.sensor[c.key]
	if s == nil {
		s = &quotaSensor{samples: make([]quotaSample, q.num)}
		q.sensor[c.key] = s
	}
	s.record(now, float64(bytes), q.size)
	rate, window := s.rate(now, q.size)
	if rate <= c.limit {
		return 0
	}
	d := time.Duration((rate - c.limit) / c.limit * float64(window))
	d = min(d, time.Duration(q.num)*q.size)
	s.muted = now.Add(d)
	q.throttledNanos[c.key.kind].Add(int64(d))
	return d
}

// sweep drops, at most once a window, the sensors whose every sample has expired and whose client is
// no longer muted, so that a stream of new client ids does not grow the sensors forever. Called with
// mu held.
func (q *quotas) sweep(now time.Time) {
	window := time.Duration(q.num) * q.size
	if now.Sub(q.swept) < window {
		return
	}
	q.swept = now
	for k, s := range q.sensor {
		idle := now.After(s.muted)
		for _, c := range s.samples {
			idle = idle && (c.start.IsZero() || now.Sub(c.start) >= window)
		}
		if idle {
			delete(q.sensor, k)
		}
	}
}

// maxWindowBytes is the most a client may fetch in one response: the quota over the window, so that
// one response alone does not put it far past its quota (Kafka's getMaxValueInQuotaWindow).
func (q *quotas) maxWindowBytes(c quotaCall) int32 {
	return int32(min(c.limit*float64(q.num)*q.size.Seconds(), math.MaxInt32))
}

// QuotaThrottled returns the throttle time the byte-rate quotas have given produce and fetch
// requests since the broker started.
func (b *Broker) QuotaThrottled() (produce, fetch time.Duration) {
	return time.Duration(b.quotas.throttledNanos[quotaProduce].Load()), time.Duration(b.quotas.throttledNanos[quotaFetch].Load())
}

// withQuota serves a Produce or a Fetch under the byte-rate quota that applies to its principal and
// client id (after waiting while the client is muted), and sets ThrottleMillis in its response to
// the throttle time its bytes earn: a produce is measured by its record bytes before it is served,
// a fetch by the record bytes of its response. The response is sent at once, and the client's next
// request waits out the throttle time, as Kafka does from 2.0 (KIP-219). A follower's fetch is not
// subject to client quotas.
func (b *Broker) withQuota(ctx context.Context, req *wire.Request) wire.Reply {
	switch body := req.Body.(type) {
	case *kmsg.ProduceRequest:
		c, ok := b.quotas.lookup(quotaProduce, req)
		if !ok {
			break
		}
		b.quotas.waitMuted(ctx, c)
		n := 0
		for _, t := range body.Topics {
			for _, p := range t.Partitions {
				n += len(p.Records)
			}
		}
		throttle := b.quotas.record(c, n)
		return after(b.dispatch(ctx, req), func(r kmsg.Response) {
			resp := r.(*kmsg.ProduceResponse)
			resp.ThrottleMillis = max(resp.ThrottleMillis, throttleMillis(throttle))
		})
	case *kmsg.FetchRequest:
		if body.ReplicaID >= 0 {
			break
		}
		c, ok := b.quotas.lookup(quotaFetch, req)
		if !ok {
			break
		}
		b.quotas.waitMuted(ctx, c)
		body.MaxBytes = min(body.MaxBytes, b.quotas.maxWindowBytes(c))
		inner := b.dispatch(ctx, req)
		return func(ctx context.Context) kmsg.Response {
			r := inner(ctx)
			if r == nil {
				return nil
			}
			resp := r.(*kmsg.FetchResponse)
			n := 0
			for i, t := range resp.Topics {
				n += wire.SectionBytes(ctx, i)
				for _, p := range t.Partitions {
					n += len(p.RecordBatches)
				}
			}
			resp.ThrottleMillis = max(resp.ThrottleMillis, throttleMillis(b.quotas.record(c, n)))
			return resp
		}
	}
	return b.dispatch(ctx, req)
}

func throttleMillis(d time.Duration) int32 {
	return int32(min((d+time.Millisecond-1)/time.Millisecond, math.MaxInt32))
}
