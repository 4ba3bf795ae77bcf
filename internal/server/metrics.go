package server

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/kafka/api"
	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/partition"
)

// metricsClock times the requests the metrics observe.
type metricsClock interface{ Now() time.Time }

// metrics is a node's Prometheus registry, served on GET /metrics (docs/metrics.md lists every
// family). Replica, storage and group series are computed at scrape time from the partition Manager,
// the controller image and the group coordinator; request, byte and connection series are counted
// as requests are served. Only the replica series of user topics carry a partition label: internal
// topics are aggregated per topic, and every other series is per topic at most.
type metrics struct {
	reg      *prometheus.Registry
	clock    metricsClock
	requests *prometheus.CounterVec
	errors   *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// perKey caches each API key's series, filled on the key's first request.
	perKey [kmsg.MaxKey + 1]atomic.Pointer[apiMetrics]
	// topics holds each topic's byte counters (*topicBytes by name); a scrape drops the topics the
	// image no longer has.
	topics      sync.Map
	connsOpen   prometheus.Gauge
	connsOpened prometheus.Counter
	saslAuths   *prometheus.CounterVec

	replicas atomic.Pointer[partition.Manager]
	meta     atomic.Pointer[controller.Store]
	groups   atomic.Pointer[group.Coordinator]
	broker   atomic.Pointer[api.Broker]
	delays   atomic.Pointer[api.DelayReleasers]
}

// requestSecondsBuckets bound weir_kafka_request_duration_seconds: from a page-cache fetch to a
// produce waiting out a slow fsync or a fetch parked for its whole MaxWait.
var requestSecondsBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

func newMetrics(clk metricsClock) *metrics {
	m := &metrics{
		reg:   prometheus.NewRegistry(),
		clock: clk,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_kafka_requests_total",
			Help: "Kafka requests served, by API key.",
		}, []string{"api_key", "api"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_kafka_request_errors_total",
			Help: "Error codes in Kafka responses (one per partition, group, topic or member answered with an error), by API key and error.",
		}, []string{"api_key", "api", "error"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "weir_kafka_request_duration_seconds",
			Help:    "Time from a Produce or Fetch request's handling to its response being ready, by API.",
			Buckets: requestSecondsBuckets,
		}, []string{"api"}),
		connsOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "weir_kafka_connections",
			Help: "Open Kafka protocol connections (clients and other brokers' followers).",
		}),
		connsOpened: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_kafka_connections_accepted_total",
			Help: "Kafka protocol connections accepted.",
		}),
		saslAuths: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_sasl_authentications_total",
			Help: "SASL exchanges that ended, by mechanism and result (ok, failed).",
		}, []string{"mechanism", "result"}),
	}
	for _, key := range []kmsg.Key{kmsg.Produce, kmsg.Fetch} {
		m.duration.WithLabelValues(key.Name())
	}
	m.reg.MustRegister(m.requests, m.errors, m.duration, m.connsOpen, m.connsOpened, m.saslAuths,
		replicaCollector{m: m}, topicCollector{m: m}, storageCollector{m: m}, groupCollector{m: m}, aclCollector{m: m},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(quotaCollector{m: m}, shareCollector{m: m}, delayCollector{m: m})
	return m
}

// observeSASL counts one SASL exchange that ended.
func (m *metrics) observeSASL(mechanism, result string) {
	m.saslAuths.WithLabelValues(mechanism, result).Inc()
}

// handler serves the registry in the Prometheus text format.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// wrap returns h counting its requests, timing Produce and Fetch, counting their bytes per topic and
// counting the error codes of the responses that carry them.
func (m *metrics) wrap(h wire.Handler) wire.Handler { return countingHandler{Handler: h, m: m} }

// apiMetrics are one API key's series.
type apiMetrics struct {
	key, name string
	requests  prometheus.Counter
	// duration is set for Produce and Fetch only.
	duration prometheus.Observer
}

// forKey returns key's series, creating them on its first request.
func (m *metrics) forKey(key int16) *apiMetrics {
	if key < 0 || int(key) >= len(m.perKey) {
		return m.newAPIMetrics(key)
	}
	if am := m.perKey[key].Load(); am != nil {
		return am
	}
	am := m.newAPIMetrics(key)
	m.perKey[key].CompareAndSwap(nil, am)
	return m.perKey[key].Load()
}

func (m *metrics) newAPIMetrics(key int16) *apiMetrics {
	am := &apiMetrics{key: strconv.Itoa(int(key)), name: kmsg.NameForKey(key)}
	am.requests = m.requests.WithLabelValues(am.key, am.name)
	if key == kmsg.Produce.Int16() || key == kmsg.Fetch.Int16() {
		am.duration = m.duration.WithLabelValues(am.name)
	}
	return am
}

// countingHandler is a wire.Handler that counts what the handler it wraps serves.
type countingHandler struct {
	wire.Handler
	m *metrics
}

// Handle counts the request and, once its reply is computed, times it and counts its bytes and the
// error codes it carries.
func (h countingHandler) Handle(ctx context.Context, req *wire.Request) wire.Reply {
	am := h.m.forKey(req.Key)
	am.requests.Inc()
	if !carriesErrors(req.Key) {
		return h.Handler.Handle(ctx, req)
	}
	var start time.Time
	if am.duration != nil {
		start = h.m.clock.Now()
	}
	reply := h.Handler.Handle(ctx, req)
	return func(ctx context.Context) kmsg.Response {
		var resp kmsg.Response
		if reply != nil {
			resp = reply(ctx)
		}
		if am.duration != nil {
			am.duration.Observe(h.m.clock.Now().Sub(start).Seconds())
		}
		switch body := req.Body.(type) {
		case *kmsg.ProduceRequest:
			h.m.countProduced(body, resp)
		case *kmsg.FetchRequest:
			h.m.countFetched(ctx, resp)
		}
		eachError(resp, func(code int16) {
			h.m.errors.WithLabelValues(am.key, am.name, api.ErrorName(code)).Inc()
		})
		return resp
	}
}

// topicBytes are one topic's byte counters.
type topicBytes struct{ in, out atomic.Uint64 }

// bytesFor returns topic's counters, creating them on first use.
func (m *metrics) bytesFor(topic string) *topicBytes {
	if tb, ok := m.topics.Load(topic); ok {
		return tb.(*topicBytes)
	}
	tb, _ := m.topics.LoadOrStore(topic, &topicBytes{})
	return tb.(*topicBytes)
}

// countProduced adds the batch bytes of every partition appended to its topic's bytes in: those
// answered without an error, or, for acks=0 (no response), those of topics the image has.
func (m *metrics) countProduced(req *kmsg.ProduceRequest, resp kmsg.Response) {
	pr, _ := resp.(*kmsg.ProduceResponse)
	var img *controller.Image
	if pr == nil {
		store := m.meta.Load()
		if store == nil {
			return
		}
		img = store.Image()
	}
	for i := range req.Topics {
		rt := &req.Topics[i]
		var n int
		switch {
		case pr != nil:
			if i >= len(pr.Topics) || pr.Topics[i].Topic != rt.Topic {
				continue
			}
			parts := pr.Topics[i].Partitions
			for j := range rt.Partitions {
				if j < len(parts) && parts[j].ErrorCode == 0 {
					n += len(rt.Partitions[j].Records)
				}
			}
		default:
			if _, ok := img.Topic(rt.Topic); !ok {
				continue
			}
			for j := range rt.Partitions {
				n += len(rt.Partitions[j].Records)
			}
		}
		if n > 0 {
			m.bytesFor(rt.Topic).in.Add(uint64(n))
		}
	}
}

// countFetched adds the record bytes of a Fetch response to each topic's bytes out, those the
// connection sends from the log's files (wire.SectionBytes) included.
func (m *metrics) countFetched(ctx context.Context, resp kmsg.Response) {
	fr, _ := resp.(*kmsg.FetchResponse)
	if fr == nil {
		return
	}
	for i := range fr.Topics {
		n := wire.SectionBytes(ctx, i)
		for j := range fr.Topics[i].Partitions {
			n += len(fr.Topics[i].Partitions[j].RecordBatches)
		}
		if n > 0 {
			m.bytesFor(fr.Topics[i].Topic).out.Add(uint64(n))
		}
	}
}

// carriesErrors says whether responses to key are inspected for error codes (eachError knows them);
// Produce and Fetch are also timed and their bytes counted.
func carriesErrors(key int16) bool {
	switch kmsg.Key(key) {
	case kmsg.Produce, kmsg.Fetch, kmsg.ListOffsets, kmsg.Metadata, kmsg.OffsetCommit, kmsg.OffsetFetch,
		kmsg.FindCoordinator, kmsg.JoinGroup, kmsg.Heartbeat, kmsg.LeaveGroup, kmsg.SyncGroup,
		kmsg.CreateTopics, kmsg.DeleteTopics, kmsg.InitProducerID:
		return true
	default:
		return false
	}
}

// eachError calls fn with every non-zero error code of resp: per partition, group, topic or member,
// plus the response's top-level code.
func eachError(resp kmsg.Response, fn func(code int16)) {
	codes := func(cs ...int16) {
		for _, c := range cs {
			if c != 0 {
				fn(c)
			}
		}
	}
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				codes(p.ErrorCode)
			}
		}
	case *kmsg.FetchResponse:
		codes(r.ErrorCode)
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				codes(p.ErrorCode)
			}
		}
	case *kmsg.ListOffsetsResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				codes(p.ErrorCode)
			}
		}
	case *kmsg.MetadataResponse:
		for _, t := range r.Topics {
			codes(t.ErrorCode)
			for _, p := range t.Partitions {
				codes(p.ErrorCode)
			}
		}
	case *kmsg.OffsetCommitResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				codes(p.ErrorCode)
			}
		}
	case *kmsg.OffsetFetchResponse:
		codes(r.ErrorCode)
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				codes(p.ErrorCode)
			}
		}
		for _, g := range r.Groups {
			codes(g.ErrorCode)
			for _, t := range g.Topics {
				for _, p := range t.Partitions {
					codes(p.ErrorCode)
				}
			}
		}
	case *kmsg.FindCoordinatorResponse:
		codes(r.ErrorCode)
		for _, c := range r.Coordinators {
			codes(c.ErrorCode)
		}
	case *kmsg.JoinGroupResponse:
		codes(r.ErrorCode)
	case *kmsg.HeartbeatResponse:
		codes(r.ErrorCode)
	case *kmsg.LeaveGroupResponse:
		codes(r.ErrorCode)
		for _, mb := range r.Members {
			codes(mb.ErrorCode)
		}
	case *kmsg.SyncGroupResponse:
		codes(r.ErrorCode)
	case *kmsg.CreateTopicsResponse:
		for _, t := range r.Topics {
			codes(t.ErrorCode)
		}
	case *kmsg.DeleteTopicsResponse:
		for _, t := range r.Topics {
			codes(t.ErrorCode)
		}
	case *kmsg.InitProducerIDResponse:
		codes(r.ErrorCode)
	}
}
