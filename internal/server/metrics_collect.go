package server

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/storage"
)

// The replica series. Offsets are Kafka offsets; lag is in records.
var (
	descUnderReplicated = prometheus.NewDesc("weir_under_replicated_partitions",
		"Partitions this node leads whose ISR is smaller than their replica set.", nil, nil)
	descHW = prometheus.NewDesc("weir_partition_high_watermark",
		"High watermark of each hosted replica of a user topic.", []string{"topic", "partition"}, nil)
	descLEO = prometheus.NewDesc("weir_partition_log_end_offset",
		"Log end offset of each hosted replica of a user topic.", []string{"topic", "partition"}, nil)
	descLSO = prometheus.NewDesc("weir_partition_log_start_offset",
		"Log start offset of each hosted replica of a user topic.", []string{"topic", "partition"}, nil)
	descLeader = prometheus.NewDesc("weir_partition_leader",
		"1 when this node leads the partition, 0 when it follows or nobody leads.", []string{"topic", "partition"}, nil)
	descISR = prometheus.NewDesc("weir_partition_isr_size",
		"ISR size of each hosted replica of a user topic, as this node's image says.", []string{"topic", "partition"}, nil)
	descReplicas = prometheus.NewDesc("weir_partition_replicas",
		"Replica count of each hosted partition of a user topic.", []string{"topic", "partition"}, nil)
	descLSOLag = prometheus.NewDesc("weir_partition_lso_lag_records",
		"High watermark minus last stable offset: records read_committed consumers cannot read yet, held back by open transactions.",
		[]string{"topic", "partition"}, nil)
	descOpenTxnAge = prometheus.NewDesc("weir_partition_open_transaction_age_seconds",
		"Age of the oldest open transaction holding the last stable offset back (from its first batch's timestamp); absent when none.",
		[]string{"topic", "partition"}, nil)
	descOpenTxnProducer = prometheus.NewDesc("weir_partition_open_transaction_producer_id",
		"Producer id of the oldest open transaction holding the last stable offset back (weir txn list names its transactional id); absent when none.",
		[]string{"topic", "partition"}, nil)
	descLag = prometheus.NewDesc("weir_replica_lag_records",
		"On a leader of a user topic's partition, each follower's lag: the leader's log end offset minus the follower's last reported one.",
		[]string{"topic", "partition", "replica"}, nil)
	descCaughtUp = prometheus.NewDesc("weir_replica_since_caught_up_seconds",
		"On a leader of a user topic's partition, how long ago each follower last reached the leader's log end offset.",
		[]string{"topic", "partition", "replica"}, nil)
	descInISR = prometheus.NewDesc("weir_replica_in_isr",
		"On a leader of a user topic's partition, 1 when the follower is in the ISR.", []string{"topic", "partition", "replica"}, nil)

	descInternalReplicas = prometheus.NewDesc("weir_internal_topic_replicas",
		"Replicas of each internal topic this node hosts.", []string{"topic"}, nil)
	descInternalLeaders = prometheus.NewDesc("weir_internal_topic_leaders",
		"Partitions of each internal topic this node leads.", []string{"topic"}, nil)
	descInternalLEO = prometheus.NewDesc("weir_internal_topic_log_end_offset_sum",
		"Sum of the log end offsets of each internal topic's hosted replicas.", []string{"topic"}, nil)
	descInternalLagMax = prometheus.NewDesc("weir_internal_topic_replica_lag_records_max",
		"On the partitions of each internal topic this node leads, the largest follower lag in records.", []string{"topic"}, nil)
	descInternalOutOfISR = prometheus.NewDesc("weir_internal_topic_followers_out_of_isr",
		"On the partitions of each internal topic this node leads, the followers not in the ISR.", []string{"topic"}, nil)
)

// gauge sends one gauge value.
func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

// replicaCollector computes the replica series from the Manager at each scrape: per partition for
// user topics, aggregated per topic for internal ones (__consumer_offsets has 50 partitions).
type replicaCollector struct{ m *metrics }

// Describe sends every replica series' descriptor.
func (c replicaCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUnderReplicated, descHW, descLEO, descLSO, descLeader, descISR,
		descReplicas, descLSOLag, descOpenTxnAge, descOpenTxnProducer, descLag, descCaughtUp, descInISR, descInternalReplicas, descInternalLeaders, descInternalLEO,
		descInternalLagMax, descInternalOutOfISR} {
		ch <- d
	}
}

// internalTopic aggregates the replicas of one internal topic.
type internalTopic struct {
	replicas, leaders, outOfISR int
	leoSum, lagMax              int64
}

// Collect sends the current value of every replica series; nothing before the replicas are open.
func (c replicaCollector) Collect(ch chan<- prometheus.Metric) {
	mgr := c.m.replicas.Load()
	if mgr == nil {
		return
	}
	img := c.m.image()
	now := c.m.clock.Now()
	under := 0
	internal := map[string]*internalTopic{}
	for _, s := range mgr.ReplicaStatus() {
		leading := s.Role == partition.RoleLeader
		if leading && len(s.ISR) < len(s.Replicas) {
			under++
		}
		if t, ok := img.Topic(s.Topic); ok && t.Internal {
			agg := internal[s.Topic]
			if agg == nil {
				agg = &internalTopic{}
				internal[s.Topic] = agg
			}
			agg.replicas++
			agg.leoSum += s.LogEndOffset
			if leading {
				agg.leaders++
			}
			for _, f := range s.Followers {
				agg.lagMax = max(agg.lagMax, f.Lag)
				if !f.InISR {
					agg.outOfISR++
				}
			}
			continue
		}
		part := strconv.Itoa(int(s.Partition))
		gauge(ch, descHW, float64(s.HighWatermark), s.Topic, part)
		gauge(ch, descLEO, float64(s.LogEndOffset), s.Topic, part)
		gauge(ch, descLSO, float64(s.LogStartOffset), s.Topic, part)
		gauge(ch, descLeader, boolGauge(leading), s.Topic, part)
		gauge(ch, descISR, float64(len(s.ISR)), s.Topic, part)
		gauge(ch, descReplicas, float64(len(s.Replicas)), s.Topic, part)
		gauge(ch, descLSOLag, float64(s.HighWatermark-s.LastStableOffset), s.Topic, part)
		if t := s.OpenTxn; t != nil {
			gauge(ch, descOpenTxnAge, max(now.Sub(time.UnixMilli(t.StartedMs)).Seconds(), 0), s.Topic, part)
			gauge(ch, descOpenTxnProducer, float64(t.ProducerID), s.Topic, part)
		}
		for _, f := range s.Followers {
			id := strconv.Itoa(int(f.NodeID))
			gauge(ch, descLag, float64(f.Lag), s.Topic, part, id)
			gauge(ch, descCaughtUp, f.SinceCaughtUp.Seconds(), s.Topic, part, id)
			gauge(ch, descInISR, boolGauge(f.InISR), s.Topic, part, id)
		}
	}
	for name, agg := range internal {
		gauge(ch, descInternalReplicas, float64(agg.replicas), name)
		gauge(ch, descInternalLeaders, float64(agg.leaders), name)
		gauge(ch, descInternalLEO, float64(agg.leoSum), name)
		gauge(ch, descInternalLagMax, float64(agg.lagMax), name)
		gauge(ch, descInternalOutOfISR, float64(agg.outOfISR), name)
	}
	gauge(ch, descUnderReplicated, float64(under))
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// image is the node's current metadata image; an empty one before the metadata store is open.
func (m *metrics) image() *controller.Image {
	if store := m.meta.Load(); store != nil {
		return store.Image()
	}
	return &controller.Image{}
}

// The per-topic byte series.
var (
	descBytesIn = prometheus.NewDesc("weir_topic_bytes_in_total",
		"Record batch bytes produced to each topic and appended by this node as leader.", []string{"topic"}, nil)
	descBytesOut = prometheus.NewDesc("weir_topic_bytes_out_total",
		"Record batch bytes of each topic sent in Fetch responses, to consumers and followers.", []string{"topic"}, nil)
)

// topicCollector sends the byte counters of the topics the image has, and forgets the others.
type topicCollector struct{ m *metrics }

// Describe sends the byte series' descriptors.
func (c topicCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descBytesIn
	ch <- descBytesOut
}

// Collect sends each known topic's byte counters.
func (c topicCollector) Collect(ch chan<- prometheus.Metric) {
	img := c.m.image()
	c.m.topics.Range(func(k, v any) bool {
		name := k.(string)
		if _, ok := img.Topic(name); !ok {
			c.m.topics.Delete(name)
			return true
		}
		tb := v.(*topicBytes)
		ch <- prometheus.MustNewConstMetric(descBytesIn, prometheus.CounterValue, float64(tb.in.Load()), name)
		ch <- prometheus.MustNewConstMetric(descBytesOut, prometheus.CounterValue, float64(tb.out.Load()), name)
		return true
	})
}

// The storage series.
var (
	descSyncSeconds = prometheus.NewDesc("weir_storage_sync_round_duration_seconds",
		"Duration of each group-commit round: the fdatasyncs of every log it synced, run in parallel.", nil, nil)
	descSyncLogs = prometheus.NewDesc("weir_storage_sync_round_logs",
		"Logs synced by each group-commit round.", nil, nil)
	descFailedOps = prometheus.NewDesc("weir_storage_failed_operations_total",
		"Failed writes, fsyncs, truncations and directory changes in the data directory, by operation.", []string{"op"}, nil)
	descOfflineLogs = prometheus.NewDesc("weir_storage_offline_logs",
		"Hosted logs offline after a failed write or fsync.", nil, nil)
	descOutOfFiles = prometheus.NewDesc("weir_storage_out_of_files_total",
		"Filesystem operations in the data directory that failed for want of a file descriptor (EMFILE, ENFILE).", nil, nil)
)

// storageCollector sends the data directory's Stats.
type storageCollector struct{ m *metrics }

// Describe sends the storage series' descriptors.
func (c storageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSyncSeconds, descSyncLogs, descFailedOps, descOfflineLogs, descOutOfFiles} {
		ch <- d
	}
}

// Collect sends the storage series; nothing before the replicas are open.
func (c storageCollector) Collect(ch chan<- prometheus.Metric) {
	mgr := c.m.replicas.Load()
	if mgr == nil {
		return
	}
	st := mgr.Stats()
	ch <- histogram(descSyncSeconds, st.Sync.Seconds)
	ch <- histogram(descSyncLogs, st.Sync.Logs)
	for op, n := range st.FailedOps {
		ch <- prometheus.MustNewConstMetric(descFailedOps, prometheus.CounterValue, float64(n), op)
	}
	gauge(ch, descOfflineLogs, float64(st.OfflineLogs))
	if st.FailedOps != nil {
		ch <- prometheus.MustNewConstMetric(descOutOfFiles, prometheus.CounterValue, float64(st.OutOfFiles))
	}
}

// histogram turns a storage distribution into a Prometheus histogram.
func histogram(d *prometheus.Desc, dist storage.Distribution) prometheus.Metric {
	buckets := make(map[float64]uint64, len(dist.Bounds))
	for i, b := range dist.Bounds {
		buckets[b] = dist.Cumulative[i]
	}
	return prometheus.MustNewConstHistogram(d, dist.Count, dist.Sum, buckets)
}

// groupScrapeTimeout bounds how long a scrape waits for the group coordinator.
const groupScrapeTimeout = 2 * time.Second

var descGroupLag = prometheus.NewDesc("weir_group_lag_records",
	"For each group this node coordinates, per topic, the sum over its committed partitions hosted here of the high watermark minus the committed offset.",
	[]string{"group", "topic"}, nil)

// groupCollector computes consumer group lag from the coordinator's committed offsets and the
// hosted replicas' high watermarks.
type groupCollector struct{ m *metrics }

// Describe sends the group series' descriptor.
func (c groupCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descGroupLag }

// Collect sends each coordinated group's lag per topic; a group whose partitions still load, or a
// partition not hosted on this node, is left out.
func (c groupCollector) Collect(ch chan<- prometheus.Metric) {
	coord, mgr := c.m.groups.Load(), c.m.replicas.Load()
	if coord == nil || mgr == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), groupScrapeTimeout)
	defer cancel()
	groups, err := coord.List(ctx)
	if err != nil {
		return
	}
	for _, g := range groups {
		offsets, err := coord.FetchOffsets(ctx, g.Group, nil)
		if err != nil {
			continue
		}
		lag := map[string]int64{}
		for _, o := range offsets {
			if o.Offset < 0 {
				continue
			}
			r, ok := mgr.Replica(o.Topic, o.Partition)
			if !ok {
				continue
			}
			lag[o.Topic] += max(r.HighWatermark()-o.Offset, 0)
		}
		for topic, n := range lag {
			gauge(ch, descGroupLag, float64(n), g.Group, topic)
		}
	}
}
