package controller

import (
	"math"
	"strconv"
	"strings"
)

// FollowerThrottleRate is follower.replication.throttled.rate in bytes per second, or 0 when it is
// unset (Kafka's default, Long.MAX_VALUE, means no limit).
func (img *Image) FollowerThrottleRate() int64 {
	rate := img.brokerInt(BrokerConfigFollowerThrottleRate)
	if rate <= 0 || rate == math.MaxInt64 {
		return 0
	}
	return rate
}

// FollowerThrottled reports whether broker copies partition p of t under the follower throttle: it is
// an adding replica of a move in progress, or the topic's follower.replication.throttled.replicas
// names it ("*", or a "p:broker" pair) (docs/reassignment.md, "Throttle").
func (img *Image) FollowerThrottled(t *Topic, p int32, broker int32) bool {
	if st, ok := t.Partition(p); ok && contains(st.AddingReplicas, broker) {
		return true
	}
	list := t.Configs["follower.replication.throttled.replicas"]
	if list == "" {
		return false
	}
	if strings.TrimSpace(list) == "*" {
		return true
	}
	want := strconv.Itoa(int(p)) + ":" + strconv.Itoa(int(broker))
	for _, it := range splitList(list) {
		if it == want {
			return true
		}
	}
	return false
}
