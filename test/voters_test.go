package test

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// quorumRoles reads `weir cluster controller describe`'s table: node id to role (leader, voter,
// observer).
func quorumRoles(out string) map[string]string {
	roles := map[string]string{}
	lines := strings.Split(out, "\n")
	for _, line := range lines[min(2, len(lines)):] {
		if f := strings.Fields(line); len(f) >= 2 {
			roles[f[0]] = f[1]
		}
	}
	return roles
}

// TestControllerVoterChanges: three voters and a fourth node started as a broker only; while a client
// creates a topic every 200 ms, `weir cluster controller add-voter` makes node 4 a voter and
// `remove-voter 1` takes node 1 out (it stays an observer). Every creation succeeds (retrying only
// NOT_CONTROLLER and timeouts while leadership moves), describe shows voters 2, 3 and 4, and every node
// ends with every topic. Then, node 3 killed, removing voter 2 (leaving 3 and 4, one live) is refused
// and the quorum still commits.
func TestControllerVoterChanges(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	ports := pickPorts(t, 4)
	voters := voterList(ports[:3])
	var nodes []*node
	for i := range 4 {
		nodes = append(nodes, newNode(t, nodeOptions{NodeID: int32(i + 1), Ports: ports[i],
			Voters: voters, Args: clusterArgs}))
	}
	for _, n := range nodes[:3] {
		n.launch()
	}
	for _, n := range nodes[:3] {
		n.waitHealthy()
	}
	nodes[3].start()
	waitAgree(ctx, t, nodes, hasBrokers(1, 2, 3, 4))
	var seeds []string
	for _, n := range nodes {
		seeds = append(seeds, n.kafkaAddr())
	}
	weir := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, weirBin, append(append([]string{"cluster", "controller"}, args...),
			"--brokers", strings.Join(seeds, ","))...).CombinedOutput()
		return string(out), err
	}

	// a topic every 200 ms through every node in turn, until stopped
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var (
		mu      sync.Mutex
		created []string
		failed  []string
	)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			name := fmt.Sprintf("voters-%03d", i)
			var err error
			for attempt := 0; attempt < 50; attempt++ {
				var resp kadm.CreateTopicResponse
				resp, err = adm.CreateTopic(ctx, 1, 2, nil, name)
				if err == nil {
					err = resp.Err
				}
				if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
					err = nil
					break
				}
				if !kerr.IsRetriable(err) && !errors.Is(err, kerr.RequestTimedOut) && !isConnErr(err) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			mu.Lock()
			if err != nil {
				failed = append(failed, fmt.Sprintf("%s: %v", name, err))
			} else {
				created = append(created, name)
			}
			mu.Unlock()
		}
	}()
	time.Sleep(time.Second)

	if out, err := weir("add-voter", fmt.Sprintf("4@%s", ports[3].Controller)); err != nil || !strings.Contains(out, "node 4 is a controller voter") {
		t.Fatalf("add-voter 4: %v\n%s", err, out)
	}
	time.Sleep(time.Second)
	if out, err := weir("remove-voter", "1"); err != nil || !strings.Contains(out, "node 1 is no longer a controller voter") {
		t.Fatalf("remove-voter 1: %v\n%s", err, out)
	}
	time.Sleep(2 * time.Second)
	close(stop)
	<-done
	mu.Lock()
	t.Logf("%d topics created during the changes; failed: %v", len(created), failed)
	if len(failed) > 0 || len(created) < 5 {
		t.Errorf("%d created, failed %v", len(created), failed)
	}
	mu.Unlock()

	out, err := weir("describe")
	t.Logf("describe:\n%s", out)
	if err != nil {
		t.Fatalf("describe: %v", err)
	}
	roles := quorumRoles(out)
	if roles["1"] != "observer" || roles["2"] == "observer" || roles["3"] == "observer" || roles["4"] == "observer" || len(roles) != 4 {
		t.Errorf("roles after the changes: %v", roles)
	}
	waitAgree(ctx, t, nodes, func(resp *kmsg.MetadataResponse) bool {
		n := 0
		for _, tp := range resp.Topics {
			if tp.Topic != nil && strings.HasPrefix(*tp.Topic, "voters-") {
				n++
			}
		}
		return n == len(created)
	})

	// voters 2, 3, 4: with 3 killed, removing 2 would leave 3 and 4 with one live.
	nodes[2].kill()
	time.Sleep(2 * time.Second)
	if out, err := weir("remove-voter", "2"); err == nil || !strings.Contains(out, "INVALID_REQUEST") || !strings.Contains(out, "lose the quorum") {
		t.Errorf("remove-voter 2 with node 3 down: %v\n%s", err, out)
	}
	if err := createTopicRF(ctx, t, nodes[3], "after-refusal", 1, 2); err != nil {
		t.Fatalf("create after the refusal: %v", err)
	}
	out, err = weir("describe")
	if roles := quorumRoles(out); err != nil || roles["2"] == "observer" || roles["3"] == "observer" || roles["4"] == "observer" {
		t.Errorf("describe after the refusal: %v\n%s", err, out)
	}
}
