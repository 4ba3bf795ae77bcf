package server

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/kafka/api"
	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/partition"
)

// metrics is a node's Prometheus registry, served on GET /metrics (docs/cluster.md lists every
// series). Replica series are computed at scrape time from the partition Manager; request series
// are counted by the Kafka handler wrapper.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	errors   *prometheus.CounterVec
	replicas atomic.Pointer[partition.Manager]
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_kafka_requests_total",
			Help: "Kafka requests served, by API key.",
		}, []string{"api_key", "api"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_kafka_request_errors_total",
			Help: "Partitions answered with an error in Produce and Fetch responses (and Fetch's top-level error), by API key and error.",
		}, []string{"api_key", "api", "error"}),
	}
	m.reg.MustRegister(m.requests, m.errors, replicaCollector{m: m},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// handler serves the registry in the Prometheus text format.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// wrap returns h counting its requests and the errors of its Produce and Fetch responses.
func (m *metrics) wrap(h wire.Handler) wire.Handler { return countingHandler{Handler: h, m: m} }

// countingHandler is a wire.Handler that counts what the handler it wraps serves.
type countingHandler struct {
	wire.Handler
	m *metrics
}

// Handle counts the request and, once its reply is computed, the errors it carries.
func (h countingHandler) Handle(ctx context.Context, req *wire.Request) wire.Reply {
	key := strconv.Itoa(int(req.Key))
	name := kmsg.NameForKey(req.Key)
	h.m.requests.WithLabelValues(key, name).Inc()
	reply := h.Handler.Handle(ctx, req)
	if req.Key != kmsg.Produce.Int16() && req.Key != kmsg.Fetch.Int16() {
		return reply
	}
	return func(ctx context.Context) kmsg.Response {
		resp := reply(ctx)
		for _, code := range responseErrors(resp) {
			h.m.errors.WithLabelValues(key, name, api.ErrorName(code)).Inc()
		}
		return resp
	}
}

// responseErrors lists the non-zero error codes of a Produce or Fetch response: one per partition,
// plus Fetch's top-level code.
func responseErrors(resp kmsg.Response) []int16 {
	var out []int16
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					out = append(out, p.ErrorCode)
				}
			}
		}
	case *kmsg.FetchResponse:
		if r.ErrorCode != 0 {
			out = append(out, r.ErrorCode)
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					out = append(out, p.ErrorCode)
				}
			}
		}
	}
	return out
}

// The replica series. Offsets are Kafka offsets; lag is in records.
var (
	descUnderReplicated = prometheus.NewDesc("weir_under_replicated_partitions",
		"Partitions this node leads whose ISR is smaller than their replica set.", nil, nil)
	descHW = prometheus.NewDesc("weir_partition_high_watermark",
		"High watermark of each hosted replica.", []string{"topic", "partition"}, nil)
	descLEO = prometheus.NewDesc("weir_partition_log_end_offset",
		"Log end offset of each hosted replica.", []string{"topic", "partition"}, nil)
	descLSO = prometheus.NewDesc("weir_partition_log_start_offset",
		"Log start offset of each hosted replica.", []string{"topic", "partition"}, nil)
	descLeader = prometheus.NewDesc("weir_partition_leader",
		"1 when this node leads the partition, 0 when it follows or nobody leads.", []string{"topic", "partition"}, nil)
	descISR = prometheus.NewDesc("weir_partition_isr_size",
		"ISR size of each hosted replica, as this node's image says.", []string{"topic", "partition"}, nil)
	descReplicas = prometheus.NewDesc("weir_partition_replicas",
		"Replica count of each hosted partition.", []string{"topic", "partition"}, nil)
	descLag = prometheus.NewDesc("weir_replica_lag_records",
		"On a leader, each follower's lag: the leader's log end offset minus the follower's last reported one.",
		[]string{"topic", "partition", "replica"}, nil)
	descCaughtUp = prometheus.NewDesc("weir_replica_since_caught_up_seconds",
		"On a leader, how long ago each follower last reached the leader's log end offset.",
		[]string{"topic", "partition", "replica"}, nil)
	descInISR = prometheus.NewDesc("weir_replica_in_isr",
		"On a leader, 1 when the follower is in the ISR.", []string{"topic", "partition", "replica"}, nil)
)

// replicaCollector computes the replica series from the Manager at each scrape.
type replicaCollector struct{ m *metrics }

// Describe sends every replica series' descriptor.
func (c replicaCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUnderReplicated, descHW, descLEO, descLSO, descLeader, descISR,
		descReplicas, descLag, descCaughtUp, descInISR} {
		ch <- d
	}
}

// Collect sends the current value of every replica series; nothing before the replicas are open.
func (c replicaCollector) Collect(ch chan<- prometheus.Metric) {
	mgr := c.m.replicas.Load()
	if mgr == nil {
		return
	}
	under := 0
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, s := range mgr.ReplicaStatus() {
		part := strconv.Itoa(int(s.Partition))
		leading := 0.0
		if s.Role == partition.RoleLeader {
			leading = 1
			if len(s.ISR) < len(s.Replicas) {
				under++
			}
		}
		gauge(descHW, float64(s.HighWatermark), s.Topic, part)
		gauge(descLEO, float64(s.LogEndOffset), s.Topic, part)
		gauge(descLSO, float64(s.LogStartOffset), s.Topic, part)
		gauge(descLeader, leading, s.Topic, part)
		gauge(descISR, float64(len(s.ISR)), s.Topic, part)
		gauge(descReplicas, float64(len(s.Replicas)), s.Topic, part)
		for _, f := range s.Followers {
			id := strconv.Itoa(int(f.NodeID))
			inISR := 0.0
			if f.InISR {
				inISR = 1
			}
			gauge(descLag, float64(f.Lag), s.Topic, part, id)
			gauge(descCaughtUp, f.SinceCaughtUp.Seconds(), s.Topic, part, id)
			gauge(descInISR, inISR, s.Topic, part, id)
		}
	}
	gauge(descUnderReplicated, float64(under))
}
