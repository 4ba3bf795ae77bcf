package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/server"
)

// httpGet returns the body of GET path on the node's HTTP address.
func httpGet(t *testing.T, n *server.Node, path string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodGet, "http://"+n.HTTPAddr()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", path, resp.Status, err)
	}
	return string(body)
}

// TestServerMetrics: /metrics counts produce requests and their partition errors by API key, and
// shows each replica's HW and LEO and the under-replicated count; /debug/pprof/ serves profiles;
// /v1/cluster/status lists the node's replicas.
func TestServerMetrics(t *testing.T) {
	n := start(t, testConfig(t.TempDir()))
	ctx := testCtx(t)
	cl := client(t, n)
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "m")
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	for _, v := range []string{"a", "b", "c"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "m", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	// A produce to a partition the topic does not have is answered UNKNOWN_TOPIC_OR_PARTITION.
	req := kmsg.NewPtrProduceRequest()
	req.Acks = 1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "m"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = 7
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if _, err := req.RequestWith(ctx, cl); err != nil {
		t.Fatalf("produce to partition 7: %v", err)
	}

	body := httpGet(t, n, "/metrics")
	for _, want := range []string{
		`weir_kafka_requests_total{api="Produce",api_key="0"} 4`,
		`weir_kafka_request_errors_total{api="Produce",api_key="0",error="UNKNOWN_TOPIC_OR_PARTITION"} 1`,
		`weir_partition_high_watermark{partition="0",topic="m"} 3`,
		`weir_partition_log_end_offset{partition="0",topic="m"} 3`,
		`weir_partition_leader{partition="0",topic="m"} 1`,
		`weir_partition_isr_size{partition="0",topic="m"} 1`,
		"weir_under_replicated_partitions 0",
		"go_goroutines ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}

	// Go's profiles are served too: the goroutine dump shows the Kafka listener.
	if dump := httpGet(t, n, "/debug/pprof/goroutine?debug=1"); !strings.Contains(dump, "wire.(*Server).acceptLoop") {
		t.Errorf("/debug/pprof/goroutine lacks the Kafka accept loop:\n%s", dump)
	}

	var st server.ClusterStatus
	if err := json.Unmarshal([]byte(httpGet(t, n, "/v1/cluster/status")), &st); err != nil {
		t.Fatalf("cluster status: %v", err)
	}
	var found bool
	for _, r := range st.Replicas {
		if r.Topic == "m" && r.Partition == 0 {
			found = r.Role == partition.RoleLeader && r.HighWatermark == 3
		}
	}
	if !found || st.LocalUnderReplicated != 0 {
		t.Errorf("cluster status replicas %+v, under-replicated %d", st.Replicas, st.LocalUnderReplicated)
	}
}

// scrape parses GET /metrics with Prometheus' own text parser, failing on what it rejects and on a
// series sent twice.
func scrape(t *testing.T, n *server.Node) map[string]*dto.MetricFamily {
	t.Helper()
	body := httpGet(t, n, "/metrics")
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse as the Prometheus text format: %v\n%s", err, body)
	}
	for name, f := range fams {
		seen := map[string]bool{}
		for _, m := range f.GetMetric() {
			key := fmt.Sprint(labels(m))
			if seen[key] {
				t.Errorf("%s%s sent twice", name, key)
			}
			seen[key] = true
		}
	}
	return fams
}

// labels returns a series' labels by name.
func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// series returns the series of family name whose labels include want.
func series(fams map[string]*dto.MetricFamily, name string, want map[string]string) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range fams[name].GetMetric() {
		ls := labels(m)
		match := true
		for k, v := range want {
			match = match && ls[k] == v
		}
		if match {
			out = append(out, m)
		}
	}
	return out
}

// value is a counter's, a gauge's or a histogram's count.
func value(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetHistogram() != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return 0
}

// TestServerMetricsFamilies: after real produces, fetches and group commits through franz-go,
// /metrics parses as the Prometheus text format and has every family of docs/metrics.md with its
// labels: request latency, bytes in and out per topic, the group-commit rounds, errors by code,
// group lag, connections and storage failures. The families are per topic: a topic of 64
// partitions has as many series as a topic of one, except for the replica series of user topics,
// and __consumer_offsets is aggregated.
func TestServerMetricsFamilies(t *testing.T) {
	const nBig = 64
	n := start(t, testConfig(t.TempDir()))
	ctx := testCtx(t)
	adm := kadm.NewClient(client(t, n))
	for topic, parts := range map[string]int32{"big": nBig, "small": 1} {
		resp, err := adm.CreateTopic(ctx, parts, 1, nil, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
	}
	produce := func(round int) {
		t.Helper()
		cl := client(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		var recs []*kgo.Record
		for p := range int32(nBig) {
			recs = append(recs, &kgo.Record{Topic: "big", Partition: p, Value: []byte(fmt.Sprint("big ", round, p))})
		}
		recs = append(recs, &kgo.Record{Topic: "small", Value: []byte(fmt.Sprint("small ", round))})
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	produce(0)

	// A group consumer reads everything and commits it.
	cons := client(t, n, kgo.ConsumerGroup("g"), kgo.ConsumeTopics("big", "small"), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	for read := 0; read < nBig+1; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("poll: %v", err)
		}
		read += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	cons.Close()
	// Two records per partition more, read by nobody: the group lags by them.
	produce(1)
	produce(2)
	// A heartbeat of a member the group does not have is answered with an error code.
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "g", "nobody", 1
	hbResp, err := hb.RequestWith(ctx, client(t, n))
	if err != nil {
		t.Fatalf("heartbeat of an unknown member: %v", err)
	}
	if hbResp.ErrorCode == 0 {
		t.Fatal("heartbeat of an unknown member succeeded")
	}

	fams := scrape(t, n)
	for _, c := range []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"weir_kafka_request_duration_seconds", map[string]string{"api": "Produce"}, 3},
		{"weir_kafka_request_duration_seconds", map[string]string{"api": "Fetch"}, 1},
		{"weir_topic_bytes_in_total", map[string]string{"topic": "big"}, 1},
		{"weir_topic_bytes_in_total", map[string]string{"topic": "small"}, 1},
		{"weir_topic_bytes_out_total", map[string]string{"topic": "big"}, 1},
		{"weir_topic_bytes_out_total", map[string]string{"topic": "small"}, 1},
		{"weir_storage_sync_round_duration_seconds", nil, 1},
		{"weir_storage_sync_round_logs", nil, 1},
		{"weir_storage_failed_operations_total", map[string]string{"op": "sync"}, 0},
		{"weir_storage_offline_logs", nil, 0},
		{"weir_storage_out_of_files_total", nil, 0},
		{"weir_kafka_request_errors_total", map[string]string{"api": "Heartbeat", "api_key": "12"}, 1},
		{"weir_kafka_connections", nil, 1},
		{"weir_kafka_connections_accepted_total", nil, 3},
		{"weir_group_lag_records", map[string]string{"group": "g", "topic": "big"}, 0},
		{"weir_internal_topic_replicas", map[string]string{"topic": "__consumer_offsets"}, 1},
		{"weir_internal_topic_leaders", map[string]string{"topic": "__consumer_offsets"}, 1},
		{"weir_internal_topic_log_end_offset_sum", map[string]string{"topic": "__consumer_offsets"}, 1},
		{"weir_internal_topic_replica_lag_records_max", map[string]string{"topic": "__consumer_offsets"}, 0},
		{"weir_internal_topic_followers_out_of_isr", map[string]string{"topic": "__consumer_offsets"}, 0},
	} {
		got := series(fams, c.name, c.labels)
		if len(got) != 1 {
			t.Errorf("%s%v: %d series, want 1", c.name, c.labels, len(got))
			continue
		}
		if v := value(got[0]); v < c.min {
			t.Errorf("%s%v = %v, want at least %v", c.name, c.labels, v, c.min)
		}
	}
	for name, want := range map[string]string{
		"weir_kafka_request_duration_seconds":      "HISTOGRAM",
		"weir_storage_sync_round_duration_seconds": "HISTOGRAM",
		"weir_storage_sync_round_logs":             "HISTOGRAM",
		"weir_topic_bytes_in_total":                "COUNTER",
		"weir_kafka_connections":                   "GAUGE",
		"weir_group_lag_records":                   "GAUGE",
	} {
		if got := fams[name].GetType().String(); got != want {
			t.Errorf("%s is a %s, want a %s", name, got, want)
		}
	}
	if got := series(fams, "weir_storage_failed_operations_total", nil); len(got) != 9 {
		t.Errorf("weir_storage_failed_operations_total has %d series, want one per operation (9)", len(got))
	}
	for topic, want := range map[string]float64{"big": 2 * nBig, "small": 2} {
		if got := series(fams, "weir_group_lag_records", map[string]string{"group": "g", "topic": topic}); len(got) != 1 || value(got[0]) != want {
			t.Errorf("group lag on %s: %v, want %v", topic, got, want)
		}
	}
	if got := series(fams, "weir_internal_topic_replicas", nil); len(got) != 1 || value(got[0]) != 50 {
		t.Errorf("weir_internal_topic_replicas %v, want 50 replicas of __consumer_offsets in one series", got)
	}

	// Cardinality: only the per-partition replica families grow with partitions, and not for the
	// internal topic.
	perPartition := 0
	for name, f := range fams {
		var big, small, internal int
		for _, m := range f.GetMetric() {
			switch labels(m)["topic"] {
			case "big":
				big++
			case "small":
				small++
			case "__consumer_offsets":
				internal++
				if _, ok := labels(m)["partition"]; ok {
					t.Errorf("%s has a series per partition of __consumer_offsets", name)
				}
			}
		}
		switch {
		case strings.HasPrefix(name, "weir_partition_"):
			perPartition++
			if big != nBig || small != 1 {
				t.Errorf("%s: %d series for big, %d for small; want one per partition", name, big, small)
			}
		case big != small:
			t.Errorf("%s: %d series for big, %d for small; want as many per topic", name, big, small)
		}
		if internal > 1 {
			t.Errorf("%s: %d series for __consumer_offsets, want it aggregated", name, internal)
		}
	}
	if perPartition != 7 {
		t.Errorf("%d weir_partition_ families, want 7", perPartition)
	}
	total := 0
	for _, f := range fams {
		total += len(f.GetMetric())
	}
	t.Logf("%d families, %d series", len(fams), total)
}

// TestServerMetricsOpenTransaction: while a transaction is open on a partition, /metrics shows the
// records read_committed consumers cannot read yet, the open transaction's age and its producer id;
// once it commits, the lag is 0 and the two series are gone.
func TestServerMetricsOpenTransaction(t *testing.T) {
	n := start(t, testConfig(t.TempDir()))
	ctx := testCtx(t)
	resp, err := kadm.NewClient(client(t, n)).CreateTopic(ctx, 1, 1, nil, "tx")
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	plain := client(t, n)
	if err := plain.ProduceSync(ctx, &kgo.Record{Topic: "tx", Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	tx := client(t, n, kgo.TransactionalID("metrics-txn"))
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a", "b", "c"} {
		if err := tx.ProduceSync(ctx, &kgo.Record{Topic: "tx", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("transactional produce: %v", err)
		}
	}
	tp := map[string]string{"topic": "tx", "partition": "0"}
	fams := scrape(t, n)
	if got := series(fams, "weir_partition_lso_lag_records", tp); len(got) != 1 || value(got[0]) != 3 {
		t.Fatalf("LSO lag with three records of an open transaction: %v, want 3", got)
	}
	if got := series(fams, "weir_partition_open_transaction_age_seconds", tp); len(got) != 1 || value(got[0]) < 0 {
		t.Fatalf("open transaction age: %v", got)
	}
	if got := series(fams, "weir_partition_open_transaction_producer_id", tp); len(got) != 1 || value(got[0]) < 0 {
		t.Fatalf("open transaction producer id: %v", got)
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	deadline := time.Now().Add(testTimeout)
	for {
		fams = scrape(t, n)
		lag := series(fams, "weir_partition_lso_lag_records", tp)
		if len(lag) == 1 && value(lag[0]) == 0 && len(series(fams, "weir_partition_open_transaction_age_seconds", tp)) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the commit: LSO lag %v, open transaction %v", lag, series(fams, "weir_partition_open_transaction_age_seconds", tp))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
