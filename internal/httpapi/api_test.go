package httpapi_test

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/server"
)

// testTimeout bounds every test's calls; generous, because the machine is shared.
const testTimeout = 60 * time.Second

// nodeConfig is a node in dir on free loopback ports, logging nowhere, with no initial rebalance
// delay and session timeouts down to 500ms so that expiry is quick to test.
func nodeConfig(dir string) server.Config {
	cfg := server.DefaultConfig()
	cfg.DataDir = dir
	cfg.KafkaAddr = "127.0.0.1:0"
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.ControllerAddr = "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Groups = group.CoordinatorConfig{SessionTimeoutMin: 500 * time.Millisecond}
	return cfg
}

// startNode runs a node in dir, closed when the test ends.
func startNode(t testing.TB, dir string) *server.Node {
	t.Helper()
	n, err := server.Start(t.Context(), nodeConfig(dir))
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// client is a franz-go client of n, closed when the test ends.
func client(t testing.TB, n *server.Node, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.KafkaAddr()), kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// do sends an HTTP request to n and decodes a JSON answer into out (when not nil); it returns the
// status and the raw body.
func do(t testing.TB, n *server.Node, method, path, body string, out any) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), method, "http://"+n.HTTPAddr()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
	return resp.StatusCode, string(raw)
}

// mustDo is do that fails the test on a status other than want.
func mustDo(t testing.TB, n *server.Node, want int, method, path, body string, out any) {
	t.Helper()
	if status, raw := do(t, n, method, path, body, out); status != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, raw)
	}
}

// createTopic creates topic over HTTP.
func createTopic(t testing.TB, n *server.Node, topic string, partitions int, configs map[string]string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"name": topic, "partitions": partitions, "configs": configs})
	mustDo(t, n, http.StatusCreated, "POST", "/v1/topics", string(body), nil)
}

type published struct {
	Records []struct {
		Partition int32 `json:"partition"`
		Offset    int64 `json:"offset"`
	} `json:"records"`
}

type polled struct {
	MemberID   string `json:"member_id"`
	Assignment []struct {
		Topic      string  `json:"topic"`
		Partitions []int32 `json:"partitions"`
	} `json:"assignment"`
	Records []struct {
		Partition int32  `json:"partition"`
		Offset    int64  `json:"offset"`
		Key       string `json:"key"`
		Value     string `json:"value"`
	} `json:"records"`
	Commit []map[string]any `json:"commit"`
}

// TestHTTPPublishRead publishes over HTTP and reads each record with franz-go at the partition and
// offset the answer gave: key, value and headers as published in each encoding.
func TestHTTPPublishRead(t *testing.T) {
	n := startNode(t, t.TempDir())
	createTopic(t, n, "orders", 3, nil)
	var out published
	mustDo(t, n, http.StatusOK, "POST", "/v1/topics/orders/records", `{"records":[
		{"key":"alice","value":"signed up","headers":[{"key":"h","value":"v"},{"key":"b","value_b64":"AAE="}]},
		{"key":"bob","value":{"amount": 5}},
		{"key_b64":"AAE=","value_b64":"/w==","partition":2},
		{"key":"tomb"}]}`, &out)
	want := []struct {
		key, value []byte
		headers    []kgo.RecordHeader
	}{
		{[]byte("alice"), []byte("signed up"), []kgo.RecordHeader{{Key: "h", Value: []byte("v")}, {Key: "b", Value: []byte{0, 1}}}},
		{[]byte("bob"), []byte(`{"amount":5}`), nil},
		{[]byte{0, 1}, []byte{0xff}, nil},
		{[]byte("tomb"), nil, nil},
	}
	if len(out.Records) != len(want) {
		t.Fatalf("answered %d records, want %d", len(out.Records), len(want))
	}
	if out.Records[2].Partition != 2 {
		t.Errorf("a record naming partition 2 went to %d", out.Records[2].Partition)
	}
	for i, w := range want {
		at := out.Records[i]
		cl := client(t, n, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
			"orders": {at.Partition: kgo.NewOffset().At(at.Offset)}}))
		ctx := testCtx(t)
		var got *kgo.Record
		for got == nil {
			fs := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("record %d at %d/%d not read: %v", i, at.Partition, at.Offset, err)
			}
			if recs := fs.Records(); len(recs) > 0 {
				got = recs[0]
			}
		}
		if got.Offset != at.Offset || !bytes.Equal(got.Key, w.key) || !bytes.Equal(got.Value, w.value) || (got.Value == nil) != (w.value == nil) {
			t.Errorf("record %d: read offset %d key %q value %q, want offset %d key %q value %q", i, got.Offset, got.Key, got.Value, at.Offset, w.key, w.value)
		}
		if len(got.Headers) != len(w.headers) {
			t.Errorf("record %d: headers %v, want %v", i, got.Headers, w.headers)
		}
		for j := range min(len(got.Headers), len(w.headers)) {
			if got.Headers[j].Key != w.headers[j].Key || !bytes.Equal(got.Headers[j].Value, w.headers[j].Value) {
				t.Errorf("record %d header %d: %v, want %v", i, j, got.Headers[j], w.headers[j])
			}
		}
	}

	// The same records read back over HTTP, in each encoding.
	var read struct {
		Records []map[string]any `json:"records"`
	}
	mustDo(t, n, http.StatusOK, "GET", fmt.Sprintf("/v1/topics/orders/partitions/2/records?offset=%d&encoding=base64", out.Records[2].Offset), "", &read)
	if len(read.Records) == 0 || read.Records[0]["value_b64"] != "/w==" || read.Records[0]["key_b64"] != "AAE=" {
		t.Errorf("base64 read of the binary record: %v", read.Records)
	}
	p := out.Records[1]
	mustDo(t, n, http.StatusOK, "GET", fmt.Sprintf("/v1/topics/orders/partitions/%d/records?offset=%d&max=1&encoding=json", p.Partition, p.Offset), "", &read)
	if len(read.Records) != 1 || fmt.Sprint(read.Records[0]["value"]) != "map[amount:5]" {
		t.Errorf("json read of the JSON record: %v", read.Records)
	}

	// Confluent v3's produce shape, two records in one body.
	var clusters struct {
		Data []struct {
			ClusterID string `json:"cluster_id"`
		} `json:"data"`
	}
	mustDo(t, n, http.StatusOK, "GET", "/v3/clusters", "", &clusters)
	status, raw := do(t, n, "POST", "/v3/clusters/"+clusters.Data[0].ClusterID+"/topics/orders/records",
		`{"key":{"type":"STRING","data":"carol"},"value":{"type":"JSON","data":{"x":1}}}
		 {"partition_id":1,"value":{"type":"BINARY","data":"AAE="},"headers":[{"name":"h","value":"dg=="}]}`, nil)
	if status != http.StatusOK || strings.Count(raw, `"error_code":200`) != 2 || !strings.Contains(raw, `"partition_id":1`) {
		t.Errorf("v3 produce: %d %s", status, raw)
	}
}

// TestHTTPKeysMatchKafka produces the same keys with franz-go's default partitioner and over HTTP:
// every key lands in the same partition both ways.
func TestHTTPKeysMatchKafka(t *testing.T) {
	n := startNode(t, t.TempDir())
	createTopic(t, n, "keys", 7, nil)
	cl := client(t, n)
	var recs []map[string]string
	for i := range 100 {
		key := fmt.Sprintf("user-%d", i)
		r, err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "keys", Key: []byte(key), Value: []byte("kafka")}).First()
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, map[string]string{"key": key, "value": fmt.Sprint(r.Partition)})
	}
	body, _ := json.Marshal(map[string]any{"records": recs})
	var out published
	mustDo(t, n, http.StatusOK, "POST", "/v1/topics/keys/records", string(body), &out)
	used := map[int32]bool{}
	for i, r := range out.Records {
		used[r.Partition] = true
		if fmt.Sprint(r.Partition) != recs[i]["value"] {
			t.Errorf("key %s: HTTP put it in partition %d, franz-go in %s", recs[i]["key"], r.Partition, recs[i]["value"])
		}
	}
	if len(used) < 5 {
		t.Errorf("100 keys used only %d of 7 partitions", len(used))
	}
}

// TestHTTPGroupShared puts an HTTP member and a franz-go member in one group: they split the
// partitions, and every record is delivered once.
func TestHTTPGroupShared(t *testing.T) {
	n := startNode(t, t.TempDir())
	createTopic(t, n, "shared", 4, nil)
	var p polled
	mustDo(t, n, http.StatusOK, "GET", "/v1/groups/g/records?topic=shared&from=earliest&wait=2000&session_timeout_ms=10000", "", &p)
	member := p.MemberID
	kc := client(t, n, kgo.ConsumerGroup("g"), kgo.ConsumeTopics("shared"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(10*time.Second))
	// Both members join before the records exist, so no rebalance moves a partition mid-way: poll
	// both until each holds two partitions.
	ctx := testCtx(t)
	for {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		kc.PollFetches(pctx)
		cancel()
		mustDo(t, n, http.StatusOK, "GET", "/v1/groups/g/records?wait=200&member="+member, "", &p)
		if len(p.Records) > 0 {
			t.Fatalf("records before any was produced: %v", p.Records)
		}
		if len(p.Assignment) == 1 && len(p.Assignment[0].Partitions) == 2 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the group did not split: HTTP member holds %v", p.Assignment)
		}
	}
	httpParts := p.Assignment[0].Partitions
	const total = 400
	pc := client(t, n)
	for i := range total {
		pc.Produce(ctx, &kgo.Record{Topic: "shared", Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}, nil)
	}
	if err := pc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			mu.Lock()
			done := len(seen) >= total
			mu.Unlock()
			if done {
				return
			}
			pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			fs := kc.PollFetches(pctx)
			cancel()
			mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				if slices.Contains(httpParts, r.Partition) {
					t.Errorf("franz-go member got partition %d, assigned to the HTTP member", r.Partition)
				}
				seen[string(r.Value)]++
			})
			mu.Unlock()
		}
	})
	for ctx.Err() == nil {
		mu.Lock()
		done := len(seen) >= total
		mu.Unlock()
		if done {
			break
		}
		var p polled
		mustDo(t, n, http.StatusOK, "GET", "/v1/groups/g/records?wait=200&max=100&member="+member, "", &p)
		mu.Lock()
		for _, r := range p.Records {
			if !slices.Contains(httpParts, r.Partition) {
				t.Errorf("HTTP member got partition %d, not its own %v", r.Partition, httpParts)
			}
			seen[r.Value]++
		}
		mu.Unlock()
	}
	wg.Wait()
	if len(seen) != total {
		t.Fatalf("delivered %d distinct records of %d", len(seen), total)
	}
	for v, c := range seen {
		if c != 1 {
			t.Errorf("record %s delivered %d times", v, c)
		}
	}
}

// TestHTTPPollAfterRebalance has an HTTP member hold fetched records it has not answered yet (it polls
// max=10 of 400) when a franz-go member joins and the group moves two of its partitions away: no
// later answer of the HTTP member carries a record of a partition it no longer holds, and every
// record is delivered, to one member or the other.
func TestHTTPPollAfterRebalance(t *testing.T) {
	n := startNode(t, t.TempDir())
	createTopic(t, n, "moved", 4, nil)
	ctx := testCtx(t)
	const total = 400
	pc := client(t, n)
	for i := range total {
		pc.Produce(ctx, &kgo.Record{Topic: "moved", Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}, nil)
	}
	if err := pc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var p polled
	mustDo(t, n, http.StatusOK, "GET", "/v1/groups/g/records?topic=moved&from=earliest&wait=5000&max=10&session_timeout_ms=10000", "", &p)
	member := p.MemberID
	for p.Records == nil || len(p.Records) == 0 {
		if ctx.Err() != nil {
			t.Fatal("the HTTP member got no records")
		}
		mustDo(t, n, http.StatusOK, "GET", "/v1/groups/g/records?wait=1000&max=10&member="+member, "", &p)
	}
	for _, r := range p.Records {
		seen[r.Value] = true
	}

	var mu sync.Mutex
	var kafkaParts []int32
	kc := client(t, n, kgo.ConsumerGroup("g"), kgo.ConsumeTopics("moved"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(10*time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, add map[string][]int32) {
			mu.Lock()
			kafkaParts = append(kafkaParts, add["moved"]...)
			mu.Unlock()
		}))
	// The franz-go member reads once it holds partitions, which the HTTP member gave up first
	// (cooperative rebalancing revokes before it assigns).
	for {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := kc.PollFetches(pctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
		if fs.NumRecords() > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the franz-go member got no records")
		}
	}
	mu.Lock()
	moved := slices.Clone(kafkaParts)
	mu.Unlock()
	if len(moved) != 2 {
		t.Fatalf("the franz-go member holds partitions %v, want two", moved)
	}
	for {
		mustDo(t, n, http.StatusOK, "GET", "/v1/groups/g/records?wait=500&max=10&member="+member, "", &p)
		if len(p.Records) == 0 {
			break
		}
		for _, r := range p.Records {
			if slices.Contains(moved, r.Partition) {
				t.Fatalf("after the rebalance the HTTP member answered a record of partition %d, now the franz-go member's", r.Partition)
			}
			seen[r.Value] = true
		}
	}
	for len(seen) < total && ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		kc.PollFetches(pctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
		cancel()
	}
	if len(seen) != total {
		t.Fatalf("delivered %d distinct records of %d", len(seen), total)
	}
}

// TestHTTPCommitRestart commits over HTTP, restarts the node on the same data directory, and a new
// HTTP member resumes from the committed offset.
func TestHTTPCommitRestart(t *testing.T) {
	dir := t.TempDir()
	n, err := server.Start(t.Context(), nodeConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	createTopic(t, n, "jobs", 1, nil)
	var recs []map[string]string
	for i := range 10 {
		recs = append(recs, map[string]string{"value": fmt.Sprint(i)})
	}
	body, _ := json.Marshal(map[string]any{"records": recs})
	mustDo(t, n, http.StatusOK, "POST", "/v1/topics/jobs/records", string(body), nil)
	var p polled
	ctx := testCtx(t)
	mustDo(t, n, http.StatusOK, "GET", "/v1/groups/workers/records?topic=jobs&from=earliest&max=4&wait=5000", "", &p)
	for len(p.Records) == 0 && ctx.Err() == nil {
		mustDo(t, n, http.StatusOK, "GET", "/v1/groups/workers/records?max=4&wait=1000&member="+p.MemberID, "", &p)
	}
	if len(p.Records) != 4 || p.Records[3].Value != "3" {
		t.Fatalf("first poll: %+v", p.Records)
	}
	commit, _ := json.Marshal(map[string]any{"member_id": p.MemberID, "offsets": p.Commit})
	mustDo(t, n, http.StatusOK, "POST", "/v1/groups/workers/offsets", string(commit), nil)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n = startNode(t, dir)
	var q polled
	mustDo(t, n, http.StatusOK, "GET", "/v1/groups/workers/records?topic=jobs&from=earliest&wait=5000", "", &q)
	for len(q.Records) == 0 && ctx.Err() == nil {
		mustDo(t, n, http.StatusOK, "GET", "/v1/groups/workers/records?wait=1000&member="+q.MemberID, "", &q)
	}
	if len(q.Records) == 0 || q.Records[0].Offset != 4 || q.Records[0].Value != "4" {
		t.Fatalf("after the restart the group resumed at %+v, want offset 4", q.Records)
	}
	var d struct {
		Offsets []struct {
			Committed *int64 `json:"committed"`
		} `json:"offsets"`
	}
	mustDo(t, n, http.StatusOK, "GET", "/v1/groups/workers", "", &d)
	if len(d.Offsets) != 1 || d.Offsets[0].Committed == nil || *d.Offsets[0].Committed != 4 {
		t.Errorf("described committed offsets %+v, want 4", d.Offsets)
	}
}

// TestHTTPBadInput sends each kind of bad input: each answers its JSON error, and nothing is written.
func TestHTTPBadInput(t *testing.T) {
	n := startNode(t, t.TempDir())
	createTopic(t, n, "small", 1, map[string]string{"max.message.bytes": "2000"})
	adm := kadm.NewClient(client(t, n))
	autoCreateOff := "false"
	if _, err := adm.AlterBrokerConfigs(testCtx(t), []kadm.AlterConfig{{Name: "auto.create.topics.enable", Value: &autoCreateOff}}); err != nil {
		t.Fatal(err)
	}
	var p polled
	mustDo(t, n, http.StatusOK, "GET", "/v1/groups/gone/records?topic=small&session_timeout_ms=1000", "", &p)
	big := strings.Repeat("x", 3000)
	cases := []struct {
		name, method, path, body string
		status                   int
		code, kafka              string
	}{
		{"invalid JSON", "POST", "/v1/topics/small/records", `{"records":[{"value":}]}`, 400, "invalid_json", ""},
		{"unknown field", "POST", "/v1/topics/small/records", `{"records":[{"valu":"x"}]}`, 400, "invalid_json", ""},
		{"a record of a bad and a good", "POST", "/v1/topics/small/records", `{"records":[{"value":"ok"},{"value_b64":"@@"}]}`, 400, "invalid_base64", ""},
		{"value and value_b64", "POST", "/v1/topics/small/records", `{"records":[{"value":"a","value_b64":"YQ=="}]}`, 400, "invalid_record", ""},
		{"no records", "POST", "/v1/topics/small/records", `{"records":[]}`, 400, "invalid_record", ""},
		{"oversized body", "POST", "/v1/topics/small/records", `{"records":[{"value":"` + big + `"}]}`, 413, "body_too_large", ""},
		{"unknown topic", "POST", "/v1/topics/nope/records", `{"records":[{"value":"x"}]}`, 404, "topic_not_found", "UNKNOWN_TOPIC_OR_PARTITION"},
		{"unknown partition", "POST", "/v1/topics/small/records", `{"records":[{"value":"x","partition":3}]}`, 404, "partition_not_found", "UNKNOWN_TOPIC_OR_PARTITION"},
		{"v3 bad type", "POST", "/v3/clusters/x/topics/small/records", `{"value":{"type":"AVRO","data":1}}`, 404, "cluster_not_found", ""},
		{"read past the end", "GET", "/v1/topics/small/partitions/0/records?offset=99", "", 416, "offset_out_of_range", "OFFSET_OUT_OF_RANGE"},
		{"read of an unknown topic", "GET", "/v1/topics/nope/partitions/0/records?offset=0", "", 404, "topic_not_found", "UNKNOWN_TOPIC_OR_PARTITION"},
		{"bad max", "GET", "/v1/topics/small/partitions/0/records?max=0", "", 400, "invalid_parameter", ""},
		{"poll of an unknown member", "GET", "/v1/groups/g/records?member=m-nobody", "", 404, "member_not_found", "UNKNOWN_MEMBER_ID"},
		{"commit of an unknown member", "POST", "/v1/groups/g/offsets", `{"member_id":"m-nobody","offsets":[{"topic":"small","partition":0,"offset":1}]}`, 404, "member_not_found", "UNKNOWN_MEMBER_ID"},
		{"no such endpoint", "GET", "/v1/nothing", "", 404, "not_found", ""},
		{"a wrong method on an endpoint", "PUT", "/v1/topics/small", "", 405, "method_not_allowed", ""},
		{"create an existing topic", "POST", "/v1/topics", `{"name":"small"}`, 409, "topic_exists", "TOPIC_ALREADY_EXISTS"},
		{"bad config", "PATCH", "/v1/topics/small/configs", `{"set":{"retention.ms":"soon"}}`, 400, "invalid_config", "INVALID_CONFIG"},
	}
	for _, c := range cases {
		status, raw := do(t, n, c.method, c.path, c.body, nil)
		var e struct {
			Error struct {
				Code       string `json:"code"`
				KafkaError string `json:"kafka_error"`
				Message    string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(raw), &e); err != nil || status != c.status || e.Error.Code != c.code ||
			e.Error.KafkaError != c.kafka || e.Error.Message == "" {
			t.Errorf("%s: %d %s, want %d code %s kafka_error %q", c.name, status, raw, c.status, c.code, c.kafka)
		}
	}

	// The member of the first poll expires after its one-second session timeout (looked for every
	// second); a poll in between would renew it.
	time.Sleep(3 * time.Second)
	if status, raw := do(t, n, "GET", "/v1/groups/gone/records?member="+p.MemberID, "", nil); status != http.StatusNotFound ||
		!strings.Contains(raw, `"member_not_found"`) {
		t.Errorf("the idle member did not expire: %d %s", status, raw)
	}

	ends, err := adm.ListEndOffsets(testCtx(t), "small")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("small", 0); o.Offset != 0 {
		t.Errorf("bad input wrote: the end offset is %d", o.Offset)
	}
	topics, err := adm.ListTopics(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has("nope") {
		t.Error("a publish to an unknown topic created it with auto-create off")
	}
}

// TestHTTPStream tails a partition over SSE: records published after the stream opened arrive as
// events with their offsets as ids.
func TestHTTPStream(t *testing.T) {
	n := startNode(t, t.TempDir())
	createTopic(t, n, "tail", 1, nil)
	req, _ := http.NewRequestWithContext(testCtx(t), "GET", "http://"+n.HTTPAddr()+"/v1/topics/tail/partitions/0/stream?offset=0", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	mustDo(t, n, http.StatusOK, "POST", "/v1/topics/tail/records", `{"records":[{"value":"a"},{"value":"b"}]}`, nil)
	var got bytes.Buffer
	buf := make([]byte, 4096)
	for strings.Count(got.String(), "event: record") < 2 {
		k, err := resp.Body.Read(buf)
		got.Write(buf[:k])
		if err != nil {
			t.Fatalf("stream ended: %v after %q", err, got.String())
		}
	}
	if !strings.Contains(got.String(), "id: 1\ndata: {") || !strings.Contains(got.String(), `"value":"b"`) {
		t.Errorf("stream: %q", got.String())
	}
}

// commitOneRecord creates topic with one partition and commits a transaction of one record to it: the
// record at offset 0, the commit marker at offset 1.
func commitOneRecord(ctx context.Context, t *testing.T, n *server.Node, topic string) {
	t.Helper()
	createTopic(t, n, topic, 1, nil)
	tx := client(t, n, kgo.TransactionalID(topic+"-committer"), kgo.DefaultProduceTopic(topic))
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, kgo.StringRecord("in the transaction")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
}

// TestHTTPStreamPastMarker tails a partition whose last batch is a transaction's commit marker: the
// stream sends the transaction's record, then waits quietly past the marker (not fetching it again
// and again, which sent a keep-alive per fetch) until the next record arrives.
func TestHTTPStreamPastMarker(t *testing.T) {
	n := startNode(t, t.TempDir())
	ctx := testCtx(t)
	commitOneRecord(ctx, t, n, "txn")
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+n.HTTPAddr()+"/v1/topics/txn/partitions/0/stream?offset=0", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	chunks := make(chan string, 1024)
	go func() {
		defer close(chunks)
		buf := make([]byte, 4096)
		for {
			k, err := resp.Body.Read(buf)
			if k > 0 {
				chunks <- string(buf[:k])
			}
			if err != nil {
				return
			}
		}
	}()
	var got strings.Builder
	readUntil := func(want string, within time.Duration) {
		t.Helper()
		timeout := time.After(within)
		for !strings.Contains(got.String(), want) {
			select {
			case c, ok := <-chunks:
				if !ok {
					t.Fatalf("stream ended after %q", got.String())
				}
				got.WriteString(c)
			case <-timeout:
				t.Fatalf("no %q within %v in %.300q", want, within, got.String())
			}
		}
	}
	readUntil("id: 0\n", 10*time.Second)
	quiet := time.After(time.Second)
	for waiting := true; waiting; {
		select {
		case c := <-chunks:
			got.WriteString(c)
		case <-quiet:
			waiting = false
		}
	}
	if k := strings.Count(got.String(), ": keep-alive"); k > 1 {
		t.Errorf("%d keep-alives in the second after the transaction's record: the stream fetches the marker again and again", k)
	}
	mustDo(t, n, http.StatusOK, "POST", "/v1/topics/txn/records", `{"records":[{"value":"after it"}]}`, nil)
	readUntil("id: 2\n", 10*time.Second)
}

// TestHTTPOpenAPI checks that /v1/openapi.json names every route of the API and nothing else.
func TestHTTPOpenAPI(t *testing.T) {
	n := startNode(t, t.TempDir())
	var doc struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	mustDo(t, n, http.StatusOK, "GET", "/v1/openapi.json", "", &doc)
	src, err := os.ReadFile("api.go")
	if err != nil {
		t.Fatal(err)
	}
	routes := regexp.MustCompile(`route\("([A-Z]+) (/[^"]+)"`).FindAllStringSubmatch(string(src), -1)
	if len(routes) < 15 {
		t.Fatalf("found %d routes in api.go", len(routes))
	}
	for _, r := range routes {
		if _, ok := doc.Paths[r[2]][strings.ToLower(r[1])]; !ok {
			t.Errorf("openapi.json lacks %s %s", r[1], r[2])
		}
	}
	var n2 int
	for _, ops := range doc.Paths {
		n2 += len(ops)
	}
	if n2 != len(routes) {
		t.Errorf("openapi.json has %d operations, api.go %d routes", n2, len(routes))
	}
}

// TestHTTPPublishSmallMaxMessageBytes: concurrent publishes of records that each fit a topic's small
// max.message.bytes all succeed, although together they would not fit one batch.
func TestHTTPPublishSmallMaxMessageBytes(t *testing.T) {
	n := startNode(t, t.TempDir())
	createTopic(t, n, "small", 1, map[string]string{"max.message.bytes": "2000"})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				// Random bytes, so that compression does not make two records fit one batch.
				value := make([]byte, 1200)
				_, _ = crand.Read(value)
				body := `{"records":[{"value_b64":"` + base64.StdEncoding.EncodeToString(value) + `"}]}`
				if status, raw := do(t, n, "POST", "/v1/topics/small/records", body, nil); status != http.StatusOK {
					t.Errorf("publish: %d %s", status, raw)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestHTTPBrokerMaxMessageBytes: the HTTP API's size limit follows this broker's own
// message.max.bytes (set on broker resource "1"), as its Kafka produce path does, and the default
// again once that value is deleted.
func TestHTTPBrokerMaxMessageBytes(t *testing.T) {
	n := startNode(t, t.TempDir())
	createTopic(t, n, "t", 1, nil)
	adm := kadm.NewClient(client(t, n))
	alter := func(ac kadm.AlterConfig) {
		t.Helper()
		resp, err := adm.AlterBrokerConfigs(testCtx(t), []kadm.AlterConfig{ac}, 1)
		if err != nil || resp[0].Err != nil {
			t.Fatalf("%v message.max.bytes on broker 1: %v %+v", ac.Op, err, resp)
		}
	}
	body := `{"records":[{"value":"` + strings.Repeat("x", 3000) + `"}]}`
	alter(kadm.AlterConfig{Op: kadm.SetConfig, Name: "message.max.bytes", Value: kadm.StringPtr("2000")})
	mustDo(t, n, http.StatusRequestEntityTooLarge, "POST", "/v1/topics/t/records", body, nil)
	alter(kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "message.max.bytes"})
	mustDo(t, n, http.StatusOK, "POST", "/v1/topics/t/records", body, nil)
}

// TestHTTPReadPastMarker reads from the offset of a transaction's commit marker: while the marker is
// the partition's last batch, the answer has no records and a next_offset past the marker (not the
// offset read, which a client reading on would ask for again forever); once a record follows, a read
// of max=1 answers with that record.
func TestHTTPReadPastMarker(t *testing.T) {
	n := startNode(t, t.TempDir())
	ctx := testCtx(t)
	commitOneRecord(ctx, t, n, "txn")
	type answer struct {
		Records []struct {
			Offset int64  `json:"offset"`
			Value  string `json:"value"`
		} `json:"records"`
		NextOffset    int64 `json:"next_offset"`
		HighWatermark int64 `json:"high_watermark"`
	}
	var marker answer
	for marker.HighWatermark < 2 && ctx.Err() == nil {
		// The marker is written after EndTransaction returns, as Kafka writes it.
		marker = answer{}
		mustDo(t, n, http.StatusOK, "GET", "/v1/topics/txn/partitions/0/records?offset=1&wait=100", "", &marker)
	}
	if len(marker.Records) != 0 || marker.NextOffset != 2 {
		t.Errorf("read of the marker alone: %+v, want no records and next_offset 2", marker)
	}
	if err := client(t, n, kgo.DefaultProduceTopic("txn")).ProduceSync(ctx, kgo.StringRecord("after it")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var read answer
	mustDo(t, n, http.StatusOK, "GET", "/v1/topics/txn/partitions/0/records?offset=1&max=1", "", &read)
	if len(read.Records) != 1 || read.Records[0].Offset != 2 || read.Records[0].Value != "after it" || read.NextOffset != 3 {
		t.Errorf("read at the marker's offset: %+v, want the record at 2 and next_offset 3", read)
	}
}

// TestHTTPPollGroupError: a group error that reaches an HTTP member's poll is answered as its JSON
// error, not as an empty poll, and a member whose first poll failed (whose id the client never
// learns) leaves at once: on a node that serves one HTTP member, the next member can join.
func TestHTTPPollGroupError(t *testing.T) {
	cfg := nodeConfig(t.TempDir())
	cfg.HTTPMembersMax = 1
	n, err := server.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	createTopic(t, n, "rr", 1, nil)
	ctx := testCtx(t)
	pc := client(t, n)
	for i := range 10 {
		pc.Produce(ctx, &kgo.Record{Topic: "rr", Value: fmt.Appendf(nil, "v%d", i)}, nil)
	}
	if err := pc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// A franz-go member offering only round-robin holds the group: the HTTP member offers only
	// cooperative-sticky, which the coordinator refuses (INCONSISTENT_GROUP_PROTOCOL).
	kc := client(t, n, kgo.ConsumerGroup("g"), kgo.ConsumeTopics("rr"), kgo.Balancers(kgo.RoundRobinBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for got := 0; got < 10; {
		fs := kc.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	st, body := do(t, n, "GET", "/v1/groups/g/records?topic=rr&from=earliest&wait=5000", "", nil)
	if st != http.StatusConflict || !strings.Contains(body, `"inconsistent_group_protocol"`) || !strings.Contains(body, "INCONSISTENT_GROUP_PROTOCOL") {
		t.Fatalf("poll into a group of another protocol: %d %s, want 409 inconsistent_group_protocol", st, body)
	}
	kc.Close()

	// The refused member took no place: a new HTTP member joins and reads every record.
	var p polled
	mustDo(t, n, http.StatusOK, "GET", "/v1/groups/g/records?topic=rr&from=earliest&wait=5000", "", &p)
	for len(p.Records) < 10 {
		if ctx.Err() != nil {
			t.Fatalf("the new HTTP member read %d records of 10", len(p.Records))
		}
		var more polled
		mustDo(t, n, http.StatusOK, "GET", "/v1/groups/g/records?wait=1000&member="+p.MemberID, "", &more)
		p.Records = append(p.Records, more.Records...)
	}
	st, body = do(t, n, "GET", "/v1/groups/other/records?topic=rr&wait=100", "", nil)
	if st != http.StatusTooManyRequests || !strings.Contains(body, `"too_many_members"`) {
		t.Fatalf("a second member on a node of --http-members-max 1: %d %s, want 429 too_many_members", st, body)
	}
}

// TestHTTPPublishTimestamps publishes over HTTP to a CreateTime topic and to a LogAppendTime topic
// whose compression.type is zstd, each record read back with franz-go at the answered partition and
// offset: a record's given timestamp is kept, one without a timestamp gets the publish's time, and on
// the LogAppendTime topic the answer's timestamp is the one the log stamped, stored in a batch the
// node compressed.
func TestHTTPPublishTimestamps(t *testing.T) {
	ctx := testCtx(t)
	n := startNode(t, t.TempDir())
	createTopic(t, n, "created", 2, nil)
	createTopic(t, n, "appended", 2, map[string]string{"message.timestamp.type": "LogAppendTime", "compression.type": "zstd"})
	cl := client(t, n)
	given := time.Now().Add(-time.Hour).UnixMilli()
	for _, topic := range []string{"created", "appended"} {
		before := time.Now().UnixMilli()
		var out struct {
			Records []struct {
				Partition int32 `json:"partition"`
				Offset    int64 `json:"offset"`
				Timestamp int64 `json:"timestamp"`
			} `json:"records"`
		}
		mustDo(t, n, http.StatusOK, "POST", "/v1/topics/"+topic+"/records",
			fmt.Sprintf(`{"records":[{"key":"a","value":"given","timestamp":%d},{"key":"b","value":"now"},{"value":"keyless"}]}`, given), &out)
		after := time.Now().UnixMilli()
		if len(out.Records) != 3 {
			t.Fatalf("%s: %d answers", topic, len(out.Records))
		}
		for i, r := range out.Records {
			cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: {r.Partition: kgo.NewOffset().At(r.Offset)}})
			fs := cl.PollRecords(ctx, 1)
			cl.RemoveConsumePartitions(map[string][]int32{topic: {r.Partition}})
			recs := fs.Records()
			if len(recs) == 0 || recs[0].Offset != r.Offset {
				t.Fatalf("%s record %d at %d/%d: read %v (%v)", topic, i, r.Partition, r.Offset, recs, fs.Errors())
			}
			got := recs[0]
			if got.Timestamp.UnixMilli() != r.Timestamp {
				t.Errorf("%s record %d: stored timestamp %d, answered %d", topic, i, got.Timestamp.UnixMilli(), r.Timestamp)
			}
			switch {
			case topic == "created" && i == 0:
				if r.Timestamp != given {
					t.Errorf("created record 0: timestamp %d, given %d", r.Timestamp, given)
				}
			case r.Timestamp < before || r.Timestamp > after:
				t.Errorf("%s record %d: timestamp %d outside the publish, %d to %d", topic, i, r.Timestamp, before, after)
			}
			if topic == "appended" && got.Attrs.TimestampType() != 1 {
				t.Errorf("appended record %d: timestamp type %d, want log append time", i, got.Attrs.TimestampType())
			}
			if topic == "appended" && got.Attrs.CompressionType() != 4 {
				t.Errorf("appended record %d: stored with codec %d, want zstd", i, got.Attrs.CompressionType())
			}
		}
	}
}
