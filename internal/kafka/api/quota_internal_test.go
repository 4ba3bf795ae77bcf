package api

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/kafka/wire"
)

func TestQuotaResolveOrder(t *testing.T) {
	named, def, none := controller.QuotaNamed, controller.QuotaDefault(), controller.QuotaName{}
	levels := []controller.QuotaEntity{
		{User: named("alice"), ClientID: named("app")},
		{User: named("alice"), ClientID: def},
		{User: named("alice")},
		{User: def, ClientID: named("app")},
		{User: def, ClientID: def},
		{User: def},
		{ClientID: named("app")},
		{User: none, ClientID: def},
	}
	wantKeys := []quotaSensorKey{
		{hasUser: true, hasCli: true, user: "alice", client: "app"},
		{hasUser: true, hasCli: true, user: "alice", client: "app"},
		{hasUser: true, user: "alice"},
		{hasUser: true, hasCli: true, user: "alice", client: "app"},
		{hasUser: true, hasCli: true, user: "alice", client: "app"},
		{hasUser: true, user: "alice"},
		{hasCli: true, client: "app"},
		{hasCli: true, client: "app"},
	}
	// With the quotas of levels i.. set, alice's app resolves to level i's.
	for i := range levels {
		var src []controller.ClientQuota
		for j := i; j < len(levels); j++ {
			src = append(src, controller.ClientQuota{Entity: levels[j], Values: map[string]float64{controller.QuotaProducerByteRate: float64(j + 1)}})
		}
		tab := newQuotaTable(src)
		limit, key, ok := tab.resolve(quotaProduce, "alice", "app")
		if !ok || limit != float64(i+1) || key != wantKeys[i] {
			t.Errorf("from level %d: limit %v key %+v ok %v, want %d %+v", i+1, limit, key, ok, i+1, wantKeys[i])
		}
		for _, kind := range []quotaKind{quotaFetch, quotaRequest} {
			if _, _, ok := tab.resolve(kind, "alice", "app"); ok {
				t.Errorf("from level %d: a %s quota resolved where only produce quotas are set", i+1, quotaKeys[kind])
			}
		}
	}
	tab := newQuotaTable([]controller.ClientQuota{{Entity: controller.QuotaEntity{User: named("bob")},
		Values: map[string]float64{controller.QuotaConsumerByteRate: 1}}})
	if _, _, ok := tab.resolve(quotaFetch, "alice", "app"); ok {
		t.Error("bob's quota resolved for alice")
	}
	if got := quotaUser("User:alice"); got != "alice" {
		t.Errorf("quotaUser(User:alice) = %q", got)
	}
}

func TestQuotaSensorThrottle(t *testing.T) {
	start := time.Unix(1000, 0)
	size := 100 * time.Millisecond
	s := &quotaSensor{samples: make([]quotaSample, 11)}
	// A first record is spread over all samples but one: 1,000 bytes in 1s.
	s.record(start, 1000, size)
	if r, w := s.rate(start, size); r != 1000 || w != time.Second {
		t.Fatalf("rate after one record: %v over %v, want 1000 over 1s", r, w)
	}
	// 2,000 bytes 500ms later: the window is still the minimum, so 3,000 B/s.
	s.record(start.Add(500*time.Millisecond), 2000, size)
	if r, _ := s.rate(start.Add(500*time.Millisecond), size); r != 3000 {
		t.Fatalf("rate after two records: %v, want 3000", r)
	}
	// Past the whole window both samples are forgotten.
	if r, _ := s.rate(start.Add(1700*time.Millisecond), size); r != 0 {
		t.Fatalf("rate past the window: %v, want 0", r)
	}
}

func TestQuotaThrottleTime(t *testing.T) {
	now := time.Unix(1000, 0)
	q := &quotas{clock: &fixedClock{now}, num: 11, size: 100 * time.Millisecond, sensor: map[quotaSensorKey]*quotaSensor{}}
	c := quotaCall{limit: 1000, key: quotaSensorKey{hasCli: true, client: "c"}}
	if d := q.record(c, 1000); d != 0 {
		t.Fatalf("at the quota: throttle %v, want none", d)
	}
	// 1,200 bytes over 1s at 1,000 B/s: (1200-1000)/1000 × 1s.
	if d := q.record(c, 200); d != 200*time.Millisecond {
		t.Fatalf("over the quota: throttle %v, want 200ms", d)
	}
	if d := q.mutedFor(c); d != 200*time.Millisecond {
		t.Fatalf("muted for %v, want 200ms", d)
	}
	// A throttle is at most the whole window.
	if d := q.record(c, 1e9); d != 1100*time.Millisecond {
		t.Fatalf("far over the quota: throttle %v, want the window, 1.1s", d)
	}
	if p, f, r := (&Broker{quotas: q}).QuotaThrottled(); p != 1300*time.Millisecond || f != 0 || r != 0 {
		t.Fatalf("throttled produce %v fetch %v request %v", p, f, r)
	}
}

func TestQuotaRequestTimeThrottle(t *testing.T) {
	if p := requestPercent(time.Millisecond); p != 0.1 {
		t.Fatalf("1ms of handler time is %v percent-seconds, want 0.1", p)
	}
	q := &quotas{clock: &fixedClock{time.Unix(1000, 0)}, num: 11, size: 100 * time.Millisecond, sensor: map[quotaSensorKey]*quotaSensor{}}
	c := quotaCall{limit: 10, key: quotaSensorKey{kind: quotaRequest, hasCli: true, client: "c"}}
	// 100ms of handler time over the first window, 1s: 10 % of a thread, the quota.
	if d := q.record(c, requestPercent(100*time.Millisecond)); d != 0 {
		t.Fatalf("at the quota: throttle %v, want none", d)
	}
	// 5ms more: 10.5 %, so (10.5-10)/10 × 1s.
	if d := q.record(c, requestPercent(5*time.Millisecond)); d != 50*time.Millisecond {
		t.Fatalf("over the quota: throttle %v, want 50ms", d)
	}
	// Far over the quota the throttle is one sample, not the whole window as for a byte rate.
	if d := q.record(c, requestPercent(time.Second)); d != 100*time.Millisecond {
		t.Fatalf("far over the quota: throttle %v, want one sample, 100ms", d)
	}
	if d := q.mutedFor(c); d != 100*time.Millisecond {
		t.Fatalf("muted for %v, want 100ms", d)
	}
	if p, f, r := (&Broker{quotas: q}).QuotaThrottled(); p != 0 || f != 0 || r != 150*time.Millisecond {
		t.Fatalf("throttled produce %v fetch %v request %v", p, f, r)
	}
}

func TestQuotaExempt(t *testing.T) {
	follower := kmsg.NewPtrFetchRequest()
	follower.ReplicaID = 2
	consumer := kmsg.NewPtrFetchRequest()
	consumer.ReplicaID = -1
	followerEpochs := kmsg.NewPtrOffsetForLeaderEpochRequest()
	followerEpochs.ReplicaID = 2
	clientEpochs := kmsg.NewPtrOffsetForLeaderEpochRequest()
	clientEpochs.ReplicaID = -1
	verify := kmsg.NewPtrAddPartitionsToTxnRequest()
	verify.Version = 4
	addPartitions := kmsg.NewPtrAddPartitionsToTxnRequest()
	addPartitions.Version = 3
	for _, tc := range []struct {
		body   kmsg.Request
		exempt bool
	}{
		{kmsg.NewPtrApiVersionsRequest(), true},
		{kmsg.NewPtrSASLHandshakeRequest(), true},
		{kmsg.NewPtrSASLAuthenticateRequest(), true},
		{kmsg.NewPtrWriteTxnMarkersRequest(), true},
		{follower, true},
		{followerEpochs, true},
		{verify, true},
		{consumer, false},
		{clientEpochs, false},
		{addPartitions, false},
		{kmsg.NewPtrMetadataRequest(), false},
		{kmsg.NewPtrProduceRequest(), false},
		{kmsg.NewPtrListOffsetsRequest(), false},
		{kmsg.NewPtrJoinGroupRequest(), false},
	} {
		req := &wire.Request{Key: tc.body.Key(), Version: tc.body.GetVersion(), Body: tc.body}
		if got := quotaExempt(req); got != tc.exempt {
			t.Errorf("key %d v%d: exempt %v, want %v", req.Key, req.Version, got, tc.exempt)
		}
	}
}

func TestQuotaSweepDropsIdleSensors(t *testing.T) {
	clk := &fixedClock{now: time.Unix(1000, 0)}
	q := &quotas{clock: clk, num: 11, size: 100 * time.Millisecond, sensor: map[quotaSensorKey]*quotaSensor{}}
	a := quotaCall{limit: 1000, key: quotaSensorKey{hasCli: true, client: "a"}}
	b := quotaCall{limit: 1000, key: quotaSensorKey{hasCli: true, client: "b"}}
	q.record(a, 1e6) // muted for the whole window, 1.1s
	q.record(b, 10)
	clk.now = clk.now.Add(1100 * time.Millisecond)
	q.record(quotaCall{limit: 1000, key: quotaSensorKey{hasCli: true, client: "c"}}, 10)
	if _, ok := q.sensor[b.key]; ok {
		t.Error("an idle sensor outlived the window")
	}
	if _, ok := q.sensor[a.key]; !ok {
		t.Error("a muted client's sensor was dropped while it is muted")
	}
}

// fixedClock is a Clock that stands still until a test moves it.
type fixedClock struct{ now time.Time }

func (c *fixedClock) Now() time.Time { return c.now }

func (*fixedClock) After(time.Duration) <-chan time.Time { return make(chan time.Time) }
