package api_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/server"
)

// startGroupNode runs a node in dir whose group coordinator uses 4 offsets partitions, no initial
// rebalance delay and a low minimum session timeout, so group tests need not wait Kafka's seconds.
func startGroupNode(t testing.TB, dir string) *server.Node {
	t.Helper()
	cfg := nodeConfig(dir)
	cfg.Groups = group.CoordinatorConfig{OffsetsPartitions: 4, SessionTimeoutMin: 100 * time.Millisecond, OffsetMetadataMax: 64}
	return startNodeWith(t, cfg)
}

// reads records which member read each value in which generation.
type reads struct {
	mu   sync.Mutex
	by   map[string][]readBy
	nNew int
}

type readBy struct {
	member     string
	generation int32
}

func newReads() *reads { return &reads{by: map[string][]readBy{}} }

func (r *reads) add(member string, generation int32, recs []*kgo.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range recs {
		v := string(rec.Value)
		if len(r.by[v]) == 0 {
			r.nNew++
		}
		r.by[v] = append(r.by[v], readBy{member, generation})
	}
}

// distinct is how many different values were read.
func (r *reads) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nNew
}

// members returns the members that read anything.
func (r *reads) members() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, rs := range r.by {
		for _, b := range rs {
			out[b.member]++
		}
	}
	return out
}

// checkOnce fails if a value was read more than once.
func (r *reads) checkOnce(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for v, rs := range r.by {
		if len(rs) > 1 {
			t.Fatalf("%s read %d times: %v", v, len(rs), rs)
		}
	}
}

// member is one group consumer polling in the background and committing after each poll (at least
// once). Stop ends the loop; Close leaves the group.
type member struct {
	name   string
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func startMember(t *testing.T, n *server.Node, name, groupID, topic string, r *reads, opts ...kgo.Opt) *member {
	t.Helper()
	base := []kgo.Opt{
		kgo.SeedBrokers(n.KafkaAddr()),
		kgo.ClientID(name),
		kgo.ConsumerGroup(groupID),
		kgo.ConsumeTopics(topic),
		kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.SessionTimeout(2 * time.Second),
		kgo.RebalanceTimeout(3 * time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{name: name, cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			fs := cl.PollRecords(ctx, 50)
			recs := fs.Records()
			if len(recs) == 0 {
				continue
			}
			_, gen := cl.GroupMetadata()
			r.add(name, gen, recs)
			// The commit is not cut short by stop: a member that read records commits them before it
			// stops, as the tests' exactly-once checks assume (a test may stop a member as soon as its
			// reads are counted, while their commit is in flight).
			cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = cl.CommitRecords(cctx, recs...)
			ccancel()
		}
	}()
	t.Cleanup(m.close)
	return m
}

func (m *member) stop() {
	m.cancel()
	<-m.done
}

func (m *member) close() {
	m.stop()
	m.cl.Close()
}

func produceValues(t *testing.T, cl *kgo.Client, topic, prefix string, n int) {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s%05d", prefix, i)}
	}
	produceSync(t, cl, recs...)
}

// waitFor polls cond; the bound only guards against a hang.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx := testCtx(t)
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stableWith waits until the group is Stable with n members, each assigned something.
func stableWith(t *testing.T, adm *kadm.Client, groupID string, n int) kadm.DescribedGroup {
	t.Helper()
	var d kadm.DescribedGroup
	waitFor(t, fmt.Sprintf("group %s stable with %d members", groupID, n), func() bool {
		gs, err := adm.DescribeGroups(testCtx(t), groupID)
		if err != nil {
			return false
		}
		d = gs[groupID]
		if d.Err != nil || d.State != "Stable" || len(d.Members) != n {
			return false
		}
		for _, m := range d.Members {
			ca, ok := m.Assigned.AsConsumer()
			if !ok || len(ca.Topics) == 0 {
				return false
			}
		}
		return true
	})
	return d
}

func TestGroupMembersSplitPartitions(t *testing.T) {
	n := startGroupNode(t, t.TempDir())
	adm := newAdmin(t, n)
	prod := newClient(t, n, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	for _, tc := range []struct {
		name     string
		balancer kgo.GroupBalancer
	}{{"eager-range", kgo.RangeBalancer()}, {"cooperative-sticky", kgo.CooperativeStickyBalancer()}} {
		t.Run(tc.name, func(t *testing.T) {
			topic, g := "split-"+tc.name, "g-"+tc.name
			createTopic(t, adm, topic, 4, nil)
			r := newReads()
			startMember(t, n, "a", g, topic, r, kgo.Balancers(tc.balancer))
			startMember(t, n, "b", g, topic, r, kgo.Balancers(tc.balancer))
			d := stableWith(t, adm, g, 2)
			if d.Protocol != tc.balancer.ProtocolName() {
				t.Fatalf("protocol %q, want %q", d.Protocol, tc.balancer.ProtocolName())
			}
			produceValues(t, prod, topic, "v", 400)
			waitFor(t, "400 records", func() bool { return r.distinct() == 400 })
			r.checkOnce(t)
			if ms := r.members(); ms["a"] == 0 || ms["b"] == 0 {
				t.Fatalf("one member read everything: %v", ms)
			}

			// A second group reads everything again, independently.
			r2 := newReads()
			startMember(t, n, "c", g+"-2", topic, r2, kgo.Balancers(tc.balancer))
			waitFor(t, "the second group reads 400 records", func() bool { return r2.distinct() == 400 })
			r2.checkOnce(t)
		})
	}
}

func TestGroupMemberCloseMovesPartitions(t *testing.T) {
	n := startGroupNode(t, t.TempDir())
	adm := newAdmin(t, n)
	createTopic(t, adm, "moves", 4, nil)
	r := newReads()
	a := startMember(t, n, "a", "g-moves", "moves", r)
	startMember(t, n, "b", "g-moves", "moves", r)
	stableWith(t, adm, "g-moves", 2)
	a.close()
	d := stableWith(t, adm, "g-moves", 1)
	ca, _ := d.Members[0].Assigned.AsConsumer()
	if d.Members[0].ClientID != "b" || len(ca.Topics) != 1 || len(ca.Topics[0].Partitions) != 4 {
		t.Fatalf("after a left: %+v", d.Members)
	}
	produceValues(t, newClient(t, n, kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), "moves", "v", 100)
	waitFor(t, "b reads all 100", func() bool { return r.distinct() == 100 })
	r.checkOnce(t)
}

// killableDialer dials the broker until it is killed; then it closes every connection it made and
// refuses new ones, as if the client's process had died.
type killableDialer struct {
	mu     sync.Mutex
	conns  []net.Conn
	killed bool
}

func (k *killableDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.killed {
		return nil, errors.New("killed")
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err == nil {
		k.conns = append(k.conns, c)
	}
	return c, err
}

func (k *killableDialer) kill() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.killed = true
	for _, c := range k.conns {
		_ = c.Close()
	}
}

func TestGroupKilledMemberExpires(t *testing.T) {
	n := startGroupNode(t, t.TempDir())
	adm := newAdmin(t, n)
	createTopic(t, adm, "killed", 4, nil)
	r := newReads()
	var kd killableDialer
	startMember(t, n, "a", "g-killed", "killed", r, kgo.Dialer(kd.dial))
	startMember(t, n, "b", "g-killed", "killed", r)
	stableWith(t, adm, "g-killed", 2)
	kd.kill()
	// No LeaveGroup reaches the broker: a loses its partitions when its 2 s session expires.
	d := stableWith(t, adm, "g-killed", 1)
	if d.Members[0].ClientID != "b" {
		t.Fatalf("survivor %+v", d.Members[0])
	}
	produceValues(t, newClient(t, n), "killed", "v", 100)
	waitFor(t, "b reads all 100", func() bool { return r.distinct() == 100 })
}

func TestGroupStaticMemberRestartKeepsGeneration(t *testing.T) {
	n := startGroupNode(t, t.TempDir())
	adm := newAdmin(t, n)
	createTopic(t, adm, "static", 4, nil)
	r := newReads()
	static := []kgo.Opt{kgo.InstanceID("static-a"), kgo.SessionTimeout(20 * time.Second)}
	a := startMember(t, n, "a", "g-static", "static", r, static...)
	b := startMember(t, n, "b", "g-static", "static", r)
	before := stableWith(t, adm, "g-static", 2)
	_, genB := b.cl.GroupMetadata()
	a.close() // a static member sends no LeaveGroup
	a2 := startMember(t, n, "a", "g-static", "static", r, static...)
	waitFor(t, "the restarted static member is back", func() bool {
		id, _ := a2.cl.GroupMetadata()
		return id != ""
	})
	after := stableWith(t, adm, "g-static", 2)
	if _, gen := a2.cl.GroupMetadata(); gen != genB {
		t.Fatalf("restarted member is in generation %d, b was in %d", gen, genB)
	}
	if _, gen := b.cl.GroupMetadata(); gen != genB {
		t.Fatalf("b moved from generation %d to %d: the restart caused a rebalance", genB, gen)
	}
	assigned := func(d kadm.DescribedGroup, instance string) string {
		for _, m := range d.Members {
			if m.InstanceID != nil && *m.InstanceID == instance {
				ca, _ := m.Assigned.AsConsumer()
				return fmt.Sprint(ca.Topics)
			}
		}
		return "missing"
	}
	if assigned(before, "static-a") != assigned(after, "static-a") {
		t.Fatalf("static member's assignment changed: %s -> %s", assigned(before, "static-a"), assigned(after, "static-a"))
	}
}

func TestGroupCommitsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	n := startGroupNode(t, dir)
	adm := newAdmin(t, n)
	createTopic(t, adm, "durable", 3, nil)
	prod := newClient(t, n)
	produceValues(t, prod, "durable", "first", 150)
	r := newReads()
	m := startMember(t, n, "a", "g-durable", "durable", r)
	waitFor(t, "150 records read and committed", func() bool {
		if r.distinct() < 150 {
			return false
		}
		os, err := adm.FetchOffsets(testCtx(t), "g-durable")
		if err != nil {
			return false
		}
		var sum int64
		os.Each(func(o kadm.OffsetResponse) { sum += o.At })
		return sum == 150
	})
	m.close()
	prod.Close()
	if err := n.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	n2 := startGroupNode(t, dir)
	produceValues(t, newClient(t, n2), "durable", "second", 60)
	r2 := newReads()
	startMember(t, n2, "a", "g-durable", "durable", r2)
	waitFor(t, "the 60 new records", func() bool { return r2.distinct() == 60 })
	r2.checkOnce(t)
	r2.mu.Lock()
	defer r2.mu.Unlock()
	for v := range r2.by {
		if strings.HasPrefix(v, "first") {
			t.Fatalf("record %s was committed before the restart and read again", v)
		}
	}
}

// TestGroupRebalanceChurn has members join and leave while records flow. Members commit what they
// processed; at the end the group has read every record (none skipped past a committed offset), and
// no record was read by two members in one generation.
func TestGroupRebalanceChurn(t *testing.T) {
	n := startGroupNode(t, t.TempDir())
	adm := newAdmin(t, n)
	createTopic(t, adm, "churn", 6, nil)
	prod := newClient(t, n)
	r := newReads()
	ctx, cancel := context.WithCancel(testCtx(t))
	produced := make(chan []string, 1)
	go func() {
		var acked []string
		for i := 0; ctx.Err() == nil; i++ {
			recs := make([]*kgo.Record, 20)
			for j := range recs {
				recs[j] = &kgo.Record{Topic: "churn", Value: fmt.Appendf(nil, "c%03d-%02d", i, j)}
			}
			for _, res := range prod.ProduceSync(ctx, recs...) {
				if res.Err == nil {
					acked = append(acked, string(res.Record.Value))
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		produced <- acked
	}()
	var live []*member
	for round := range 8 {
		if round%3 == 2 && len(live) > 1 {
			live[0].close()
			live = live[1:]
		} else {
			live = append(live, startMember(t, n, fmt.Sprintf("m%d", round), "g-churn", "churn", r))
		}
		waitFor(t, "progress", func() bool { return r.distinct() > 40*(round+1) })
	}
	cancel()
	acked := <-produced
	if len(acked) == 0 {
		t.Fatal("no record was acknowledged during the churn")
	}
	waitFor(t, fmt.Sprintf("all %d acknowledged records", len(acked)), func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, v := range acked {
			if len(r.by[v]) == 0 {
				return false
			}
		}
		return true
	})

	r.mu.Lock()
	defer r.mu.Unlock()
	for v, rs := range r.by {
		seen := map[int32]string{}
		for _, b := range rs {
			if other, ok := seen[b.generation]; ok && other != b.member {
				t.Fatalf("%s read by %s and %s in generation %d", v, other, b.member, b.generation)
			}
			seen[b.generation] = b.member
		}
	}
}

func TestGroupSaramaConsumerGroup(t *testing.T) {
	n := startGroupNode(t, t.TempDir())
	adm := newAdmin(t, n)
	createTopic(t, adm, "sarama-group", 4, nil)
	produceValues(t, newClient(t, n, kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), "sarama-group", "s", 200)
	r := newReads()
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	var wg sync.WaitGroup
	for _, name := range []string{"sa", "sb"} {
		cfg := saramaConfig()
		cfg.ClientID = name
		cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
		cfg.Consumer.Group.Heartbeat.Interval = 100 * time.Millisecond
		cfg.Consumer.Group.Session.Timeout = 2 * time.Second
		cfg.Consumer.Group.Rebalance.Timeout = 3 * time.Second
		cfg.Consumer.Group.Rebalance.Retry.Backoff = 100 * time.Millisecond
		cg, err := sarama.NewConsumerGroup([]string{n.KafkaAddr()}, "g-sarama", cfg)
		if err != nil {
			t.Fatalf("sarama consumer group: %v", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cg.Close()
			h := saramaHandler{name: name, r: r}
			// Consume returns at every rebalance, sometimes with the error that ended the session
			// (REBALANCE_IN_PROGRESS); the loop joins again, as sarama's examples do.
			for ctx.Err() == nil {
				_ = cg.Consume(ctx, []string{"sarama-group"}, h)
			}
		}()
	}
	waitFor(t, "200 records", func() bool { return r.distinct() == 200 })
	stableWith(t, adm, "g-sarama", 2)
	cancel()
	wg.Wait()
	offsets, err := adm.FetchOffsets(testCtx(t), "g-sarama")
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	offsets.Each(func(o kadm.OffsetResponse) { sum += o.At })
	if sum != 200 {
		t.Fatalf("committed offsets sum to %d, want 200", sum)
	}
}

type saramaHandler struct {
	name string
	r    *reads
}

func (saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for msg := range c.Messages() {
		h.r.add(h.name, s.GenerationID(), []*kgo.Record{{Value: msg.Value}})
		s.MarkMessage(msg, "")
		s.Commit()
	}
	return nil
}

// TestGroupErrorCodes sends bad group requests with the raw protocol.
func TestGroupErrorCodes(t *testing.T) {
	n := startGroupNode(t, t.TempDir())
	createTopic(t, newAdmin(t, n), "known", 1, nil)
	rc := dialRaw(t, n)
	code := func(c int16) error { return kerr.ErrorForCode(c) }

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKey = 3, "g"
	if r := rc.do(fc).(*kmsg.FindCoordinatorResponse); r.ErrorCode != 0 || r.Port <= 0 {
		t.Fatalf("find coordinator: %+v", r)
	}

	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.ProtocolType = 5, "g", "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 10000, 10000
	proto := kmsg.NewJoinGroupRequestProtocol()
	proto.Name = "range"
	join.Protocols = append(join.Protocols, proto)
	jr := rc.do(join).(*kmsg.JoinGroupResponse)
	if err := code(jr.ErrorCode); !errors.Is(err, kerr.MemberIDRequired) || jr.MemberID == "" {
		t.Fatalf("join v5 without member id: %v %q", err, jr.MemberID)
	}
	join.MemberID = jr.MemberID
	jr = rc.do(join).(*kmsg.JoinGroupResponse)
	if jr.ErrorCode != 0 || jr.LeaderID != jr.MemberID || jr.Generation != 1 {
		t.Fatalf("join with the member id: %v %+v", code(jr.ErrorCode), jr)
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version, sync.Group, sync.MemberID, sync.Generation = 5, "g", jr.MemberID, jr.Generation
	if r := rc.do(sync).(*kmsg.SyncGroupResponse); r.ErrorCode != 0 {
		t.Fatalf("sync: %v", code(r.ErrorCode))
	}

	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.Generation = 4, "no-such-group", "m", 1
	if r := rc.do(hb).(*kmsg.HeartbeatResponse); !errors.Is(code(r.ErrorCode), kerr.UnknownMemberID) {
		t.Errorf("heartbeat to an unknown group: %v", code(r.ErrorCode))
	}
	hb.Group, hb.MemberID, hb.Generation = "g", jr.MemberID, jr.Generation+1
	if r := rc.do(hb).(*kmsg.HeartbeatResponse); !errors.Is(code(r.ErrorCode), kerr.IllegalGeneration) {
		t.Errorf("heartbeat with a wrong generation: %v", code(r.ErrorCode))
	}

	commit := func(gen int32, topic string, metadata string) error {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.MemberID, req.Generation = 8, "g", jr.MemberID, gen
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset, rp.Metadata = 1, &metadata
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return code(rc.do(req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode)
	}
	if err := commit(jr.Generation, "known", "ok"); err != nil {
		t.Errorf("good commit: %v", err)
	}
	if err := commit(jr.Generation+1, "known", "ok"); !errors.Is(err, kerr.IllegalGeneration) {
		t.Errorf("commit with a wrong generation: %v", err)
	}
	if err := commit(jr.Generation, "unknown-topic", "ok"); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("commit to an unknown topic: %v", err)
	}
	if err := commit(jr.Generation, "known", strings.Repeat("x", 65)); !errors.Is(err, kerr.OffsetMetadataTooLarge) {
		t.Errorf("commit with oversized metadata: %v", err)
	}

	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version, fetch.Group = 7, "g"
	fr := rc.do(fetch).(*kmsg.OffsetFetchResponse)
	if fr.ErrorCode != 0 || len(fr.Topics) != 1 || fr.Topics[0].Partitions[0].Offset != 1 || *fr.Topics[0].Partitions[0].Metadata != "ok" {
		t.Errorf("fetch all offsets: %v %+v", code(fr.ErrorCode), fr.Topics)
	}

	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version, del.Groups = 2, []string{"g", "no-such-group"}
	dr := rc.do(del).(*kmsg.DeleteGroupsResponse)
	if !errors.Is(code(dr.Groups[0].ErrorCode), kerr.NonEmptyGroup) || !errors.Is(code(dr.Groups[1].ErrorCode), kerr.GroupIDNotFound) {
		t.Errorf("delete groups: %v, %v", code(dr.Groups[0].ErrorCode), code(dr.Groups[1].ErrorCode))
	}

	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group = 4, "g"
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = jr.MemberID
	leave.Members = append(leave.Members, lm)
	if r := rc.do(leave).(*kmsg.LeaveGroupResponse); r.ErrorCode != 0 || r.Members[0].ErrorCode != 0 {
		t.Errorf("leave: %v %v", code(r.ErrorCode), code(r.Members[0].ErrorCode))
	}
	lg := kmsg.NewPtrListGroupsRequest()
	lg.Version, lg.StatesFilter = 4, []string{"empty"}
	if r := rc.do(lg).(*kmsg.ListGroupsResponse); r.ErrorCode != 0 || len(r.Groups) != 1 || r.Groups[0].Group != "g" {
		t.Errorf("list empty groups: %+v", r)
	}
	if dr := rc.do(del).(*kmsg.DeleteGroupsResponse); dr.Groups[0].ErrorCode != 0 {
		t.Errorf("delete the emptied group: %v", code(dr.Groups[0].ErrorCode))
	}
	if fr := rc.do(fetch).(*kmsg.OffsetFetchResponse); fr.ErrorCode != 0 || len(fr.Topics) != 0 {
		t.Errorf("offsets after delete: %+v", fr.Topics)
	}
}

// TestGroupOffsetsOfDeletedTopic: deleting a topic deletes every group's committed offsets of its
// partitions, as Kafka's coordinator does, so that a topic created again under its name starts
// without them (a consumer would otherwise skip the new topic's first records), and the deletion
// holds after a restart; the offsets of another topic stay.
func TestGroupOffsetsOfDeletedTopic(t *testing.T) {
	dir := t.TempDir()
	n := startGroupNode(t, dir)
	adm := newAdmin(t, n)
	ctx := testCtx(t)
	createTopic(t, adm, "gone", 2, nil)
	createTopic(t, adm, "kept", 1, nil)
	commit := func(group string, offsets map[string]map[int32]int64) {
		t.Helper()
		o := kadm.Offsets{}
		for topic, ps := range offsets {
			for p, at := range ps {
				o.Add(kadm.Offset{Topic: topic, Partition: p, At: at})
			}
		}
		resp, err := adm.CommitOffsets(ctx, group, o)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("commit %s: %v", group, err)
		}
	}
	commit("g1", map[string]map[int32]int64{"gone": {0: 5, 1: 7}, "kept": {0: 3}})
	commit("g2", map[string]map[int32]int64{"gone": {0: 1}})
	fetched := func(adm *kadm.Client) map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, g := range []string{"g1", "g2"} {
			resps, err := adm.FetchOffsets(ctx, g)
			if err != nil {
				t.Fatal(err)
			}
			resps.Each(func(r kadm.OffsetResponse) {
				out[fmt.Sprintf("%s/%s/%d", g, r.Topic, r.Partition)] = fmt.Sprint(r.At)
			})
		}
		return out
	}
	want := map[string]string{"g1/kept/0": "3"}
	if resp, err := adm.DeleteTopic(ctx, "gone"); err != nil || resp.Err != nil {
		t.Fatalf("delete: %v %v", err, resp.Err)
	}
	for got := fetched(adm); fmt.Sprint(got) != fmt.Sprint(want); got = fetched(adm) {
		if ctx.Err() != nil {
			t.Fatalf("offsets after the topic's deletion: %v, want %v", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	createTopic(t, adm, "gone", 2, nil)
	if got := fetched(adm); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("offsets once the topic is created again: %v, want %v", got, want)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = startGroupNode(t, dir)
	adm = newAdmin(t, n)
	for got := fetched(adm); fmt.Sprint(got) != fmt.Sprint(want); got = fetched(adm) {
		if ctx.Err() != nil {
			t.Fatalf("offsets after a restart: %v, want %v", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
