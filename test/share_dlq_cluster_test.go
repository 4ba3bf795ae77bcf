package test

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShareDeadLettersAcrossNodes: three `weir serve --share-groups` processes; a share group's
// source partition is led by node 1 and its dead-letter topic by node 2, so every dead-letter copy
// is a Produce from node 1 to node 2 over the inter-broker connection. Records a franz-go share
// consumer rejects arrive there with their payload and the weir.dlq.* headers. The dead-letter topic
// is named with the dlq. prefix and opts in with errors.deadletterqueue.group.enable=true (KIP-1191).
func TestShareDeadLettersAcrossNodes(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	ports := pickPorts(t, 3)
	voters := voterList(ports)
	nodes := make([]*node, 3)
	for i := range nodes {
		nodes[i] = newNode(t, nodeOptions{NodeID: int32(i + 1), Ports: ports[i], Voters: voters,
			Args: slices.Concat(clusterArgs, groupClusterArgs, []string{"--share-groups"})})
	}
	for _, n := range nodes {
		n.launch()
	}
	for _, n := range nodes {
		n.waitHealthy()
	}
	cl, err := kgo.NewClient(append(clusterClientOpts(nodes), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const topic, dlq, group = "dlq-src", "dlq.dlq-src", "sg-across"
	createPlaced(ctx, t, nodes[0], topic, []int32{1})
	createPlaced(ctx, t, nodes[0], dlq, []int32{2})
	md := waitAgree(ctx, t, nodes, fullISR(topic, dlq))
	if l := leaders(t, md, topic)[0]; l != 1 {
		t.Fatalf("%s led by %d, want 1", topic, l)
	}
	if l := leaders(t, md, dlq)[0]; l != 2 {
		t.Fatalf("%s led by %d, want 2", dlq, l)
	}

	// KIP-1191: a group may name only a topic that opts in as a dead-letter topic.
	enable := kmsg.NewPtrIncrementalAlterConfigsRequest()
	er := kmsg.NewIncrementalAlterConfigsRequestResource()
	er.ResourceType, er.ResourceName = kmsg.ConfigResourceTypeTopic, dlq
	ec := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	ec.Name, ec.Value = "errors.deadletterqueue.group.enable", kmsg.StringPtr("true")
	er.Configs = append(er.Configs, ec)
	enable.Resources = append(enable.Resources, er)
	waitFor(ctx, t, "the dead-letter topic enabled", func() bool {
		resp, err := enable.RequestWith(ctx, cl)
		return err == nil && resp.Resources[0].ErrorCode == 0
	})

	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for _, kv := range [][2]string{{"share.auto.offset.reset", "earliest"}, {"errors.deadletterqueue.topic.name", dlq}} {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = kv[0], kmsg.StringPtr(kv[1])
		rr.Configs = append(rr.Configs, c)
	}
	alter.Resources = append(alter.Resources, rr)
	waitFor(ctx, t, "the group configs set", func() bool {
		resp, err := alter.RequestWith(ctx, cl)
		return err == nil && resp.Resources[0].ErrorCode == 0
	})
	// Every node must know the configs before the share-partition starts at node 1.
	for _, n := range nodes {
		waitFor(ctx, t, "the group configs at every node", func() bool {
			req := kmsg.NewPtrDescribeConfigsRequest()
			dr := kmsg.NewDescribeConfigsRequestResource()
			dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
			dr.ConfigNames = []string{"errors.deadletterqueue.topic.name"}
			req.Resources = append(req.Resources, dr)
			resp, err := req.RequestWith(ctx, cl.Broker(int(n.id)))
			return err == nil && len(resp.Resources[0].Configs) == 1 && resp.Resources[0].Configs[0].Value != nil && *resp.Resources[0].Configs[0].Value == dlq
		})
	}

	values := []string{"keep", "drop-0", "drop-1"}
	for _, v := range values {
		r := &kgo.Record{Topic: topic, Key: []byte(v), Value: []byte("value-" + v)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	sc, err := kgo.NewClient(append(clusterClientOpts(nodes), kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
		kgo.FetchMaxWait(200*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	for acked := 0; acked < len(values); {
		fs := sc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("acknowledged %d of %d", acked, len(values))
		}
		for _, r := range fs.Records() {
			if string(r.Key) == "keep" {
				sc.MarkAcks(kgo.AckAccept, r)
			} else {
				sc.MarkAcks(kgo.AckReject, r)
			}
			acked++
		}
	}
	if err := sc.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}

	rd, err := kgo.NewClient(append(clusterClientOpts(nodes), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{dlq: {0: kgo.NewOffset().AtStart()}}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var got []*kgo.Record
	for len(got) < 2 {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d dead letters of 2", len(got))
		}
		got = append(got, fs.Records()...)
	}
	for i, want := range []string{"drop-0", "drop-1"} {
		r := got[i]
		h := map[string]string{}
		for _, kv := range r.Headers {
			h[kv.Key] = string(kv.Value)
		}
		if string(r.Key) != want || string(r.Value) != "value-"+want || h["weir.dlq.group"] != group ||
			h["weir.dlq.topic"] != topic || h["weir.dlq.offset"] != []string{"1", "2"}[i] || h["weir.dlq.reason"] != "rejected" {
			t.Fatalf("dead letter %d: key %q value %q headers %v", i, r.Key, r.Value, h)
		}
	}
}
