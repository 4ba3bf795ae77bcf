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

// LeaderThrottleRate is leader.replication.throttled.rate in bytes per second, or 0 when it is unset.
func (img *Image) LeaderThrottleRate() int64 {
	rate := img.brokerInt(BrokerConfigLeaderThrottleRate)
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
	return throttleListNames(t.Configs["follower.replication.throttled.replicas"], p, broker)
}

// LeaderThrottled reports whether leader, leading partition p of t, sends follower its copy under the
// leader throttle: the follower is out of the ISR, and it is an adding replica of a move in progress
// or the topic's leader.replication.throttled.replicas names the leader ("*", or a "p:leader" pair),
// as Kafka's leader-side quota has it (docs/reassignment.md, "Throttle").
func (img *Image) LeaderThrottled(t *Topic, p int32, leader, follower int32) bool {
	st, ok := t.Partition(p)
	if !ok || contains(st.ISR, follower) {
		return false
	}
	return contains(st.AddingReplicas, follower) ||
		throttleListNames(t.Configs["leader.replication.throttled.replicas"], p, leader)
}

// throttleListNames reports whether a throttled-replicas list ("*", or "partition:broker" pairs)
// names broker's replica of partition p.
func throttleListNames(list string, p int32, broker int32) bool {
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
