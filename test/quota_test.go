package test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// throttleHook counts the responses that carried a throttle time.
type throttleHook struct{ n atomic.Int64 }

var _ kgo.HookBrokerThrottle = (*throttleHook)(nil)

// OnBrokerThrottle implements kgo.HookBrokerThrottle.
func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.n.Add(1)
	}
}

// TestQuotaRequestPercentage runs two franz-go clients side by side against one weir process, each
// sending ListOffsets requests one after another for the same time: "limited", whose client id has a
// request_percentage of 0.01 (100µs of handler time a second), and "free", without a quota. The
// limited one must be told to wait (ThrottleTimeMs, seen through OnBrokerThrottle) and get far fewer
// requests answered; the free one must never be throttled. The node measures over 11 samples of
// 100ms so that the quota takes hold within the run.
func TestQuotaRequestPercentage(t *testing.T) {
	n := startNode(t, nodeOptions{Args: []string{"--quota-window-num", "11", "--quota-window-size", "100ms"}})
	ctx := testContext(t, 2*time.Minute)
	n.createTopic(ctx, t, "q", 1, nil)
	res, err := n.admin(t).AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: kmsg.StringPtr("limited")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 0.01}},
	}})
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		t.Fatalf("set request_percentage of client limited: %v", err)
	}
	const run = 3 * time.Second
	listOffsets := func(client string, h *throttleHook) int {
		cl := n.client(t, kgo.ClientID(client), kgo.WithHooks(h))
		answered := 0
		for start := time.Now(); time.Since(start) < run && ctx.Err() == nil; {
			req := kmsg.NewPtrListOffsetsRequest()
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = "q"
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp = -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Errorf("ListOffsets as %s: %v", client, err)
				return answered
			}
			if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
				t.Errorf("ListOffsets as %s: code %d", client, code)
				return answered
			}
			answered++
		}
		return answered
	}
	var limited, free throttleHook
	var nLimited, nFree int
	var wg sync.WaitGroup
	wg.Go(func() { nLimited = listOffsets("limited", &limited) })
	wg.Go(func() { nFree = listOffsets("free", &free) })
	wg.Wait()
	t.Logf("in %v: limited answered %d (%d throttled), free answered %d (%d throttled)",
		run, nLimited, limited.n.Load(), nFree, free.n.Load())
	if limited.n.Load() == 0 {
		t.Errorf("the client over its request_percentage was never given a throttle time")
	}
	if free.n.Load() != 0 {
		t.Errorf("the client without a quota was given a throttle time %d times", free.n.Load())
	}
	if nLimited*3 >= nFree {
		t.Errorf("the limited client got %d requests answered, the free one %d: want fewer than a third", nLimited, nFree)
	}
}
