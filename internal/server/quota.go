package server

import (
	"github.com/prometheus/client_golang/prometheus"
)

var descQuotaThrottle = prometheus.NewDesc("weir_quota_throttle_seconds_total",
	"Throttle time given to clients over their quotas, by kind (produce, fetch, request).",
	[]string{"kind"}, nil)

// quotaCollector reports the throttle time the broker's client quotas gave.
type quotaCollector struct{ m *metrics }

// Describe sends the quota series' descriptor.
func (c quotaCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descQuotaThrottle }

// Collect sends the throttle time given, by kind.
func (c quotaCollector) Collect(ch chan<- prometheus.Metric) {
	b := c.m.broker.Load()
	if b == nil {
		return
	}
	produce, fetch, request := b.QuotaThrottled()
	ch <- prometheus.MustNewConstMetric(descQuotaThrottle, prometheus.CounterValue, produce.Seconds(), "produce")
	ch <- prometheus.MustNewConstMetric(descQuotaThrottle, prometheus.CounterValue, fetch.Seconds(), "fetch")
	ch <- prometheus.MustNewConstMetric(descQuotaThrottle, prometheus.CounterValue, request.Seconds(), "request")
}
