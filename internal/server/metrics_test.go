package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

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
