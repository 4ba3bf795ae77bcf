package test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
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
