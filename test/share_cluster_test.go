package test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/sharestate"
	"github.com/weir-mq/weir/internal/tlstest"
)

// leaders returns topic's partition leaders in resp, by partition.
func leaders(t testing.TB, resp *kmsg.MetadataResponse, topic string) map[int32]int32 {
	t.Helper()
	out := map[int32]int32{}
	for _, p := range topicOf(t, resp, topic).Partitions {
		out[p.Partition] = p.Leader
	}
	return out
}

// fullISR is a Metadata check: every partition of each topic has a leader and all its replicas in
// sync.
func fullISR(topics ...string) func(*kmsg.MetadataResponse) bool {
	return func(resp *kmsg.MetadataResponse) bool {
		for _, name := range topics {
			found := false
			for _, tp := range resp.Topics {
				if tp.Topic == nil || *tp.Topic != name {
					continue
				}
				found = true
				for _, p := range tp.Partitions {
					if p.Leader < 0 || len(p.ISR) != len(p.Replicas) {
						return false
					}
				}
			}
			if !found {
				return false
			}
		}
		return true
	}
}

// statePartition is the __share_group_state partition that holds the share-partition (group, topic
// id, partition), as the share-state coordinator places it.
func statePartition(groupID string, id [16]byte, partition, stateParts int32) int32 {
	sp := sharestate.SharePartition{Group: groupID, TopicID: controller.TopicID(id), Partition: partition}
	return group.PartitionFor(sp.String(), stateParts)
}

// shareWork is how long a test share consumer works on one poll's records before it accepts them.
const shareWork = 50 * time.Millisecond

// shareMember is one franz-go share consumer of the test: it polls, accepts every record it got,
// flushes the acknowledgements and records what the broker answered for each partition.
type shareMember struct {
	name string
	cl   *kgo.Client
	// received holds when each record arrived in the client's buffer (*kgo.Record to time.Time):
	// its delivery time, since franz-go fetches ahead of the polls.
	received sync.Map

	mu      sync.Mutex
	results map[int32][]error // per partition, the ack results of the current flush
	errs    map[string]int    // every ack error of the run, by message
}

// OnFetchRecordBuffered stamps the record's arrival (kgo.HookFetchRecordBuffered).
func (m *shareMember) OnFetchRecordBuffered(r *kgo.Record) { m.received.Store(r, time.Now()) }

func newShareMember(t testing.TB, nodes []*node, name, groupID, topic string, opts ...kgo.Opt) *shareMember {
	t.Helper()
	m := &shareMember{name: name, errs: map[string]int{}}
	cl, err := kgo.NewClient(slices.Concat(clusterClientOpts(nodes), opts, []kgo.Opt{
		kgo.ShareGroup(groupID), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(300 * time.Millisecond),
		kgo.ClientID(name), kgo.WithHooks(m),
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, r := range rs {
				m.results[r.Partition] = append(m.results[r.Partition], r.Err)
			}
		})})...)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	return m
}

// run polls until ctx ends. Each poll's records are recorded as deliveries at their arrival (warm-up
// records go to warm instead), all accepted, and flushed; a partition's records are confirmed when
// every result the broker gave for that partition in the flush was without error, failed when one
// was an error, and unknown when the flush did not finish or no result came.
func (m *shareMember) run(ctx context.Context, h *shareHistory, warm func(int32)) {
	for ctx.Err() == nil {
		fs := m.cl.PollFetches(ctx)
		idx := map[int32][]int{}
		fs.EachRecord(func(r *kgo.Record) {
			at := time.Now()
			if v, ok := m.received.LoadAndDelete(r); ok {
				at = v.(time.Time)
			}
			if strings.HasPrefix(string(r.Value), "warm") {
				warm(r.Partition)
				return
			}
			idx[r.Partition] = append(idx[r.Partition], h.deliver(m.name, at, string(r.Value))...)
		})
		if fs.NumRecords() == 0 {
			continue
		}
		// The work a record costs, so that records are held when a node dies.
		time.Sleep(shareWork)
		m.mu.Lock()
		m.results = map[int32][]error{}
		m.mu.Unlock()
		m.cl.MarkAcks(kgo.AckAccept)
		fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := m.cl.FlushAcks(fctx)
		cancel()
		done := time.Now()
		m.mu.Lock()
		for _, rs := range m.results {
			for _, e := range rs {
				if e != nil {
					m.errs[e.Error()]++
				}
			}
		}
		if err != nil {
			m.errs["flush: "+err.Error()]++
		}
		for p, is := range idx {
			rs := m.results[p]
			switch {
			case err != nil || len(rs) == 0:
				h.settle(is, acceptUnknown, done)
			case slices.ContainsFunc(rs, func(e error) bool { return e != nil }):
				h.settle(is, acceptFailed, done)
			default:
				h.settle(is, acceptConfirmed, done)
			}
		}
		m.mu.Unlock()
	}
}

// pickShareGroup returns a group whose share-partitions of the topic id (two partitions) have their
// state led by nodes other than their data partitions' leaders, partition 0's by a node that leads
// no data partition, and that node.
func pickShareGroup(t testing.TB, id [16]byte, dataLeaders, stateLeaders map[int32]int32) (string, int32) {
	t.Helper()
	stateParts := int32(len(stateLeaders))
	for i := range 10000 {
		g := fmt.Sprintf("sg-%d", i)
		l0, l1 := stateLeaders[statePartition(g, id, 0, stateParts)], stateLeaders[statePartition(g, id, 1, stateParts)]
		if l0 != dataLeaders[0] && l0 != dataLeaders[1] && l1 != dataLeaders[1] {
			t.Logf("data leaders %v, group %s's state coordinators %d and %d", dataLeaders, g, l0, l1)
			return g, l0
		}
	}
	t.Fatalf("no group's state is led apart from the data leaders %v (state leaders %v)", dataLeaders, stateLeaders)
	return "", 0
}

// warmSet is the partitions from which a share group has received a warm-up record.
type warmSet struct {
	mu   sync.Mutex
	seen map[int32]bool
}

func (w *warmSet) add(p int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen[p] = true
}

// produce writes a warm-up record to each partition every 300 ms until the group received one from
// each: a share-partition starts at the log end when first fetched, so records before that are never
// delivered.
func (w *warmSet) produce(ctx context.Context, t testing.TB, prod *kgo.Client, topic string, partitions int32) {
	t.Helper()
	for {
		w.mu.Lock()
		done := len(w.seen) == int(partitions)
		w.mu.Unlock()
		if done {
			return
		}
		for p := range partitions {
			if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("warm")}).FirstErr(); err != nil {
				t.Fatalf("produce warm-up: %v", err)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the group received no warm-up record from some partition")
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// TestShareClusterKills: three nodes with share groups, a topic of two partitions at RF 3 whose
// leaders are not the node that coordinates their share-partitions' state (so every load and every
// acknowledgement's write crosses nodes: ReadShareGroupState and WriteShareGroupState), three franz-go
// share consumers accepting every record while a producer writes, and two kill -9s mid-stream: the
// state coordinator's node (then restarted), and then a data partition's leader. The history, as the
// clients saw it, must show every acknowledged record delivered, none accepted twice, and none
// delivered again after an acceptance the broker answered without error.
func TestShareClusterKills(t *testing.T) {
	ctx := testContext(t, 240*time.Second)
	nodes := startGroupCluster(ctx, t, "--share-groups")
	const topic = "sq"
	createLedTopic(ctx, t, nodes, topic, 2)
	meta := waitAgree(ctx, t, nodes, fullISR(topic))
	id := topicOf(t, meta, topic).TopicID
	dataLeaders := leaders(t, meta, topic)

	// A probe consumer's first fetch creates __share_group_state; then a group is chosen whose
	// share-partitions' state is led by nodes other than their data partitions' leaders, partition 0's
	// by a node that leads no data partition (the state coordinator killed first).
	probe := newShareMember(t, nodes, "probe", "sg-probe", topic)
	pctx, stopProbe := context.WithCancel(ctx)
	var probeWG sync.WaitGroup
	probeWG.Go(func() { probe.run(pctx, newShareHistory(), func(int32) {}) })
	meta = waitAgree(ctx, t, nodes, fullISR(topic, sharestate.StateTopic))
	stopProbe()
	probeWG.Wait()
	probe.cl.Close()
	groupID, coord := pickShareGroup(t, id, dataLeaders, leaders(t, meta, sharestate.StateTopic))

	h := newShareHistory()
	warmed := &warmSet{seen: map[int32]bool{}}
	warm := warmed.add
	mctx, stopMembers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var members []*shareMember
	for i := range 3 {
		m := newShareMember(t, nodes, fmt.Sprintf("c%d", i), groupID, topic)
		members = append(members, m)
		wg.Go(func() { m.run(mctx, h, warm) })
	}
	defer func() {
		stopMembers()
		wg.Wait()
		for _, m := range members {
			m.cl.Close()
		}
	}()

	prod, err := kgo.NewClient(append(clusterClientOpts(nodes), kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	warmed.produce(ctx, t, prod, topic, 2)

	const total = 3000
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < total && ctx.Err() == nil; i++ {
			<-tick.C
			v := fmt.Sprintf("r%05d", i)
			prod.Produce(ctx, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte(v)}, func(_ *kgo.Record, err error) {
				if err == nil {
					h.produce(v)
				}
			})
		}
		_ = prod.Flush(ctx)
	}()

	byID := func(id int32) *node { return nodes[id-1] }
	progress := func(what string, d time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
		c, p := h.confirmed()
		t.Logf("%s: %d of %d produced records confirmed accepted", what, c, p)
	}
	progress("before the kills", 5*time.Second)
	byID(coord).kill()
	progress(fmt.Sprintf("node %d (state coordinator) killed", coord), 6*time.Second)
	byID(coord).restart()
	waitAgree(ctx, t, nodes, fullISR(topic, sharestate.StateTopic))
	victim := leaders(t, waitAgree(ctx, t, nodes, fullISR(topic)), topic)[0]
	progress(fmt.Sprintf("node %d restarted", coord), time.Second)
	byID(victim).kill()
	progress(fmt.Sprintf("node %d (leader of %s-0) killed", victim, topic), 6*time.Second)
	byID(victim).restart()
	<-produced

	// Every record acknowledged to the producer is accepted, or its acceptance was answered with an
	// error and it is never delivered again: wait for the first while records still come, and past
	// the 30 s acquisition lock of a record whose acknowledgement was refused (a share session lost
	// with a restarted node), which then comes back.
	deadline := time.Now().Add(90 * time.Second)
	last, lastChange := -1, time.Now()
	for {
		c, p := h.confirmed()
		if c != last {
			last, lastChange = c, time.Now()
		}
		if c == p || time.Since(lastChange) > 40*time.Second || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Anything delivered again would come within this.
	progress("done", 3*time.Second)
	stopMembers()
	wg.Wait()

	r := checkShare(h)
	t.Logf("history: %s", r)
	for _, m := range members {
		if len(m.errs) > 0 {
			t.Logf("%s's acknowledgement errors: %v", m.name, m.errs)
		}
	}
	if an := r.anomalies(); len(an) > 0 {
		t.Fatalf("anomalies: %s (%s)", strings.Join(an, "; "), r)
	}
	if r.produced < total*9/10 {
		t.Fatalf("only %d of %d records acknowledged to the producer", r.produced, total)
	}
	if r.confirmed < r.produced*9/10 {
		t.Fatalf("too few records accepted: %s", r)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("the test ran out of time: %s", r)
	}
}

// TestShareClusterSecure: share groups across nodes with security on. Three nodes whose one Kafka
// listener, the inter-broker one, is SASL_SSL under ACLs, the SCRAM user broker their inter-broker
// principal and super user: share consumers (as broker) accept every record of a topic whose
// partitions' leaders reach their share-state coordinators on other nodes, so each load and write
// goes over the authenticated inter-broker connection; a user without CLUSTER_ACTION who sends
// ReadShareGroupState or WriteShareGroupState gets CLUSTER_AUTHORIZATION_FAILED.
func TestShareClusterSecure(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	ca := tlstest.NewCA(t)
	ports := pickPorts(t, 3)
	voters := voterList(ports[:3])
	const password = "broker-secret"
	nodes := make([]*node, 3)
	for i := range nodes {
		nodes[i] = newNode(t, nodeOptions{
			NodeID: int32(i + 1), Ports: ports[i], Voters: voters, KafkaProtocol: "SASL_SSL",
			Env: []string{"WEIR_BOOTSTRAP_USER=broker:" + password, "WEIR_INTER_BROKER_PASSWORD=" + password},
			Args: slices.Concat(nodeCertArgs(t, ca, fmt.Sprintf("node-%d", i+1)), []string{
				"--tls-client-auth", "none", "--inter-broker-sasl-user", "broker", "--sasl-failure-delay", "10ms",
				"--authorizer", "acl", "--super-users", "User:broker", "--share-groups",
			}, clusterArgs, groupClusterArgs),
		})
	}
	for _, n := range nodes {
		n.launch()
	}
	for _, n := range nodes {
		n.waitHealthy()
	}
	clientTLS := &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12}
	as := func(user, pass string) []kgo.Opt {
		return []kgo.Opt{kgo.DialTLSConfig(clientTLS), kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism())}
	}
	cl, err := kgo.NewClient(slices.Concat(clusterClientOpts(nodes), as("broker", password),
		[]kgo.Opt{kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner())})...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const topic = "sq-secure"
	waitFor(ctx, t, "the topic created", func() bool {
		resp, err := adm.CreateTopic(ctx, 2, 3, nil, topic)
		return err == nil && resp.Err == nil
	})
	ledTopics := func(names ...string) (kadm.Metadata, bool) {
		md, err := adm.Metadata(ctx)
		if err != nil {
			return md, false
		}
		for _, name := range names {
			td, ok := md.Topics[name]
			if !ok || len(td.Partitions) == 0 {
				return md, false
			}
			for _, p := range td.Partitions {
				if p.Leader < 0 || len(p.ISR) != len(p.Replicas) {
					return md, false
				}
			}
		}
		return md, true
	}
	leadersOf := func(td kadm.TopicDetail) map[int32]int32 {
		out := map[int32]int32{}
		for _, p := range td.Partitions {
			out[p.Partition] = p.Leader
		}
		return out
	}
	var md kadm.Metadata
	waitFor(ctx, t, "the topic led", func() (ok bool) { md, ok = ledTopics(topic); return ok })
	id := [16]byte(md.Topics[topic].ID)
	dataLeaders := leadersOf(md.Topics[topic])

	probe := newShareMember(t, nodes, "probe", "sg-probe", topic, as("broker", password)...)
	pctx, stopProbe := context.WithCancel(ctx)
	var probeWG sync.WaitGroup
	probeWG.Go(func() { probe.run(pctx, newShareHistory(), func(int32) {}) })
	waitFor(ctx, t, "__share_group_state created and led", func() (ok bool) { md, ok = ledTopics(topic, sharestate.StateTopic); return ok })
	stopProbe()
	probeWG.Wait()
	probe.cl.Close()
	groupID, _ := pickShareGroup(t, id, dataLeaders, leadersOf(md.Topics[sharestate.StateTopic]))

	h := newShareHistory()
	warmed := &warmSet{seen: map[int32]bool{}}
	mctx, stopMembers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var members []*shareMember
	for i := range 2 {
		m := newShareMember(t, nodes, fmt.Sprintf("c%d", i), groupID, topic, as("broker", password)...)
		members = append(members, m)
		wg.Go(func() { m.run(mctx, h, warmed.add) })
	}
	defer func() {
		stopMembers()
		wg.Wait()
		for _, m := range members {
			m.cl.Close()
		}
	}()
	warmed.produce(ctx, t, cl, topic, 2)
	const total = 300
	for i := range total {
		v := fmt.Sprintf("s%04d", i)
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		h.produce(v)
	}
	actx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	waitFor(actx, t, "every record accepted", func() bool { c, p := h.confirmed(); return c == p })
	time.Sleep(time.Second)
	stopMembers()
	wg.Wait()
	r := checkShare(h)
	t.Logf("history: %s", r)
	if an := r.anomalies(); len(an) > 0 || r.redeliveries != 0 || r.confirmed != total {
		t.Fatalf("anomalies %v, %s; want every record accepted once, none delivered twice", an, r)
	}

	// A user without CLUSTER_ACTION may not use the share-state coordinator's keys.
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "app", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "app-secret"}}); err != nil {
		t.Fatalf("create user app: %v", err)
	}
	app, err := kgo.NewClient(slices.Concat(clusterClientOpts(nodes), as("app", "app-secret"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	coord := leadersOf(md.Topics[sharestate.StateTopic])[statePartition(groupID, id, 0, int32(len(md.Topics[sharestate.StateTopic].Partitions)))]
	read := kmsg.NewPtrReadShareGroupStateRequest()
	read.GroupID = groupID
	rt := kmsg.NewReadShareGroupStateRequestTopic()
	rt.TopicID = id
	rt.Partitions = []kmsg.ReadShareGroupStateRequestTopicPartition{kmsg.NewReadShareGroupStateRequestTopicPartition()}
	read.Topics = append(read.Topics, rt)
	write := kmsg.NewPtrWriteShareGroupStateRequest()
	write.GroupID = groupID
	wt := kmsg.NewWriteShareGroupStateRequestTopic()
	wt.TopicID = id
	wt.Partitions = []kmsg.WriteShareGroupStateRequestTopicPartition{kmsg.NewWriteShareGroupStateRequestTopicPartition()}
	write.Topics = append(write.Topics, wt)
	var codes []int16
	waitFor(ctx, t, "app's requests answered", func() bool {
		codes = codes[:0]
		resp, err := app.Broker(int(coord)).Request(ctx, read)
		if err != nil {
			return false
		}
		codes = append(codes, resp.(*kmsg.ReadShareGroupStateResponse).Topics[0].Partitions[0].ErrorCode)
		resp, err = app.Broker(int(coord)).Request(ctx, write)
		if err != nil {
			return false
		}
		codes = append(codes, resp.(*kmsg.WriteShareGroupStateResponse).Topics[0].Partitions[0].ErrorCode)
		return true
	})
	if want := []int16{kerr.ClusterAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Code}; !slices.Equal(codes, want) {
		t.Fatalf("app's ReadShareGroupState and WriteShareGroupState: codes %v, want %v", codes, want)
	}
}
