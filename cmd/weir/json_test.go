package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// decodeJSON parses out, which must be exactly one JSON value, into v.
func decodeJSON(t *testing.T, out string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("output %q is not the JSON expected: %v", out, err)
	}
	if dec.More() {
		t.Fatalf("output %q holds more than one JSON value", out)
	}
}

func TestCLIJSONTopics(t *testing.T) {
	b := "--brokers=" + newFakeCluster(t)
	if out := mustRun(t, "", "topic", "list", "--json", b); out != "[]\n" {
		t.Fatalf("topic list --json of no topics = %q, want []", out)
	}
	mustRun(t, "", "topic", "create", "orders", "--partitions", "2", b)
	mustRun(t, "a\nb\nc\n", "produce", "orders", "--partition", "1", b)

	var list []topicListEntry
	decodeJSON(t, mustRun(t, "", "topic", "list", "--json", b), &list)
	if len(list) != 1 || list[0] != (topicListEntry{Topic: "orders", Partitions: 2, ReplicationFactor: 1}) {
		t.Fatalf("topic list --json = %+v", list)
	}

	out := mustRun(t, "", "topic", "describe", "orders", "--json", b)
	if !strings.Contains(out, `"configs":[]`) {
		t.Errorf("topic describe --json without configs set: %q, want \"configs\":[]", out)
	}
	var d topicDescription
	decodeJSON(t, out, &d)
	if d.Topic != "orders" || d.ID == "" || d.ReplicationFactor != 1 || len(d.Partitions) != 2 {
		t.Fatalf("topic describe --json = %+v", d)
	}
	p := d.Partitions[1]
	if p.Partition != 1 || len(p.Replicas) != 1 || len(p.ISR) != 1 || p.LogStartOffset == nil || *p.LogStartOffset != 0 ||
		p.LogEndOffset == nil || *p.LogEndOffset != 3 {
		t.Fatalf("partition 1 = %+v", p)
	}

	mustRun(t, "", "topic", "alter", "orders", "--config", "retention.ms=60000", b)
	decodeJSON(t, mustRun(t, "", "topic", "describe", "orders", "--json", b), &d)
	if len(d.Configs) != 1 || d.Configs[0].Key != "retention.ms" || d.Configs[0].Value == nil || *d.Configs[0].Value != "60000" ||
		d.Configs[0].Source != "DYNAMIC_TOPIC_CONFIG" {
		t.Fatalf("configs = %+v", d.Configs)
	}
}

func TestCLIJSONGroups(t *testing.T) {
	addr := startGroupNode(t)
	b := "--brokers=" + addr
	if out := mustRun(t, "", "group", "list", "--json", b); out != "[]\n" {
		t.Fatalf("group list --json of no groups = %q, want []", out)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(t.Context(), testBound)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "jobs"); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "a\nb\nc\n", "produce", "jobs", b)
	offsets := make(kadm.Offsets)
	offsets.Add(kadm.Offset{Topic: "jobs", Partition: 0, At: 1, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, "workers", offsets); err != nil {
		t.Fatal(err)
	}

	var list []groupListEntry
	decodeJSON(t, mustRun(t, "", "group", "list", "--json", b), &list)
	if len(list) != 1 || list[0].Group != "workers" || list[0].State != "Empty" {
		t.Fatalf("group list --json = %+v", list)
	}

	out := mustRun(t, "", "group", "describe", "workers", "--json", b)
	if !strings.Contains(out, `"members":[]`) {
		t.Errorf("group describe --json of a group without members: %q, want \"members\":[]", out)
	}
	var d groupDescription
	decodeJSON(t, out, &d)
	if d.Group != "workers" || d.State != "Empty" || d.Lag != 2 || len(d.Partitions) != 1 {
		t.Fatalf("group describe --json = %+v", d)
	}
	p := d.Partitions[0]
	if p.Topic != "jobs" || p.Committed == nil || *p.Committed != 1 || p.LogEndOffset == nil || *p.LogEndOffset != 3 ||
		p.Lag == nil || *p.Lag != 2 || p.Member != nil {
		t.Fatalf("partition = %+v", p)
	}
}
