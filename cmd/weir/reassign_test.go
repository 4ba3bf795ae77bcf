package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/weir-mq/weir/internal/server"
)

// TestCLIReassign drives `weir cluster reassign` against one real node: a plan that keeps each
// partition on the node completes at once and --verify says so and removes the throttle; a plan
// naming a broker that does not exist, a cancel with nothing to cancel and malformed input fail with
// a clear message.
func TestCLIReassign(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.KafkaAddr, cfg.HTTPAddr, cfg.ControllerAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Logger = slog.New(slog.DiscardHandler)
	n, err := server.Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() { _ = n.Close() })
	b := n.KafkaAddr()
	mustRun(t, "", "--brokers", b, "topic", "create", "r", "--partitions", "2")

	plan := filepath.Join(t.TempDir(), "plan.json")
	write := func(s string) {
		if err := os.WriteFile(plan, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"version":1,"partitions":[{"topic":"r","partition":0,"replicas":[1],"log_dirs":["any"]},{"topic":"r","partition":1,"replicas":[1]}]}`)
	out := mustRun(t, "", "cluster", "reassign", "--brokers", b, "--reassignment-json-file", plan, "--execute", "--throttle", "1048576")
	if !strings.Contains(out, "throttle: 1048576") || !strings.Contains(out, "r-0: moving") || !strings.Contains(out, "r-1: moving") {
		t.Errorf("execute:\n%s", out)
	}
	out = mustRun(t, "", "cluster", "reassign", "--brokers", b, "--reassignment-json-file", plan, "--verify")
	if !strings.Contains(out, "r-0: complete") || !strings.Contains(out, "r-1: complete") || !strings.Contains(out, "throttle removed") {
		t.Errorf("verify:\n%s", out)
	}

	res := runCLI(t, "", "cluster", "reassign", "--brokers", b, "--reassignment-json-file", plan, "--cancel")
	if !errors.Is(res.err, errMovesFailed) || !strings.Contains(res.stdout, "NO_REASSIGNMENT_IN_PROGRESS") {
		t.Errorf("cancel without moves: %v\n%s", res.err, res.stdout)
	}
	write(`{"version":1,"partitions":[{"topic":"r","partition":0,"replicas":[9]}]}`)
	res = runCLI(t, "", "cluster", "reassign", "--brokers", b, "--reassignment-json-file", plan, "--execute")
	if !errors.Is(res.err, errMovesFailed) || !strings.Contains(res.stdout, "INVALID_REPLICA_ASSIGNMENT") {
		t.Errorf("move to broker 9: %v\n%s", res.err, res.stdout)
	}
	res = runCLI(t, "", "cluster", "decommission", "1", "--brokers", b)
	if !errors.Is(res.err, errMovesFailed) || !strings.Contains(res.err.Error(), "no live broker") {
		t.Errorf("decommission of the only node: %v", res.err)
	}
	out = mustRun(t, "", "cluster", "decommission", "2", "--brokers", b, "--dry-run")
	if strings.TrimSpace(out) != `{"version":1,"partitions":[]}` {
		t.Errorf("dry run for a node without replicas: %s", out)
	}
	for _, c := range []struct{ json, flag, want string }{
		{`{"version":1,"partitions":[]}`, "", "exactly one of"},
		{`{"version":2,"partitions":[]}`, "--verify", "version 2"},
		{`{"version":1,"partitions":[{"topic":"r","partition":0,"replicas":[1]},{"topic":"r","partition":0,"replicas":[1]}]}`, "--execute", "named twice"},
		{`not json`, "--execute", "not reassignment JSON"},
		{`{"version":1,"partitions":[{"topic":"r","partition":0,"replicas":[1],"log_dirs":["/d"]}]}`, "--execute", "one data directory"},
	} {
		write(c.json)
		args := []string{"cluster", "reassign", "--brokers", b, "--reassignment-json-file", plan}
		if c.flag != "" {
			args = append(args, c.flag)
		}
		res := runCLI(t, "", args...)
		if !errors.Is(res.err, errUsage) || !strings.Contains(res.err.Error(), c.want) {
			t.Errorf("%s %s: %v, want a usage error saying %q", c.json, c.flag, res.err, c.want)
		}
	}
}

// TestCLIDecommissionPlan: every replica of the node goes to the least loaded broker outside the
// partition, in the node's place; a partition that no broker can take refuses the plan.
func TestCLIDecommissionPlan(t *testing.T) {
	part := func(topic string, p int32, replicas ...int32) kadm.PartitionDetail {
		return kadm.PartitionDetail{Topic: topic, Partition: p, Leader: replicas[0], Replicas: replicas}
	}
	meta := kadm.Metadata{
		Brokers: kadm.BrokerDetails{{NodeID: 1}, {NodeID: 2}, {NodeID: 3}, {NodeID: 4}},
		Topics: kadm.TopicDetails{"a": {Topic: "a", Partitions: kadm.PartitionDetails{
			0: part("a", 0, 1, 2, 3), 1: part("a", 1, 2, 3, 1), 2: part("a", 2, 3, 2, 4), 3: part("a", 3, 1, 4, 2),
		}}},
	}
	plan, err := planDecommission(meta, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []plannedPartition{
		{Topic: "a", Partition: 0, Replicas: []int32{4, 2, 3}},
		{Topic: "a", Partition: 1, Replicas: []int32{2, 3, 4}},
		{Topic: "a", Partition: 3, Replicas: []int32{3, 4, 2}},
	}
	if !reflect.DeepEqual(plan.Partitions, want) {
		t.Errorf("plan %+v, want %+v", plan.Partitions, want)
	}
	meta.Brokers = meta.Brokers[:3]
	meta.Topics["a"].Partitions[2] = part("a", 2, 3, 2, 1)
	if _, err := planDecommission(meta, 1); !errors.Is(err, errMovesFailed) {
		t.Errorf("decommission with nowhere to go: %v, want errMovesFailed", err)
	}

	// Node 1's partitions all hold 2 and 3, so one at a time they can only go to 4 and 5, which
	// leaves 2 and 3 with eight replicas each and 4 and 5 with four: the plan evens them out.
	meta = kadm.Metadata{Brokers: kadm.BrokerDetails{{NodeID: 1}, {NodeID: 2}, {NodeID: 3}, {NodeID: 4}, {NodeID: 5}},
		Topics: kadm.TopicDetails{"a": {Topic: "a", Partitions: kadm.PartitionDetails{}}, "c": {Topic: "c", Partitions: kadm.PartitionDetails{}}}}
	for p := range int32(4) {
		meta.Topics["a"].Partitions[p] = part("a", p, 1, 2, 3)
		meta.Topics["c"].Partitions[p] = part("c", p, 2, 3, 4)
	}
	if plan, err = planDecommission(meta, 1); err != nil {
		t.Fatal(err)
	}
	placed := map[string][]int32{}
	for _, tp := range meta.Topics {
		for _, p := range tp.Partitions {
			placed[fmt.Sprintf("%s-%d", p.Topic, p.Partition)] = p.Replicas
		}
	}
	for _, p := range plan.Partitions {
		placed[fmt.Sprintf("%s-%d", p.Topic, p.Partition)] = p.Replicas
	}
	load := map[int32]int{}
	for _, replicas := range placed {
		for _, r := range replicas {
			load[r]++
		}
	}
	if load[1] != 0 || load[2] != 6 || load[3] != 6 || load[4] != 6 || load[5] != 6 {
		t.Errorf("replicas per broker after the decommission %v, want none on 1 and 6 on each other", load)
	}
}
