package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clusterArgs shorten the cluster's liveness timers so that a killed broker is fenced within
// about two seconds, and rebalance leaders every second.
var clusterArgs = []string{
	"--broker-session-timeout", "2s",
	"--broker-heartbeat-interval", "200ms",
	"--leader-rebalance-interval", "1s",
}

// startCluster starts nodes 1..nNodes on 127.0.0.1, the first nVoters of them controller voters,
// every one a broker. The nodes are launched together and then waited for, since no voter serves
// before a quorum of voters runs.
func startCluster(t testing.TB, nNodes, nVoters int) []*node {
	t.Helper()
	ports := pickPorts(t, nNodes)
	voters := voterList(ports[:nVoters])
	nodes := make([]*node, nNodes)
	for i := range nodes {
		nodes[i] = newNode(t, nodeOptions{
			NodeID: int32(i + 1), Ports: ports[i], Voters: voters, Args: clusterArgs,
		})
	}
	for _, n := range nodes {
		n.launch()
	}
	for _, n := range nodes {
		n.waitHealthy()
	}
	return nodes
}

// metadata asks one node for the brokers, the controller and every topic.
func metadata(ctx context.Context, t testing.TB, n *node) *kmsg.MetadataResponse {
	t.Helper()
	cl := n.newClient(t)
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = nil
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("node %d: metadata: %v", n.id, err)
	}
	return resp
}

// clusterView is what every node must agree on: the brokers at their addresses, the controller and
// per partition the leader, replicas and ISR.
func clusterView(resp *kmsg.MetadataResponse) string {
	var b strings.Builder
	brokers := slices.Clone(resp.Brokers)
	sort.Slice(brokers, func(i, j int) bool { return brokers[i].NodeID < brokers[j].NodeID })
	for _, br := range brokers {
		fmt.Fprintf(&b, "broker %d %s:%d\n", br.NodeID, br.Host, br.Port)
	}
	fmt.Fprintf(&b, "controller %d\n", resp.ControllerID)
	topics := slices.Clone(resp.Topics)
	sort.Slice(topics, func(i, j int) bool { return *topics[i].Topic < *topics[j].Topic })
	for _, tp := range topics {
		for _, p := range tp.Partitions {
			fmt.Fprintf(&b, "%s-%d leader %d replicas %v isr %v offline %v\n",
				*tp.Topic, p.Partition, p.Leader, p.Replicas, p.ISR, p.OfflineReplicas)
		}
	}
	return b.String()
}

// waitAgree polls every node until all give the same clusterView and ok accepts it, and returns
// that view's metadata.
func waitAgree(ctx context.Context, t testing.TB, nodes []*node, ok func(*kmsg.MetadataResponse) bool) *kmsg.MetadataResponse {
	t.Helper()
	var views []string
	for {
		views = views[:0]
		var first *kmsg.MetadataResponse
		for _, n := range nodes {
			resp := metadata(ctx, t, n)
			if first == nil {
				first = resp
			}
			views = append(views, clusterView(resp))
		}
		same := true
		for _, v := range views[1:] {
			same = same && v == views[0]
		}
		if same && ok(first) {
			return first
		}
		select {
		case <-ctx.Done():
			t.Fatalf("nodes do not agree: %v; views:\n%s", ctx.Err(), strings.Join(views, "----\n"))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// createTopicRF creates a topic through n with a replication factor, retrying retriable errors
// (NOT_CONTROLLER while a new controller is elected) until ctx ends.
func createTopicRF(ctx context.Context, t testing.TB, n *node, topic string, partitions int32, rf int16) error {
	t.Helper()
	cl := n.newClient(t)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for {
		resp, err := adm.CreateTopic(ctx, partitions, rf, nil, topic)
		if err == nil {
			err = resp.Err
		}
		if err == nil || !kerr.IsRetriable(err) && !errors.Is(err, kerr.RequestTimedOut) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// topicOf returns the topic's metadata from resp.
func topicOf(t testing.TB, resp *kmsg.MetadataResponse, topic string) kmsg.MetadataResponseTopic {
	t.Helper()
	for _, tp := range resp.Topics {
		if tp.Topic != nil && *tp.Topic == topic {
			return tp
		}
	}
	t.Fatalf("topic %s not in metadata", topic)
	return kmsg.MetadataResponseTopic{}
}

func hasBrokers(ids ...int32) func(*kmsg.MetadataResponse) bool {
	return func(resp *kmsg.MetadataResponse) bool {
		if len(resp.Brokers) != len(ids) {
			return false
		}
		for _, b := range resp.Brokers {
			if !slices.Contains(ids, b.NodeID) {
				return false
			}
		}
		return true
	}
}

// clusterStatus runs `weir cluster status` against a node's HTTP address.
func clusterStatus(ctx context.Context, t testing.TB, n *node, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, weirBin, append([]string{"cluster", "status", "--http", n.ports.HTTP}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("weir cluster status: %v\n%s", err, out)
	}
	return string(out)
}

// TestClusterMetadata: three voters agree on brokers, controller and placement; an RF=3 topic has
// its replicas on three distinct nodes and its leaders spread; RF=4 is refused; kcat bootstraps
// from any node; `weir cluster status` shows the three voters.
func TestClusterMetadata(t *testing.T) {
	ctx := testContext(t, 60*time.Second)
	nodes := startCluster(t, 3, 3)
	waitAgree(ctx, t, nodes, hasBrokers(1, 2, 3))
	if err := createTopicRF(ctx, t, nodes[1], "rf3", 6, 3); err != nil {
		t.Fatalf("create rf3: %v", err)
	}
	resp := waitAgree(ctx, t, nodes, hasBrokers(1, 2, 3))
	for i, br := range resp.Brokers {
		if want := nodes[br.NodeID-1].kafkaAddr(); fmt.Sprintf("%s:%d", br.Host, br.Port) != want {
			t.Errorf("broker %d advertised at %s:%d, listens on %s", i, br.Host, br.Port, want)
		}
	}
	leaders := map[int32]int{}
	for _, p := range topicOf(t, resp, "rf3").Partitions {
		if len(p.Replicas) != 3 || len(slices.Compact(slices.Sorted(slices.Values(p.Replicas)))) != 3 {
			t.Errorf("partition %d replicas %v: want three distinct nodes", p.Partition, p.Replicas)
		}
		if p.ErrorCode != 0 || !slices.Contains(p.Replicas, p.Leader) {
			t.Errorf("partition %d: error %d, leader %d not a replica of %v", p.Partition, p.ErrorCode, p.Leader, p.Replicas)
		}
		leaders[p.Leader]++
	}
	for id := int32(1); id <= 3; id++ {
		if leaders[id] != 2 {
			t.Errorf("leaders not spread over the nodes: %v", leaders)
			break
		}
	}

	resp4, err := nodes[2].admin(t).CreateTopic(ctx, 1, 4, nil, "rf4")
	if err == nil {
		err = resp4.Err
	}
	if !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Errorf("RF 4 on three brokers: %v, want INVALID_REPLICATION_FACTOR", err)
	}

	for _, n := range nodes {
		dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, n.client(t))
		if err != nil || dc.ErrorCode != 0 || len(dc.Brokers) != 3 || dc.ControllerID != resp.ControllerID {
			t.Errorf("node %d DescribeCluster: %v %+v, want 3 brokers and controller %d", n.id, err, dc, resp.ControllerID)
		}
	}

	if _, err := exec.LookPath("kcat"); err == nil || os.Getenv("CI") == "true" {
		var want string
		for _, n := range nodes {
			var md kcatMetadata
			out := kcat(ctx, t, n, "", "-L", "-J")
			if err := json.Unmarshal([]byte(out), &md); err != nil {
				t.Fatalf("kcat -L -J: %v\n%s", err, out)
			}
			var b strings.Builder
			sort.Slice(md.Brokers, func(i, j int) bool { return md.Brokers[i].ID < md.Brokers[j].ID })
			for _, br := range md.Brokers {
				fmt.Fprintf(&b, "%d %s\n", br.ID, br.Name)
			}
			rf3 := 0
			for _, tp := range md.Topics {
				for _, p := range tp.Partitions {
					fmt.Fprintf(&b, "%s-%d %d %d\n", tp.Topic, p.Partition, p.Leader, len(p.Replicas))
					if tp.Topic == "rf3" && len(p.Replicas) == 3 {
						rf3++
					}
				}
			}
			if len(md.Brokers) != 3 || rf3 != 6 {
				t.Errorf("kcat -L against node %d lists %d brokers and %d partitions of rf3 with three replicas, want 3 and 6:\n%s", n.id, len(md.Brokers), rf3, b.String())
			}
			if want == "" {
				want = b.String()
			} else if b.String() != want {
				t.Errorf("kcat -L against node %d:\n%s\nagainst node 1:\n%s", n.id, b.String(), want)
			}
		}
	}

	out := clusterStatus(ctx, t, nodes[2])
	if strings.Count(out, " voter ") != 3 || !strings.Contains(out, "controller leader: node") ||
		!strings.Contains(out, "partitions without a leader: none") {
		t.Errorf("weir cluster status:\n%s", out)
	}
}

// controllerOf returns the node the cluster names controller leader.
func controllerOf(ctx context.Context, t testing.TB, nodes []*node, alive func(*node) bool) *node {
	t.Helper()
	for _, n := range nodes {
		if !alive(n) {
			continue
		}
		id := metadata(ctx, t, n).ControllerID
		if id >= 1 && int(id) <= len(nodes) {
			return nodes[id-1]
		}
	}
	t.Fatal("no node names a controller")
	return nil
}

// TestClusterKillController: kill -9 of the controller leader; a survivor still creates a topic
// within seconds; the killed node's partitions get new leaders; it restarts and rejoins, unfenced.
func TestClusterKillController(t *testing.T) {
	ctx := testContext(t, 90*time.Second)
	nodes := startCluster(t, 3, 3)
	waitAgree(ctx, t, nodes, hasBrokers(1, 2, 3))
	if err := createTopicRF(ctx, t, nodes[0], "before", 3, 3); err != nil {
		t.Fatalf("create: %v", err)
	}
	victim := controllerOf(ctx, t, nodes, (*node).alive)
	var survivors []*node
	for _, n := range nodes {
		if n != victim {
			survivors = append(survivors, n)
		}
	}
	victim.kill()
	began := time.Now()
	createCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := createTopicRF(createCtx, t, survivors[0], "after", 2, 2); err != nil {
		t.Fatalf("create after killing controller %d: %v", victim.id, err)
	}
	t.Logf("controller %d killed; next topic created after %v", victim.id, time.Since(began))

	resp := waitAgree(ctx, t, survivors, func(resp *kmsg.MetadataResponse) bool {
		if !hasBrokers(survivors[0].id, survivors[1].id)(resp) {
			return false
		}
		for _, p := range topicOf(t, resp, "before").Partitions {
			if p.Leader == victim.id || p.Leader < 0 || !slices.Contains(p.OfflineReplicas, victim.id) {
				return false
			}
		}
		return true
	})
	if resp.ControllerID == victim.id {
		t.Errorf("controller still %d after it was killed", victim.id)
	}

	victim.restart()
	waitAgree(ctx, t, nodes, func(resp *kmsg.MetadataResponse) bool {
		if !hasBrokers(1, 2, 3)(resp) {
			return false
		}
		for _, p := range topicOf(t, resp, "before").Partitions {
			if len(p.OfflineReplicas) != 0 {
				return false
			}
		}
		return true
	})
	if err := createTopicRF(ctx, t, victim, "rejoined", 3, 3); err != nil {
		t.Fatalf("create through the restarted node: %v", err)
	}
	out := clusterStatus(ctx, t, victim, "--json")
	var st struct {
		Controller struct {
			Nodes []struct {
				NodeID int32 `json:"node_id"`
				Fenced bool  `json:"fenced"`
			} `json:"nodes"`
		} `json:"controller"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || len(st.Controller.Nodes) != 3 {
		t.Fatalf("cluster status --json: %v\n%s", err, out)
	}
	for _, ns := range st.Controller.Nodes {
		if ns.Fenced {
			t.Errorf("node %d still fenced after it rejoined:\n%s", ns.NodeID, out)
		}
	}
}

// TestClusterNonVoters: five nodes, three of them voters; the two others are brokers (Raft
// non-voters) that serve the same metadata and forward admin requests.
func TestClusterNonVoters(t *testing.T) {
	ctx := testContext(t, 60*time.Second)
	nodes := startCluster(t, 5, 3)
	waitAgree(ctx, t, nodes, hasBrokers(1, 2, 3, 4, 5))
	if err := createTopicRF(ctx, t, nodes[4], "five", 5, 3); err != nil {
		t.Fatalf("create through a non-voter: %v", err)
	}
	resp := waitAgree(ctx, t, nodes, hasBrokers(1, 2, 3, 4, 5))
	leaders := map[int32]bool{}
	for _, p := range topicOf(t, resp, "five").Partitions {
		leaders[p.Leader] = true
	}
	if len(leaders) != 5 {
		t.Errorf("five partitions led by %d distinct brokers, want 5", len(leaders))
	}
	out := clusterStatus(ctx, t, nodes[3])
	if strings.Count(out, " voter ") != 3 || strings.Count(out, " non-voter ") != 2 {
		t.Errorf("weir cluster status: want 3 voters and 2 non-voters:\n%s", out)
	}
}

// TestClusterFailoverTimes measures, over WEIR_CLUSTER_TRIALS trials (default 10), the time from
// kill -9 of the controller leader to the next committed topic creation, and from kill -9 of a
// broker that is not the controller to new leaders for all its partitions, and logs the medians.
// It runs only when WEIR_CLUSTER_MEASURE=1.
func TestClusterFailoverTimes(t *testing.T) {
	if os.Getenv("WEIR_CLUSTER_MEASURE") != "1" {
		t.Skip("set WEIR_CLUSTER_MEASURE=1 to measure failover times")
	}
	trials := 10
	if v, err := strconv.Atoi(os.Getenv("WEIR_CLUSTER_TRIALS")); err == nil && v > 0 {
		trials = v
	}
	ctx := testContext(t, time.Duration(trials)*2*time.Minute)
	nodes := startCluster(t, 3, 3)
	waitAgree(ctx, t, nodes, hasBrokers(1, 2, 3))
	if err := createTopicRF(ctx, t, nodes[0], "measured", 9, 3); err != nil {
		t.Fatalf("create: %v", err)
	}
	var ctrl, broker []time.Duration
	for i := range trials {
		waitAgree(ctx, t, nodes, hasBrokers(1, 2, 3))
		victim := controllerOf(ctx, t, nodes, (*node).alive)
		other := nodes[(victim.id)%3]
		victim.kill()
		began := time.Now()
		if err := createTopicRF(ctx, t, other, "trial-"+strconv.Itoa(i), 1, 1); err != nil {
			t.Fatalf("trial %d: create after killing the controller: %v", i, err)
		}
		ctrl = append(ctrl, time.Since(began))
		victim.restart()

		waitAgree(ctx, t, nodes, hasBrokers(1, 2, 3))
		ctrlNode := controllerOf(ctx, t, nodes, (*node).alive)
		victim = nodes[(ctrlNode.id)%3]
		led := map[int32]bool{}
		for _, p := range topicOf(t, metadata(ctx, t, ctrlNode), "measured").Partitions {
			if p.Leader == victim.id {
				led[p.Partition] = true
			}
		}
		victim.kill()
		began = time.Now()
		for {
			moved := true
			for _, p := range topicOf(t, metadata(ctx, t, ctrlNode), "measured").Partitions {
				if led[p.Partition] && (p.Leader == victim.id || p.Leader < 0) {
					moved = false
				}
			}
			if moved {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("trial %d: partitions of killed broker %d never moved", i, victim.id)
			}
			time.Sleep(20 * time.Millisecond)
		}
		broker = append(broker, time.Since(began))
		victim.restart()
	}
	median := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2]
	}
	t.Logf("controller leader killed -> next committed CreateTopic: median %v of %d (%v)", median(ctrl), len(ctrl), ctrl)
	t.Logf("broker killed -> new leaders for its partitions (session timeout 2s): median %v of %d (%v)", median(broker), len(broker), broker)
}
