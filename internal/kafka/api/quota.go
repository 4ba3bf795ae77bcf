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

// Kafka's defaults for the window over which client byte rates and request times are measured:
// quota.window.num samples of quota.window.size.seconds each.
const (
	DefaultQuotaWindowNum  = 11
	DefaultQuotaWindowSize = time.Second
)

// quotaKind is what a quota limits: the bytes a client produces, those it fetches, or the time the
// broker spends handling its requests.
type quotaKind int8

const (
	quotaProduce quotaKind = iota
	quotaFetch
	quotaRequest
	nQuotaKinds
)

// quotaKeys names each kind's quota key.
var quotaKeys = [nQuotaKinds]string{
	quotaProduce: controller.QuotaProducerByteRate,
	quotaFetch:   controller.QuotaConsumerByteRate,
	quotaRequest: controller.QuotaRequestPercentage,
}

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
	// set tells the kinds some entity has a quota of, so that a request is not resolved against a
	// kind nobody set.
	set [nQuotaKinds]bool
}

// quotas enforces the client quotas of the image: it resolves a request's quota as Kafka does,
// measures each sensor's rate and tells how long a client exceeding its quota is throttled.
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
	throttledNanos [nQuotaKinds]atomic.Int64
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
	t := newQuotaTable(src)
	q.table.Store(t)
	return t
}

func newQuotaTable(src []controller.ClientQuota) *quotaTable {
	t := &quotaTable{src: src, byEntity: make(map[controller.QuotaEntity]map[string]float64, len(src))}
	for _, c := range src {
		t.byEntity[c.Entity] = c.Values
		for k, key := range quotaKeys {
			_, ok := c.Values[key]
			t.set[k] = t.set[k] || ok
		}
	}
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
	if !t.set[kind] {
		return 0, key, false
	}
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

// record adds v (bytes, or request time in percent of a thread's second) to the sensor and returns
// the throttle time Kafka's QuotaUtils.throttleTime gives ((rate − quota) / quota × window, at most
// throttleMax), muting the client for as long.
func (q *quotas) record(c quotaCall, v float64) time.Duration {
	now := q.clock.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sweep(now)
	s := q.sensor[c.key]
	if s == nil {
		s = &quotaSensor{samples: make([]quotaSample, q.num)}
		q.sensor[c.key] = s
	}
	s.record(now, v, q.size)
	rate, window := s.rate(now, q.size)
	if rate <= c.limit {
		return 0
	}
	d := time.Duration((rate - c.limit) / c.limit * float64(window))
	d = min(d, q.throttleMax(c.key.kind))
	s.muted = now.Add(d)
	q.throttledNanos[c.key.kind].Add(int64(d))
	return d
}

// throttleMax bounds a throttle time: the whole window for a byte rate, and one sample for request
// time, as Kafka's ClientRequestQuotaManager bounds it. One slow request (a large Metadata answer)
// can put a low request_percentage far over its quota, and a client should not sit out the whole
// window for it.
func (q *quotas) throttleMax(kind quotaKind) time.Duration {
	if kind == quotaRequest {
		return q.size
	}
	return time.Duration(q.num) * q.size
}

// requestPercent is handler time in request_percentage's unit: percent of one thread's second, so
// that a rate of N of them per second is N % of a thread (Kafka's nanosToPercentage).
func requestPercent(d time.Duration) float64 {
	return float64(d) * 100 / float64(time.Second)
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

// QuotaThrottled returns the throttle time the client quotas have given since the broker started:
// by the produce and fetch byte rates, and by request time.
func (b *Broker) QuotaThrottled() (produce, fetch, request time.Duration) {
	n := &b.quotas.throttledNanos
	return time.Duration(n[quotaProduce].Load()), time.Duration(n[quotaFetch].Load()), time.Duration(n[quotaRequest].Load())
}

// quotaExempt reports whether req is left out of request_percentage quotas, as Kafka leaves it
// (KIP-124): ApiVersions and the SASL keys, which a client needs before it can do anything else, and
// the requests other brokers make for the cluster's own work (a follower's Fetch and
// OffsetForLeaderEpoch, WriteTxnMarkers, a broker's AddPartitionsToTxn v4+), whose throttling would
// slow replication and transactions rather than the client.
func quotaExempt(req *wire.Request) bool {
	switch body := req.Body.(type) {
	case *kmsg.ApiVersionsRequest, *kmsg.SASLHandshakeRequest, *kmsg.SASLAuthenticateRequest, *kmsg.WriteTxnMarkersRequest:
		return true
	case *kmsg.FetchRequest:
		return body.ReplicaID >= 0
	case *kmsg.OffsetForLeaderEpochRequest:
		return body.ReplicaID >= 0
	case *kmsg.AddPartitionsToTxnRequest:
		return body.Version >= 4
	}
	return false
}

// byteQuota returns the byte-rate quota of a Produce or of a client's Fetch, if one applies. A
// follower's fetch is not subject to client quotas.
func (b *Broker) byteQuota(req *wire.Request) (quotaCall, bool) {
	switch body := req.Body.(type) {
	case *kmsg.ProduceRequest:
		return b.quotas.lookup(quotaProduce, req)
	case *kmsg.FetchRequest:
		if body.ReplicaID < 0 {
			return b.quotas.lookup(quotaFetch, req)
		}
	}
	return quotaCall{}, false
}

// requestQuota returns the request_percentage quota of req, if one applies.
func (b *Broker) requestQuota(req *wire.Request) (quotaCall, bool) {
	if quotaExempt(req) {
		return quotaCall{}, false
	}
	return b.quotas.lookup(quotaRequest, req)
}

// replyTimeKey is the context key under which a Reply finds where to add the handler time it spends
// outside Handle (a fetch's reads), for its request's request_percentage quota. A Reply's signature
// is the wire's, so the context carries it.
type replyTimeKey struct{}

// addReplyTime adds d to the handler time of the request whose Reply runs under ctx, if its request
// time is measured.
func addReplyTime(ctx context.Context, d time.Duration) {
	if t, ok := ctx.Value(replyTimeKey{}).(*time.Duration); ok {
		*t += d
	}
}

// withQuotas serves req under the client quotas that apply to its principal and client id, after
// waiting while their sensors' client is muted.
//
// A Produce or a client's Fetch is under its byte-rate quota: a produce is measured by its record
// bytes before it is served, a fetch by the record bytes of its response, and a fetch's max_bytes is
// cut to the quota over the window. Any request quotaExempt does not leave out is under its
// request_percentage quota, measured by its handler time: the time Handle spends on it (from the
// decoded request, after the mute, to the Reply being returned; for most keys this builds the whole
// response) plus what its Reply reports through addReplyTime (a fetch's reads, not its parked wait).
// The Reply's wait for acks, a coordinator or new data and the writer's encoding and sending are not
// handler time.
//
// The response's ThrottleMillis is the larger of the byte-rate and the request-time throttle, never
// their sum, as Kafka takes it. The response is sent at once, and the client's next request waits
// out the throttle time, as Kafka does from 2.0 (KIP-219).
func (b *Broker) withQuotas(ctx context.Context, req *wire.Request) wire.Reply {
	bc, byBytes := b.byteQuota(req)
	rc, byTime := b.requestQuota(req)
	if !byBytes && !byTime {
		return b.dispatch(ctx, req)
	}
	if byBytes {
		b.quotas.waitMuted(ctx, bc)
	}
	if byTime {
		b.quotas.waitMuted(ctx, rc)
	}
	start := b.clock.Now()
	var throttle time.Duration
	switch body := req.Body.(type) {
	case *kmsg.ProduceRequest:
		if byBytes {
			throttle = b.quotas.record(bc, float64(produceBytes(body)))
		}
	case *kmsg.FetchRequest:
		if byBytes {
			body.MaxBytes = min(body.MaxBytes, b.quotas.maxWindowBytes(bc))
		}
	}
	reply := b.dispatch(ctx, req)
	handled := b.clock.Now().Sub(start)
	return func(ctx context.Context) kmsg.Response {
		if byTime {
			ctx = context.WithValue(ctx, replyTimeKey{}, &handled)
		}
		resp := reply(ctx)
		if f, ok := resp.(*kmsg.FetchResponse); ok && byBytes {
			throttle = b.quotas.record(bc, float64(fetchBytes(ctx, f)))
		}
		if byTime {
			throttle = max(throttle, b.quotas.record(rc, requestPercent(handled)))
		}
		if r, ok := resp.(throttleResponse); ok && throttle > 0 {
			ms, _ := r.Throttle()
			r.SetThrottle(max(ms, throttleMillis(throttle)))
		}
		return resp
	}
}

// throttleResponse is a response with a ThrottleTimeMs field; kmsg gives every such response both
// methods.
type throttleResponse interface {
	kmsg.ThrottleResponse
	kmsg.SetThrottleResponse
}

// produceBytes is the record bytes a Produce carries.
func produceBytes(req *kmsg.ProduceRequest) int {
	n := 0
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			n += len(p.Records)
		}
	}
	return n
}

// fetchBytes is the record bytes a Fetch response carries: those copied into it and those its
// writer sends from the log's files (wire.AttachSection).
func fetchBytes(ctx context.Context, resp *kmsg.FetchResponse) int {
	n := 0
	for i, t := range resp.Topics {
		n += wire.SectionBytes(ctx, i)
		for _, p := range t.Partitions {
			n += len(p.RecordBatches)
		}
	}
	return n
}

func throttleMillis(d time.Duration) int32 {
	return int32(min((d+time.Millisecond-1)/time.Millisecond, math.MaxInt32))
}
