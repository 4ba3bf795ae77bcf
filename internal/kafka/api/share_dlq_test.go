package api_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/server"
)

// groupConfigOp is one IncrementalAlterConfigs operation on a group config.
type groupConfigOp struct {
	name  string
	op    kmsg.IncrementalAlterConfigOp
	value string
}

// alterGroupConfigs runs IncrementalAlterConfigs on group and returns the resource's error code.
func alterGroupConfigs(t *testing.T, cl *kgo.Client, group string, ops ...groupConfigOp) int16 {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for _, o := range ops {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op = o.name, o.op
		if o.op != kmsg.IncrementalAlterConfigOpDelete {
			c.Value = kmsg.StringPtr(o.value)
		}
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil || len(resp.Resources) != 1 {
		t.Fatalf("alter group configs: %v %+v", err, resp)
	}
	return resp.Resources[0].ErrorCode
}

// setGroupConfigs sets group configs, failing the test on any error.
func setGroupConfigs(t *testing.T, cl *kgo.Client, group string, kv ...string) {
	t.Helper()
	var ops []groupConfigOp
	for i := 0; i+1 < len(kv); i += 2 {
		ops = append(ops, groupConfigOp{kv[i], kmsg.IncrementalAlterConfigOpSet, kv[i+1]})
	}
	if code := alterGroupConfigs(t, cl, group, ops...); code != 0 {
		t.Fatalf("set %v on %s: %v", kv, group, kerr.ErrorForCode(code))
	}
}

// describedGroupConfig is one described group config.
type describedGroupConfig struct {
	value  string
	source kmsg.ConfigSource
}

// describeGroupConfigs returns every config of group as DescribeConfigs describes it.
func describeGroupConfigs(t *testing.T, cl *kgo.Client, group string) map[string]describedGroupConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil || len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("describe group configs: %v %+v", err, resp)
	}
	out := map[string]describedGroupConfig{}
	for _, c := range resp.Resources[0].Configs {
		out[c.Name] = describedGroupConfig{value: deref(c.Value), source: c.Source}
	}
	return out
}

// TestShareGroupConfigs: IncrementalAlterConfigs sets and deletes a group's share configs and
// DescribeConfigs shows them (GROUP_CONFIG) over the defaults; unknown names, values out of Kafka's
// ranges, a list operation and the legacy AlterConfigs are refused with Kafka's codes and change
// nothing; the group's lock duration is what ShareFetch answers for its share-partitions, and its
// heartbeat interval what ShareGroupHeartbeat answers its members.
func TestShareGroupConfigs(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	cl := newClient(t, n)
	const group, topic = "sg-configs", "share-configs"
	createTopic(t, adm, topic, 1, nil)

	defaults := describeGroupConfigs(t, cl, group)
	for name, want := range map[string]string{"share.record.lock.duration.ms": "30000", "share.delivery.count.limit": "5",
		"share.auto.offset.reset": "latest", "errors.deadletterqueue.topic.name": "", "share.partition.max.record.locks": "2000",
		"share.renew.acknowledge.enable": "false", "share.session.timeout.ms": "45000", "share.heartbeat.interval.ms": "5000",
		"weir.share.key.ordered": "false", "errors.deadletterqueue.copy.record.enable": "true"} {
		if got := defaults[name]; got.value != want || got.source != kmsg.ConfigSourceDefaultConfig {
			t.Fatalf("default %s = %+v, want %q DEFAULT_CONFIG", name, got, want)
		}
	}

	setGroupConfigs(t, cl, group, "share.record.lock.duration.ms", "20000", "share.delivery.count.limit", "3",
		"share.auto.offset.reset", "earliest", "errors.deadletterqueue.topic.name", "dlq.configs",
		"share.partition.max.record.locks", "100", "share.renew.acknowledge.enable", "TRUE",
		"share.session.timeout.ms", "60000", "share.heartbeat.interval.ms", "15000", "weir.share.key.ordered", "true")
	set := describeGroupConfigs(t, cl, group)
	for name, want := range map[string]string{"share.record.lock.duration.ms": "20000", "share.delivery.count.limit": "3",
		"share.auto.offset.reset": "earliest", "errors.deadletterqueue.topic.name": "dlq.configs",
		"share.partition.max.record.locks": "100", "share.renew.acknowledge.enable": "true",
		"share.session.timeout.ms": "60000", "share.heartbeat.interval.ms": "15000", "weir.share.key.ordered": "true"} {
		if got := set[name]; got.value != want || got.source != kmsg.ConfigSourceGroupConfig {
			t.Fatalf("%s = %+v, want %q GROUP_CONFIG", name, got, want)
		}
	}
	if other := describeGroupConfigs(t, cl, "sg-other"); other["share.delivery.count.limit"].value != "5" {
		t.Fatalf("another group sees %+v", other["share.delivery.count.limit"])
	}

	good := groupConfigOp{"share.delivery.count.limit", kmsg.IncrementalAlterConfigOpSet, "4"}
	for _, bad := range []groupConfigOp{
		{"share.no.such.config", kmsg.IncrementalAlterConfigOpSet, "1"},
		{"share.delivery.count.limit", kmsg.IncrementalAlterConfigOpSet, "1"},
		{"share.delivery.count.limit", kmsg.IncrementalAlterConfigOpSet, "11"},
		{"share.record.lock.duration.ms", kmsg.IncrementalAlterConfigOpSet, "1000"},
		{"share.record.lock.duration.ms", kmsg.IncrementalAlterConfigOpSet, "soon"},
		{"share.auto.offset.reset", kmsg.IncrementalAlterConfigOpSet, "middle"},
		{"share.auto.offset.reset", kmsg.IncrementalAlterConfigOpSet, "by_duration:PT-1H"},
		{"share.auto.offset.reset", kmsg.IncrementalAlterConfigOpSet, "by_duration:1h"},
		{"errors.deadletterqueue.topic.name", kmsg.IncrementalAlterConfigOpSet, "__consumer_offsets"},
		{"errors.deadletterqueue.topic.name", kmsg.IncrementalAlterConfigOpSet, "no/slashes"},
		{"errors.deadletterqueue.topic.name", kmsg.IncrementalAlterConfigOpAppend, "x"},
		{"share.no.such.config", kmsg.IncrementalAlterConfigOpDelete, ""},
		{"share.partition.max.record.locks", kmsg.IncrementalAlterConfigOpSet, "99"},
		{"share.partition.max.record.locks", kmsg.IncrementalAlterConfigOpSet, "10001"},
		{"share.renew.acknowledge.enable", kmsg.IncrementalAlterConfigOpSet, "yes"},
		{"share.session.timeout.ms", kmsg.IncrementalAlterConfigOpSet, "44999"},
		{"share.session.timeout.ms", kmsg.IncrementalAlterConfigOpSet, "60001"},
		{"share.heartbeat.interval.ms", kmsg.IncrementalAlterConfigOpSet, "4999"},
		{"share.heartbeat.interval.ms", kmsg.IncrementalAlterConfigOpSet, "15001"},
		{"weir.share.key.ordered", kmsg.IncrementalAlterConfigOpSet, "1"},
	} {
		ops := []groupConfigOp{bad}
		if bad.name != good.name {
			ops = append(ops, good)
		}
		if code := alterGroupConfigs(t, cl, group, ops...); code != kerr.InvalidConfig.Code {
			t.Errorf("%v: %v, want INVALID_CONFIG", bad, kerr.ErrorForCode(code))
		}
	}
	if after := describeGroupConfigs(t, cl, group); fmt.Sprint(after) != fmt.Sprint(set) {
		t.Fatalf("refused changes changed the group: %v, was %v", after, set)
	}

	legacy := kmsg.NewPtrAlterConfigsRequest()
	lr := kmsg.NewAlterConfigsRequestResource()
	lr.ResourceType, lr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	legacy.Resources = append(legacy.Resources, lr)
	if resp, err := legacy.RequestWith(testCtx(t), cl); err != nil || resp.Resources[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("legacy AlterConfigs of a group: %v %+v, want INVALID_REQUEST", err, resp)
	}

	id := topicID(t, adm, topic)
	if resp := doShareFetch(t, cl, shareFetchReq(group, "m", 0, id)); resp.ErrorCode != 0 || resp.AcquisitionLockTimeoutMillis != 20000 {
		t.Fatalf("share fetch: code %d lock %d ms, want the group's 20000", resp.ErrorCode, resp.AcquisitionLockTimeoutMillis)
	}
	if interval := shareJoin(t, cl, group, "hb", topic); interval != 15000 {
		t.Fatalf("ShareGroupHeartbeat answered interval %d ms, want the group's 15000", interval)
	}

	if code := alterGroupConfigs(t, cl, group, groupConfigOp{"share.record.lock.duration.ms", kmsg.IncrementalAlterConfigOpDelete, ""}); code != 0 {
		t.Fatalf("delete: %v", kerr.ErrorForCode(code))
	}
	if got := describeGroupConfigs(t, cl, group)["share.record.lock.duration.ms"]; got.value != "30000" || got.source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("after delete: %+v, want the default", got)
	}
}

// shareJoin joins member to group on topic with a ShareGroupHeartbeat and returns the heartbeat
// interval answered.
func shareJoin(t *testing.T, cl *kgo.Client, group, member, topic string) int32 {
	t.Helper()
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.MemberEpoch, hb.SubscribedTopicNames = group, member, 0, []string{topic}
	resp, err := hb.RequestWith(testCtx(t), cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("join %s: %+v, %v", group, resp, err)
	}
	return resp.HeartbeatIntervalMillis
}

// deadLetter is what a test expects of one dead-letter copy.
type deadLetter struct {
	count  string
	reason string
}

// shareDeadLetterGroup sets up a share group on a new 1-partition topic with a delivery limit of 2,
// earliest start, and dlq as its dead-letter topic, which the cluster creates on first use; it returns
// a producer.
func shareDeadLetterGroup(t *testing.T, n *server.Node, topic, group, dlq string) *kgo.Client {
	t.Helper()
	adm := newAdmin(t, n)
	setClusterConfig(t, adm, "errors.deadletterqueue.auto.create.topics.enable", "true")
	createTopic(t, adm, topic, 1, nil)
	setGroupConfigs(t, newClient(t, n), group, "share.delivery.count.limit", "2", "share.auto.offset.reset", "earliest",
		"errors.deadletterqueue.topic.name", dlq)
	return newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
}

// TestShareGroupDeadLetters: records a franz-go share consumer rejects, and a record it releases at
// each of its 2 allowed deliveries, are copied to the group's dead-letter topic (created on first use,
// with errors.deadletterqueue.group.enable=true) with their key, value, headers and timestamp and the weir.dlq.* headers; accepted records are not.
func TestShareGroupDeadLetters(t *testing.T) {
	n := startNode(t)
	const topic, group, dlq = "orders", "sg-dlq", "dlq.orders"
	prod := shareDeadLetterGroup(t, n, topic, group, dlq)
	ts := time.UnixMilli(time.Now().Add(-time.Hour).UnixMilli())
	values := []string{"ok-0", "rej-0", "poison", "rej-1", "ok-1"}
	for _, v := range values {
		r := &kgo.Record{Topic: topic, Partition: 0, Key: []byte("k-" + v), Value: []byte(v), Timestamp: ts,
			Headers: []kgo.RecordHeader{{Key: "app", Value: []byte("h-" + v)}}}
		if err := prod.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}

	c := shareConsumer(t, n, group, topic)
	ctx := testCtx(t)
	finished := map[string]bool{}
	for len(finished) < len(values) {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("finished %v of %v", finished, values)
		}
		for _, r := range fs.Records() {
			v := string(r.Value)
			switch {
			case strings.HasPrefix(v, "rej"):
				c.MarkAcks(kgo.AckReject, r)
				finished[v] = true
			case v == "poison":
				c.MarkAcks(kgo.AckRelease, r)
				finished[v] = r.DeliveryCount() == 2
			default:
				c.MarkAcks(kgo.AckAccept, r)
				finished[v] = true
			}
		}
		for v, done := range finished {
			if !done {
				delete(finished, v)
			}
		}
	}
	if err := c.FlushAcks(ctx); err != nil {
		t.Fatalf("flush acks: %v", err)
	}

	want := map[string]deadLetter{"rej-0": {"1", "rejected"}, "rej-1": {"1", "rejected"}, "poison": {"2", "delivery-limit"}}
	offsets := map[string]int64{"ok-0": 0, "rej-0": 1, "poison": 2, "rej-1": 3, "ok-1": 4}
	got := readDeadLetters(t, n, dlq, len(want))
	for _, r := range got {
		v := string(r.Value)
		w, ok := want[v]
		if !ok {
			t.Fatalf("dead letter %q not expected", v)
		}
		delete(want, v)
		if string(r.Key) != "k-"+v || !r.Timestamp.Equal(ts) {
			t.Errorf("%s: key %q timestamp %v, want %q %v", v, r.Key, r.Timestamp, "k-"+v, ts)
		}
		h := map[string]string{}
		for _, kv := range r.Headers {
			h[kv.Key] = string(kv.Value)
		}
		wantHeaders := map[string]string{"app": "h-" + v, "weir.dlq.group": group, "weir.dlq.topic": topic,
			"weir.dlq.partition": "0", "weir.dlq.offset": fmt.Sprint(offsets[v]), "weir.dlq.delivery-count": w.count,
			"weir.dlq.reason": w.reason}
		if fmt.Sprint(h) != fmt.Sprint(wantHeaders) {
			t.Errorf("%s: headers %v, want %v", v, h, wantHeaders)
		}
		if r.Headers[0].Key != "app" {
			t.Errorf("%s: the record's own header is not first: %v", v, r.Headers)
		}
	}
	if flag := topicConfig(t, newAdmin(t, n), dlq, "errors.deadletterqueue.group.enable"); flag != "true" {
		t.Fatalf("the dead-letter topic created on first use has errors.deadletterqueue.group.enable=%s, want true", flag)
	}
}

// TestShareGroupDeadLetterMetadataOnly: with errors.deadletterqueue.copy.record.enable=false (Kafka's
// default; weir's is true) a rejected record's dead letter has no key, value or headers of its own,
// only its timestamp and the weir.dlq.* headers.
func TestShareGroupDeadLetterMetadataOnly(t *testing.T) {
	n := startNode(t)
	const topic, group, dlq = "payments", "sg-dlq-meta", "dlq.payments"
	prod := shareDeadLetterGroup(t, n, topic, group, dlq)
	setGroupConfigs(t, newClient(t, n), group, "errors.deadletterqueue.copy.record.enable", "false")
	r := &kgo.Record{Topic: topic, Partition: 0, Key: []byte("card"), Value: []byte("4111-secret"),
		Headers: []kgo.RecordHeader{{Key: "app", Value: []byte("h")}}}
	if err := prod.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	c := shareConsumer(t, n, group, topic)
	got := pollValue(t, c, "4111-secret")
	c.MarkAcks(kgo.AckReject, got)
	if err := c.FlushAcks(testCtx(t)); err != nil {
		t.Fatalf("flush acks: %v", err)
	}
	dl := readDeadLetters(t, n, dlq, 1)[0]
	if dl.Key != nil || dl.Value != nil {
		t.Fatalf("dead letter key %q value %q, want none", dl.Key, dl.Value)
	}
	h := map[string]string{}
	for _, kv := range dl.Headers {
		h[kv.Key] = string(kv.Value)
	}
	want := map[string]string{"weir.dlq.group": group, "weir.dlq.topic": topic, "weir.dlq.partition": "0",
		"weir.dlq.offset": "0", "weir.dlq.delivery-count": "1", "weir.dlq.reason": "rejected"}
	if fmt.Sprint(h) != fmt.Sprint(want) {
		t.Fatalf("headers %v, want %v", h, want)
	}
}

// readDeadLetters reads want records from the start of dlq and then checks, for a moment, that no
// more arrive.
func readDeadLetters(t *testing.T, n *server.Node, dlq string, want int) []*kgo.Record {
	t.Helper()
	cl := newClient(t, n, kgo.ConsumeTopics(dlq), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []*kgo.Record
	ctx := testCtx(t)
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d dead letters of %d", len(got), want)
		}
		got = append(got, fs.Records()...)
	}
	more, cancel := context.WithTimeout(ctx, 700*time.Millisecond)
	defer cancel()
	if extra := cl.PollFetches(more).Records(); len(extra) > 0 {
		t.Fatalf("%d dead letters more than the %d expected: %q", len(extra), want, extra[0].Value)
	}
	return got
}

// acquireOnce fetches for member at epoch until it acquires offset 0 and returns the next epoch and the
// delivery count.
func acquireOnce(t *testing.T, cl *kgo.Client, group, member string, epoch int32, id [16]byte) (int32, int16) {
	t.Helper()
	ctx := testCtx(t)
	for ; ctx.Err() == nil; epoch++ {
		resp := doShareFetch(t, cl, shareFetchReq(group, member, epoch, id))
		if resp.ErrorCode != 0 {
			t.Fatalf("share fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		for _, tp := range resp.Topics {
			for _, p := range tp.Partitions {
				for _, a := range p.AcquiredRecords {
					if a.FirstOffset == 0 {
						return epoch + 1, a.DeliveryCount
					}
				}
			}
		}
	}
	t.Fatal("offset 0 never acquired")
	return 0, 0
}

// TestShareGroupDeadLetterLockExpiry: a record whose lock expires at its last allowed delivery (the
// group's limit of 2, a broker lock of 1 s) is archived by the expiry and copied to the dead-letter
// topic with reason delivery-limit.
func TestShareGroupDeadLetterLockExpiry(t *testing.T) {
	cfg := nodeConfig(t.TempDir())
	cfg.SharePartition.LockDuration = time.Second
	n := startNodeWith(t, cfg)
	const topic, group, dlq = "expiring", "sg-expiring", "dlq.expiring"
	prod := shareDeadLetterGroup(t, n, topic, group, dlq)
	id := topicID(t, newAdmin(t, n), topic)
	raw := newClient(t, n)
	if err := prod.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Partition: 0, Value: []byte("slow")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	epoch, count := acquireOnce(t, raw, group, "a", 0, id)
	if count != 1 {
		t.Fatalf("first delivery count %d", count)
	}
	if _, count = acquireOnce(t, raw, group, "a", epoch, id); count != 2 {
		t.Fatalf("delivery count after the lock expired: %d, want 2", count)
	}
	r := readDeadLetters(t, n, dlq, 1)[0]
	h := map[string]string{}
	for _, kv := range r.Headers {
		h[kv.Key] = string(kv.Value)
	}
	if string(r.Value) != "slow" || h["weir.dlq.reason"] != "delivery-limit" || h["weir.dlq.delivery-count"] != "2" {
		t.Fatalf("dead letter %q headers %v", r.Value, h)
	}
}

// TestShareGroupDeadLetterCopyFails: while the dead-letter topic refuses the copy (acks=all on a
// topic of 1 replica with min.insync.replicas 2), a rejection is answered COORDINATOR_NOT_AVAILABLE
// and does not happen: the record stays acquired, and the same rejection succeeds once the topic takes
// copies, with exactly one copy.
func TestShareGroupDeadLetterCopyFails(t *testing.T) {
	n := startNode(t)
	const topic, group, dlq = "refused", "sg-refused", "dlq.refused"
	prod := shareDeadLetterGroup(t, n, topic, group, dlq)
	adm := newAdmin(t, n)
	two, on := "2", "true"
	createTopic(t, adm, dlq, 1, map[string]*string{"min.insync.replicas": &two, "errors.deadletterqueue.group.enable": &on})
	id := topicID(t, adm, topic)
	raw := newClient(t, n)
	if err := prod.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Partition: 0, Value: []byte("bad")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	epoch, _ := acquireOnce(t, raw, group, "a", 0, id)
	resp := doShareFetch(t, raw, shareFetchReq(group, "a", epoch, id, ackBatch(0, 0, 3)))
	if code := resp.Topics[0].Partitions[0].AcknowledgeErrorCode; code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("reject with the copy refused: %v, want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(code))
	}
	one := "1"
	if _, err := adm.AlterTopicConfigs(testCtx(t), []kadm.AlterConfig{{Name: "min.insync.replicas", Value: &one}}, dlq); err != nil {
		t.Fatal(err)
	}
	resp = doShareFetch(t, raw, shareFetchReq(group, "a", epoch+1, id, ackBatch(0, 0, 3)))
	if code := resp.Topics[0].Partitions[0].AcknowledgeErrorCode; code != 0 {
		t.Fatalf("reject once the copy is taken: %v", kerr.ErrorForCode(code))
	}
	if r := readDeadLetters(t, n, dlq, 1)[0]; string(r.Value) != "bad" {
		t.Fatalf("dead letter %q", r.Value)
	}
}

// TestShareGroupConfigChangeApplies: lowering a live group's delivery limit applies to its
// share-partitions at their next operation: a record released once under the default limit of 5 is
// archived, and copied to the dead-letter topic, when it is released at its second delivery after the
// group's limit became 2.
func TestShareGroupConfigChangeApplies(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	cl := newClient(t, n)
	const topic, group, dlq = "changing", "sg-changing", "dlq.changing"
	setClusterConfig(t, adm, "errors.deadletterqueue.auto.create.topics.enable", "true")
	createTopic(t, adm, topic, 1, nil)
	setGroupConfigs(t, cl, group, "share.auto.offset.reset", "earliest", "errors.deadletterqueue.topic.name", dlq)
	id := topicID(t, adm, topic)
	if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Partition: 0, Value: []byte("twice")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	epoch, _ := acquireOnce(t, cl, group, "a", 0, id)
	// released with ShareAcknowledge, which acquires nothing again
	resp, err := shareAckReq(group, "a", epoch, id, [3]int64{0, 0, 2}).RequestWith(testCtx(t), cl)
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("release: %+v, %v", resp, err)
	}
	setGroupConfigs(t, cl, group, "share.delivery.count.limit", "2")
	epoch, count := acquireOnce(t, cl, group, "a", epoch+1, id)
	if count != 2 {
		t.Fatalf("second delivery count %d", count)
	}
	if code := doShareFetch(t, cl, shareFetchReq(group, "a", epoch, id, ackBatch(0, 0, 2))).Topics[0].Partitions[0].AcknowledgeErrorCode; code != 0 {
		t.Fatalf("release: %v", kerr.ErrorForCode(code))
	}
	r := readDeadLetters(t, n, dlq, 1)[0]
	if string(r.Value) != "twice" {
		t.Fatalf("dead letter %q", r.Value)
	}
}

// TestShareGroupDeadLetterTopicMissing: errors.deadletterqueue.auto.create.topics.enable is false by
// default (Kafka's), and while it is, a rejection whose dead-letter topic does not exist is archived
// with no copy (the broker logs and counts it), even with auto.create.topics.enable on: answered OK,
// the topic not created, the record not handed out again.
func TestShareGroupDeadLetterTopicMissing(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	cfgs, err := adm.DescribeBrokerConfigs(testCtx(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"errors.deadletterqueue.auto.create.topics.enable": "false", "auto.create.topics.enable": "true"}
	for _, rc := range cfgs {
		for _, c := range rc.Configs {
			if v, ok := want[c.Key]; ok && c.MaybeValue() != v {
				t.Errorf("%s = %q, want %s by default", c.Key, c.MaybeValue(), v)
			}
			delete(want, c.Key)
		}
	}
	if len(want) > 0 {
		t.Errorf("broker configs not described: %v", want)
	}
	const topic, group, dlq = "nowhere", "sg-nowhere", "dlq.nowhere"
	prod := shareDeadLetterGroup(t, n, topic, group, dlq)
	setClusterConfig(t, adm, "errors.deadletterqueue.auto.create.topics.enable", "false")
	id := topicID(t, adm, topic)
	raw := newClient(t, n)
	if err := prod.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Partition: 0, Value: []byte("bad")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	epoch, _ := acquireOnce(t, raw, group, "a", 0, id)
	resp := doShareFetch(t, raw, shareFetchReq(group, "a", epoch, id, ackBatch(0, 0, 3)))
	if code := resp.Topics[0].Partitions[0].AcknowledgeErrorCode; code != 0 {
		t.Fatalf("reject: %v", kerr.ErrorForCode(code))
	}
	if again := doShareFetch(t, raw, shareFetchReq(group, "a", epoch+1, id)); len(again.Topics) > 0 && len(again.Topics[0].Partitions[0].AcquiredRecords) > 0 {
		t.Fatalf("archived records handed out again: %+v", again.Topics[0].Partitions[0].AcquiredRecords)
	}
	tds, err := adm.ListTopics(testCtx(t), dlq)
	if err != nil {
		t.Fatal(err)
	}
	if tds.Has(dlq) {
		t.Fatalf("the dead-letter topic was created: %+v", tds[dlq])
	}
	if v := metricValue(t, n.HTTPAddr(), `weir_share_dead_letters_dropped_total{reason="missing"}`); v != 1 {
		t.Fatalf("dead letters dropped for a missing topic: %v, want 1", v)
	}
}

// TestShareGroupNodeDefaults: a node's share settings (weir serve --share-record-lock-duration,
// --share-delivery-count-limit, ...) are its read-only broker configs, the defaults its groups describe
// and what a group that sets nothing gets.
func TestShareGroupNodeDefaults(t *testing.T) {
	cfg := nodeConfig(t.TempDir())
	cfg.SharePartition.LockDuration, cfg.SharePartition.DeliveryCountLimit, cfg.SharePartition.RecordLocksMax = 20*time.Second, 3, 500
	cfg.ShareGroup.SessionTimeout, cfg.ShareGroup.HeartbeatInterval = 50*time.Second, 6*time.Second
	cfg.ShareState.StatePartitions = 7
	n := startNodeWith(t, cfg)
	adm := newAdmin(t, n)
	cl := newClient(t, n)
	const group, topic = "sg-node-defaults", "share-node-defaults"
	createTopic(t, adm, topic, 1, nil)

	broker, err := adm.DescribeBrokerConfigs(testCtx(t), cfg.NodeID)
	if err != nil {
		t.Fatal(err)
	}
	static, defaults := map[string]string{}, map[string]string{}
	for _, rc := range broker {
		for _, c := range rc.Configs {
			switch {
			case c.Value == nil:
			case c.Source == kmsg.ConfigSourceStaticBrokerConfig:
				static[c.Key] = *c.Value
			case c.Source == kmsg.ConfigSourceDefaultConfig:
				defaults[c.Key] = *c.Value
			}
		}
	}
	for k, want := range map[string]string{"group.share.record.lock.duration.ms": "20000", "group.share.delivery.count.limit": "3",
		"group.share.partition.max.record.locks": "500", "share.coordinator.state.topic.num.partitions": "7",
		"group.share.session.timeout.ms": "50000", "group.share.heartbeat.interval.ms": "6000"} {
		if static[k] != want {
			t.Errorf("broker config %s = %q, want %q STATIC_BROKER_CONFIG", k, static[k], want)
		}
	}
	for k, want := range map[string]string{"group.share.min.record.lock.duration.ms": "15000", "group.share.max.record.lock.duration.ms": "60000",
		"group.share.min.session.timeout.ms": "45000", "group.share.max.session.timeout.ms": "60000",
		"group.share.min.heartbeat.interval.ms": "5000", "group.share.max.heartbeat.interval.ms": "15000"} {
		if defaults[k] != want {
			t.Errorf("broker config %s = %q, want %q DEFAULT_CONFIG", k, defaults[k], want)
		}
	}
	described := describeGroupConfigs(t, cl, group)
	for name, want := range map[string]string{"share.record.lock.duration.ms": "20000", "share.delivery.count.limit": "3",
		"share.partition.max.record.locks": "500", "share.session.timeout.ms": "50000", "share.heartbeat.interval.ms": "6000"} {
		if got := described[name]; got.value != want || got.source != kmsg.ConfigSourceDefaultConfig {
			t.Errorf("group default %s = %+v, want %q DEFAULT_CONFIG", name, got, want)
		}
	}
	id := topicID(t, adm, topic)
	if resp := doShareFetch(t, cl, shareFetchReq(group, "m", 0, id)); resp.ErrorCode != 0 || resp.AcquisitionLockTimeoutMillis != 20000 {
		t.Fatalf("share fetch: code %d lock %d ms, want the node's 20000", resp.ErrorCode, resp.AcquisitionLockTimeoutMillis)
	}
	if interval := shareJoin(t, cl, group, "hb", topic); interval != 6000 {
		t.Fatalf("ShareGroupHeartbeat answered interval %d ms, want the node's 6000", interval)
	}
}

// setClusterConfig sets a cluster-wide broker config, as kafka-configs.sh --entity-default does.
func setClusterConfig(t *testing.T, adm *kadm.Client, name, value string) {
	t.Helper()
	if _, err := adm.AlterBrokerConfigs(testCtx(t), []kadm.AlterConfig{{Name: name, Value: &value}}); err != nil {
		t.Fatalf("set %s=%s: %v", name, value, err)
	}
}
