package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-mq/weir/internal/kafka/api"
)

var (
	descDelayPartitions = prometheus.NewDesc("weir_delay_partitions",
		"Partitions of a delay topic whose releaser runs on this node (one per partition it leads).", []string{"topic"}, nil)
	descDelayHeld = prometheus.NewDesc("weir_delay_held_records",
		"Pending records of a delay topic held in its releasers' indexes here (at most 100,000 a partition; more pending are read again from the log).",
		[]string{"topic"}, nil)
	descDelayOverdue = prometheus.NewDesc("weir_delay_overdue_seconds",
		"How long the earliest pending record of a delay topic held here has been due, 0 when none is: above a second, releases are falling behind.",
		[]string{"topic"}, nil)
	descDelayReleased = prometheus.NewDesc("weir_delay_released_records_total",
		"Records of a delay topic released into its target by this node since the topic's first releaser here started.", []string{"topic"}, nil)
	descDelayLateness = prometheus.NewDesc("weir_delay_release_lateness_seconds",
		"Time from a released record's due time to the commit of its copy in the target, over every delay topic released here.", nil, nil)
)

// delayCollector reports the delay topics' releasers on this node.
type delayCollector struct{ m *metrics }

// Describe sends the delay series' descriptors.
func (c delayCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descDelayPartitions
	ch <- descDelayHeld
	ch <- descDelayOverdue
	ch <- descDelayReleased
	ch <- descDelayLateness
}

// Collect sends each delay topic's series, and the lateness histogram once the node has released a
// record.
func (c delayCollector) Collect(ch chan<- prometheus.Metric) {
	d := c.m.delays.Load()
	if d == nil {
		return
	}
	topics, late := d.Stats()
	now := c.m.clock.Now().UnixMilli()
	for topic, ts := range topics {
		gauge(ch, descDelayPartitions, float64(ts.Partitions), topic)
		gauge(ch, descDelayHeld, float64(ts.Held), topic)
		overdue := 0.0
		if ts.NextDue != 0 && ts.NextDue < now {
			overdue = float64(now-ts.NextDue) / 1000
		}
		gauge(ch, descDelayOverdue, overdue, topic)
		ch <- prometheus.MustNewConstMetric(descDelayReleased, prometheus.CounterValue, float64(ts.Released), topic)
	}
	var count uint64
	buckets := make(map[float64]uint64, len(api.DelayLatenessBuckets))
	for i, n := range late.Counts {
		count += n
		if i < len(api.DelayLatenessBuckets) {
			buckets[api.DelayLatenessBuckets[i]] = count
		}
	}
	if count > 0 {
		ch <- prometheus.MustNewConstHistogram(descDelayLateness, count, late.Sum, buckets)
	}
}
