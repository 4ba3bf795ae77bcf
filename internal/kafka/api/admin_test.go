package api_test

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAPITopicAdmin drives topic admin through kadm. Listings after a change use a fresh admin
// client: kadm answers ListTopics from its client's metadata cache.
func TestAPITopicAdmin(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	ctx := testCtx(t)

	created, err := adm.CreateTopics(ctx, 3, 1, map[string]*string{"retention.ms": kadm.StringPtr("60000")}, "orders", "payments")
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	for _, c := range created.Sorted() {
		if c.Err != nil || c.NumPartitions != 3 || c.ID == [16]byte{} {
			t.Fatalf("created %s: err %v, %d partitions, id %v", c.Topic, c.Err, c.NumPartitions, c.ID)
		}
	}

	t.Run("errors", func(t *testing.T) {
		cases := []struct {
			topic      string
			partitions int32
			rf         int16
			want       error
		}{
			{"orders", 1, 1, kerr.TopicAlreadyExists},
			{"bad/name", 1, 1, kerr.InvalidTopicException},
			{"zero", 0, 1, kerr.InvalidPartitions},
			{"rf3", 1, 3, kerr.InvalidReplicationFactor},
			// 100,000 replicas on one node: over weir.max.partitions.per.broker, refused before any is made
			{"huge", 100_000, 1, kerr.PolicyViolation},
		}
		for _, c := range cases {
			resp, err := adm.CreateTopic(ctx, c.partitions, c.rf, nil, c.topic)
			if err == nil {
				err = resp.Err
			}
			if !errors.Is(err, c.want) {
				t.Errorf("create %q (%d partitions, rf %d): %v, want %v", c.topic, c.partitions, c.rf, err, c.want)
			}
		}
		resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": kadm.StringPtr("soon")}, "badconfig")
		if err == nil {
			err = resp.Err
		}
		if !errors.Is(err, kerr.InvalidConfig) {
			t.Errorf("create with a bad config: %v, want INVALID_CONFIG", err)
		}
	})

	t.Run("validateOnly", func(t *testing.T) {
		v, err := adm.ValidateCreateTopics(ctx, 2, 1, nil, "dry")
		if err != nil || v["dry"].Err != nil {
			t.Fatalf("validate: %v %v", err, v["dry"].Err)
		}
		topics, err := newAdmin(t, n).ListTopics(ctx)
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		if topics.Has("dry") {
			t.Fatal("validate-only create made the topic")
		}
	})

	t.Run("listDescribe", func(t *testing.T) {
		topics, err := adm.ListTopics(ctx)
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		if got := topics.Names(); len(got) != 2 || got[0] != "orders" || got[1] != "payments" {
			t.Fatalf("topics %v, want [orders payments]", got)
		}
		d := topics["orders"]
		if d.ID != created["orders"].ID || len(d.Partitions) != 3 {
			t.Fatalf("orders: id %v (created %v), %d partitions", d.ID, created["orders"].ID, len(d.Partitions))
		}
		for _, p := range d.Partitions {
			if p.Leader != 1 || len(p.Replicas) != 1 || len(p.ISR) != 1 || p.Err != nil {
				t.Fatalf("partition %+v", p)
			}
		}
	})

	t.Run("createPartitions", func(t *testing.T) {
		if _, err := adm.ValidateCreatePartitions(ctx, 2, "orders"); err != nil {
			t.Fatalf("validate: %v", err)
		}
		resp, err := adm.UpdatePartitions(ctx, 5, "orders")
		if err != nil || resp["orders"].Err != nil {
			t.Fatalf("update partitions: %v %v", err, resp["orders"].Err)
		}
		resp, err = adm.UpdatePartitions(ctx, 4, "orders")
		if err != nil || !errors.Is(resp["orders"].Err, kerr.InvalidPartitions) {
			t.Fatalf("shrink partitions: %v %v, want INVALID_PARTITIONS", err, resp["orders"].Err)
		}
		topics, err := newAdmin(t, n).ListTopics(ctx, "orders")
		if err != nil || len(topics["orders"].Partitions) != 5 {
			t.Fatalf("after growing: %v, %d partitions", err, len(topics["orders"].Partitions))
		}
		// The new partitions take records at once.
		cl := newClient(t, n)
		produceSync(t, cl, &kgo.Record{Topic: "orders", Partition: 4, Value: []byte("p4")})
	})

	t.Run("delete", func(t *testing.T) {
		resp, err := adm.DeleteTopics(ctx, "payments", "missing")
		if err != nil {
			t.Fatalf("delete: %v", err)
		}
		if resp["payments"].Err != nil || !errors.Is(resp["missing"].Err, kerr.UnknownTopicOrPartition) {
			t.Fatalf("delete results: payments %v, missing %v", resp["payments"].Err, resp["missing"].Err)
		}
		topics, err := newAdmin(t, n).ListTopics(ctx)
		if err != nil || topics.Has("payments") {
			t.Fatalf("after delete: %v, topics %v", err, topics.Names())
		}
		// A topic of the same name starts empty, with a new id.
		again, err := adm.CreateTopic(ctx, 1, 1, nil, "payments")
		if err != nil || again.Err != nil || again.ID == created["payments"].ID {
			t.Fatalf("recreate: %v %v, id %v (old %v)", err, again.Err, again.ID, created["payments"].ID)
		}
		ends, err := adm.ListEndOffsets(ctx, "payments")
		if err != nil {
			t.Fatalf("end offsets: %v", err)
		}
		if o, _ := ends.Lookup("payments", 0); o.Offset != 0 {
			t.Fatalf("recreated topic ends at %d", o.Offset)
		}
	})
}

func TestAPIConfigs(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	ctx := testCtx(t)
	createTopic(t, adm, "conf", 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})

	describe := func(name string) kadm.Config {
		t.Helper()
		rcs, err := adm.DescribeTopicConfigs(ctx, "conf")
		if err != nil {
			t.Fatalf("describe: %v", err)
		}
		rc, err := rcs.On("conf", nil)
		if err != nil || rc.Err != nil {
			t.Fatalf("describe conf: %v %v", err, rc.Err)
		}
		for _, c := range rc.Configs {
			if c.Key == name {
				return c
			}
		}
		t.Fatalf("config %s not described", name)
		return kadm.Config{}
	}
	if c := describe("cleanup.policy"); c.MaybeValue() != "compact" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("cleanup.policy %q from %v", c.MaybeValue(), c.Source)
	}
	if c := describe("retention.ms"); c.MaybeValue() != "604800000" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("retention.ms %q from %v", c.MaybeValue(), c.Source)
	}

	t.Run("incremental", func(t *testing.T) {
		resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
			{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("3600000")},
			{Op: kadm.DeleteConfig, Name: "cleanup.policy"},
		}, "conf")
		if err == nil {
			_, err = resp.On("conf", nil)
		}
		if err != nil || resp[0].Err != nil {
			t.Fatalf("alter: %v %v", err, resp[0].Err)
		}
		if c := describe("retention.ms"); c.MaybeValue() != "3600000" {
			t.Fatalf("retention.ms is %q after the change", c.MaybeValue())
		}
		if c := describe("cleanup.policy"); c.MaybeValue() != "delete" || c.Source != kmsg.ConfigSourceDefaultConfig {
			t.Fatalf("cleanup.policy %q from %v after the delete", c.MaybeValue(), c.Source)
		}
		bad, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "no.such.config", Value: kadm.StringPtr("1")}}, "conf")
		if err != nil || !errors.Is(bad[0].Err, kerr.InvalidConfig) {
			t.Fatalf("unknown config: %v %v, want INVALID_CONFIG", err, bad[0].Err)
		}
		v, err := adm.ValidateAlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("1")}}, "conf")
		if err != nil || v[0].Err != nil {
			t.Fatalf("validate alter: %v %v", err, v[0].Err)
		}
		if c := describe("retention.ms"); c.MaybeValue() != "3600000" {
			t.Fatalf("validate-only alter changed retention.ms to %q", c.MaybeValue())
		}
	})

	t.Run("replace", func(t *testing.T) {
		resp, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "segment.bytes", Value: kadm.StringPtr("1048576")}}, "conf")
		if err != nil || resp[0].Err != nil {
			t.Fatalf("alter state: %v %v", err, resp[0].Err)
		}
		if c := describe("segment.bytes"); c.MaybeValue() != "1048576" {
			t.Fatalf("segment.bytes %q", c.MaybeValue())
		}
		// AlterConfigs replaces the whole set: retention.ms returns to its default.
		if c := describe("retention.ms"); c.Source != kmsg.ConfigSourceDefaultConfig {
			t.Fatalf("retention.ms still set (%q) after a replacing alter", c.MaybeValue())
		}
	})

	t.Run("broker", func(t *testing.T) {
		resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.ms", Value: kadm.StringPtr("7200000")}})
		if err != nil || resp[0].Err != nil {
			t.Fatalf("alter broker: %v %v", err, resp[0].Err)
		}
		rcs, err := adm.DescribeBrokerConfigs(ctx)
		if err != nil || rcs[0].Err != nil {
			t.Fatalf("describe broker: %v %v", err, rcs[0].Err)
		}
		found := false
		for _, c := range rcs[0].Configs {
			if c.Key == "log.retention.ms" {
				found = c.MaybeValue() == "7200000"
			}
		}
		if !found {
			t.Fatal("log.retention.ms not described as 7200000")
		}
		// The topic without its own value inherits the broker's.
		if c := describe("retention.ms"); c.MaybeValue() != "7200000" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
			t.Fatalf("retention.ms %q from %v, want the broker's 7200000", c.MaybeValue(), c.Source)
		}
		other, err := adm.DescribeBrokerConfigs(ctx, 7)
		if err == nil {
			err = other[0].Err
		}
		if err == nil {
			t.Fatal("describing broker 7 of a one-node cluster succeeded")
		}
	})
}

func TestAPIDeleteRecords(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	ctx := testCtx(t)
	createTopic(t, adm, "trim", 1, nil)
	cl := newClient(t, n, kgo.DefaultProduceTopic("trim"))
	for i := range 10 {
		produceSync(t, cl, &kgo.Record{Value: []byte{byte('0' + i)}})
	}
	var os kadm.Offsets
	os.AddOffset("trim", 0, 4, -1)
	resp, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatalf("delete records: %v", err)
	}
	r, _ := resp.Lookup("trim", 0)
	if r.Err != nil || r.LowWatermark != 4 {
		t.Fatalf("delete records: %v, low watermark %d", r.Err, r.LowWatermark)
	}
	starts, err := adm.ListStartOffsets(ctx, "trim")
	if err != nil {
		t.Fatalf("start offsets: %v", err)
	}
	if s, _ := starts.Lookup("trim", 0); s.Offset != 4 {
		t.Fatalf("start offset %d after deleting below 4", s.Offset)
	}
	got := consumeN(t, n, "trim", kgo.NewOffset().AtStart(), 6)
	if got[0].Offset != 4 || string(got[0].Value) != "4" {
		t.Fatalf("first record after delete: offset %d %q", got[0].Offset, got[0].Value)
	}
	os = kadm.Offsets{}
	os.AddOffset("trim", 0, 11, -1)
	resp, err = adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatalf("delete records: %v", err)
	}
	if r, _ := resp.Lookup("trim", 0); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("delete past the high watermark: %v, want OFFSET_OUT_OF_RANGE", r.Err)
	}
}

func TestAPIAutoCreate(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	ctx := testCtx(t)
	cl := newClient(t, n, kgo.AllowAutoTopicCreation())
	produceSync(t, cl, &kgo.Record{Topic: "auto", Value: []byte("v")})
	topics, err := adm.ListTopics(ctx, "auto")
	if err != nil || !topics.Has("auto") || len(topics["auto"].Partitions) != 1 {
		t.Fatalf("auto-created topic: %v %v", err, topics)
	}

	resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "auto.create.topics.enable", Value: kadm.StringPtr("false")}})
	if err != nil || resp[0].Err != nil {
		t.Fatalf("turn auto-create off: %v %v", err, resp[0].Err)
	}
	rc := dialRaw(t, n)
	p := produceRaw(t, rc, 9, "not-created", 0, testBatch(batchSpec{values: []string{"v"}}))
	if p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("produce to a missing topic with auto-create off: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 1
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("not-created")
	md.Topics = append(md.Topics, rt)
	mr := rc.do(md).(*kmsg.MetadataResponse)
	if len(mr.Topics) != 1 || mr.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("metadata v1 for a missing topic with auto-create off: %+v", mr.Topics)
	}
}

func TestAPIDescribeCluster(t *testing.T) {
	n := startNode(t)
	rc := dialRaw(t, n)
	for v := int16(0); v <= 1; v++ {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version = v
		req.EndpointType = 1
		resp := rc.do(req).(*kmsg.DescribeClusterResponse)
		if resp.ErrorCode != 0 || resp.ControllerID != 1 || len(resp.Brokers) != 1 || resp.ClusterID == "" {
			t.Fatalf("v%d: %+v", v, resp)
		}
		if b := resp.Brokers[0]; b.NodeID != 1 || b.Host != "127.0.0.1" || b.Port == 0 {
			t.Fatalf("v%d broker %+v", v, b)
		}
	}
}
