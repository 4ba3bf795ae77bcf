package partition

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/controller"
)

// TestThrottleCopyRate: a partition of 1.5 MiB moves to a second node under
// follower.replication.throttled.rate = 512 KiB/s; the new replica catches up in bytes / rate, within
// ±20 %. The simulated clock follows real time, since the copy waits on the leader's real answers.
func TestThrottleCopyRate(t *testing.T) {
	const (
		rate       = 512 << 10
		batchBytes = 16 << 10
		nBatches   = 96
	)
	c := newSimCluster(t, 2)
	c.createTopic("t", []int32{1}, 1)
	eventually(t, "node 1 leads", func() bool { return c.replica(1, "t") != nil && c.replica(1, "t").IsLeader() })
	for range nBatches {
		b := plain(1, 1000)
		b.valueBytes = batchBytes
		if _, err := c.produce("t", b); err != nil {
			t.Fatal(err)
		}
	}
	leader := c.replica(1, "t")
	var size int64
	for _, s := range leader.log.Segments() {
		size += s.Size
	}
	c.apply(controller.AlterBrokerConfigs{Set: map[string]string{controller.BrokerConfigFollowerThrottleRate: strconv.Itoa(rate)}})

	// The simulated clock follows real time from here on.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		last := time.Now()
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			now := time.Now()
			c.clock.advance(now.Sub(last))
			last = now
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	began := c.clock.Now()
	c.apply(controller.ReassignPartition{Topic: "t", Partition: 0, Replicas: []int32{1, 2}})
	end := leader.LogEndOffset()
	eventually(t, "node 2 copies the log", func() bool {
		r := c.replica(2, "t")
		return r != nil && r.LogEndOffset() >= end
	})
	took := c.clock.Now().Sub(began)
	got := float64(size) / took.Seconds()
	t.Logf("copied %d bytes in %v: %.0f B/s at a limit of %d B/s (%.2f of it)", size, took, got, rate, got/rate)
	if got < 0.8*rate || got > 1.2*rate {
		t.Errorf("copy rate %.0f B/s, want %d ±20%%", got, rate)
	}
	eventually(t, "the move completes", func() bool { return !c.state("t", 0).Moving() })
}
