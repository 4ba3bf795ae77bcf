package test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestHTTPKcat publishes over a `weir serve` process's HTTP API and reads each record with kcat
// (librdkafka) at the partition and offset the answer gave.
func TestHTTPKcat(t *testing.T) {
	requireTool(t, "kcat")
	ctx := testContext(t, 60*time.Second)
	n := startNode(t, nodeOptions{})
	n.createTopic(ctx, t, "web", 3, nil)
	body := `{"records":[{"key":"alice","value":"signed up"},{"key":"bob","value":{"a":1}},{"value":"third","partition":2}]}`
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+n.ports.HTTP+"/v1/topics/web/records", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Records []struct {
			Partition int32 `json:"partition"`
			Offset    int64 `json:"offset"`
		} `json:"records"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || len(out.Records) != 3 {
		t.Fatalf("publish: %d %v %+v", resp.StatusCode, err, out)
	}
	want := []string{"alice=signed up", `bob={"a":1}`, "=third"}
	for i, r := range out.Records {
		got := kcat(ctx, t, n, "", "-C", "-t", "web", "-p", fmt.Sprint(r.Partition), "-o", fmt.Sprint(r.Offset),
			"-c", "1", "-e", "-q", "-f", "%k=%s\n")
		if strings.TrimSuffix(got, "\n") != want[i] {
			t.Errorf("record %d at %d/%d: kcat read %q, want %q", i, r.Partition, r.Offset, got, want[i])
		}
	}
}

// TestHTTPPublishCluster publishes over node 1's HTTP API to a topic whose partitions the three nodes
// of a cluster lead between them: node 1 appends the records of the partitions it leads in process
// and produces the others through its Kafka client (docs/http.md, "Publishes in process"). Node 2 is
// killed with -9 half-way and started again, so leaderships move under the publishes. Every record
// the API answered with an offset is read back with franz-go at that partition and offset, and a
// keyed record is in the partition the Kafka clients' default partitioner gives its key.
func TestHTTPPublishCluster(t *testing.T) {
	ctx := testContext(t, 150*time.Second)
	nodes := startCluster(t, 3, 3)
	const topic, partitions = "spread", 6
	resp, err := nodes[0].admin(t).CreateTopic(ctx, partitions, 3, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic: %v", err)
	}
	waitFor(ctx, t, "every partition led, node 1 leading some but not all", func() bool {
		led := 0
		for _, tp := range metadata(ctx, t, nodes[0]).Topics {
			for _, p := range tp.Partitions {
				if p.Leader < 0 {
					return false
				}
				if p.Leader == 1 {
					led++
				}
			}
		}
		return led > 0 && led < partitions
	})
	byKey := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	type sent struct{ key, value string }
	acked := map[[2]int64]sent{} // partition and offset
	failed := 0
	for round := range 30 {
		switch round {
		case 10:
			nodes[1].kill()
		case 20:
			nodes[1].restart()
		}
		var recs []string
		var want []sent
		for i := range 12 {
			s := sent{value: fmt.Sprintf("v-%d-%d", round, i)}
			switch {
			case i < 8:
				s.key = fmt.Sprintf("k-%d-%d", round, i)
				recs = append(recs, fmt.Sprintf(`{"key":%q,"value":%q}`, s.key, s.value))
			case i < 10:
				recs = append(recs, fmt.Sprintf(`{"value":%q}`, s.value))
			default:
				recs = append(recs, fmt.Sprintf(`{"value":%q,"partition":%d}`, s.value, i%partitions))
			}
			want = append(want, s)
		}
		body := `{"records":[` + strings.Join(recs, ",") + `]}`
		req, err := http.NewRequestWithContext(ctx, "POST", "http://"+nodes[0].ports.HTTP+"/v1/topics/"+topic+"/records", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		hr, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		var out struct {
			Records []struct {
				Partition *int32          `json:"partition"`
				Offset    *int64          `json:"offset"`
				Error     json.RawMessage `json:"error"`
			} `json:"records"`
		}
		err = json.NewDecoder(hr.Body).Decode(&out)
		hr.Body.Close()
		if err != nil || len(out.Records) != len(want) {
			t.Fatalf("round %d: status %d, %v, %d answers", round, hr.StatusCode, err, len(out.Records))
		}
		for i, r := range out.Records {
			if r.Offset == nil || r.Partition == nil {
				failed++
				t.Logf("round %d record %d: %s", round, i, r.Error)
				continue
			}
			if want[i].key != "" {
				if p := int32(byKey.Partition(&kgo.Record{Key: []byte(want[i].key)}, partitions)); p != *r.Partition {
					t.Errorf("key %s answered in partition %d, the default partitioner's is %d", want[i].key, *r.Partition, p)
				}
			}
			if i >= 10 && *r.Partition != int32(i%partitions) {
				t.Errorf("record %d named partition %d, answered in %d", i, i%partitions, *r.Partition)
			}
			at := [2]int64{int64(*r.Partition), *r.Offset}
			if prev, dup := acked[at]; dup {
				t.Fatalf("%s and %s both answered at partition %d offset %d", prev.value, want[i].value, at[0], at[1])
			}
			acked[at] = want[i]
		}
	}
	if failed > len(acked)/4 {
		t.Fatalf("%d records failed, %d acknowledged", failed, len(acked))
	}
	read := nodes[0].readAll(ctx, t, topic)
	found := 0
	for p, recs := range read {
		for _, r := range recs {
			s, ok := acked[[2]int64{int64(p), r.Offset}]
			if !ok {
				continue
			}
			found++
			if string(r.Value) != s.value || string(r.Key) != s.key {
				t.Errorf("partition %d offset %d: read %s=%s, answered for %s=%s", p, r.Offset, r.Key, r.Value, s.key, s.value)
			}
		}
	}
	if found != len(acked) {
		t.Errorf("read back %d of the %d acknowledged records at their offsets", found, len(acked))
	}
}
