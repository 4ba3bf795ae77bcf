package server

import "github.com/prometheus/client_golang/prometheus"

var (
	descShareOwners = prometheus.NewDesc("weir_share_partition_owners",
		"Share-partitions whose state this node holds as their partition's leader (one owner each).", nil, nil)
	descShareSessions = prometheus.NewDesc("weir_share_sessions",
		"Share sessions open on this node (one per share consumer and leader it fetches from).", nil, nil)
	descDeadLettersDropped = prometheus.NewDesc("weir_share_dead_letters_dropped_total",
		"Records share-partitions led here archived without writing their dead letters, by why the dead-letter topic could not take them.",
		[]string{"reason"}, nil)
)

// shareCollector reports the share groups' owners and sessions at the partition leaders, and the dead
// letters they did not write.
type shareCollector struct{ m *metrics }

// Describe sends the share series' descriptors.
func (c shareCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descShareOwners
	ch <- descShareSessions
	ch <- descDeadLettersDropped
}

// Collect sends the counts, when the node serves share groups.
func (c shareCollector) Collect(ch chan<- prometheus.Metric) {
	b := c.m.broker.Load()
	if b == nil || !b.ShareGroupsOn() {
		return
	}
	owners, sessions := b.ShareCounts()
	gauge(ch, descShareOwners, float64(owners))
	gauge(ch, descShareSessions, float64(sessions))
	for reason, n := range b.DeadLettersDropped() {
		ch <- prometheus.MustNewConstMetric(descDeadLettersDropped, prometheus.CounterValue, float64(n), reason)
	}
}
