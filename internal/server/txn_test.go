package server_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/server"
	"github.com/weir-mq/weir/internal/txn"
)

// TestServerTxnMarkersAcrossNodes: on three nodes, a transaction over partitions led by every node
// ends with a marker at each leader: the coordinator writes its own partitions' markers directly and
// sends WriteTxnMarkers to the other two.
func TestServerTxnMarkersAcrossNodes(t *testing.T) {
	ctx := testCtx(t)
	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	voters := "1@" + addrs[0] + ",2@" + addrs[1] + ",3@" + addrs[2]
	nodes := make([]*server.Node, 3)
	errs := make(chan error, 3)
	for i := range nodes {
		cfg := testConfig(t.TempDir())
		cfg.NodeID = int32(i + 1)
		cfg.ControllerAddr = addrs[i]
		cfg.ControllerVoters = voters
		cfg.BrokerHeartbeatInterval = 100 * time.Millisecond
		cfg.LeaderRebalanceInterval = -1
		cfg.Txn = txn.Config{StatePartitions: 1}
		go func() {
			n, err := server.Start(ctx, cfg)
			nodes[i] = n
			errs <- err
		}()
	}
	for range nodes {
		if err := <-errs; err != nil {
			t.Fatalf("start: %v", err)
		}
	}
	for _, n := range nodes {
		t.Cleanup(func() { _ = n.Close() })
	}
	cl := client(t, nodes[0], kgo.SeedBrokers(nodes[0].KafkaAddr(), nodes[1].KafkaAddr(), nodes[2].KafkaAddr()))
	adm := kadm.NewClient(cl)
	const topic = "spread"
	if resp, err := adm.CreateTopic(ctx, 6, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	var leaders map[int32]bool
	var parts []int32
	for len(parts) != 6 || leaders[-1] {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		leaders, parts = map[int32]bool{}, nil
		for _, p := range md.Topics[topic].Partitions.Sorted() {
			leaders[p.Leader] = true
			parts = append(parts, p.Partition)
		}
		if ctx.Err() != nil {
			t.Fatalf("the partitions never got leaders: %v", leaders)
		}
	}
	if len(leaders) != 3 {
		t.Fatalf("the partitions are led by %v, want every node", leaders)
	}

	// kgo sends the transaction requests to the coordinator it finds.
	var init *kmsg.InitProducerIDResponse
	var err error
	for {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr("spread-tx"), 60000
		if init, err = req.RequestWith(ctx, cl); err != nil {
			t.Fatal(err)
		}
		if init.ErrorCode != kerr.CoordinatorLoadInProgress.Code && init.ErrorCode != kerr.ConcurrentTransactions.Code {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if init.ErrorCode != 0 {
		t.Fatalf("init: %v", kerr.ErrorForCode(init.ErrorCode))
	}
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = "spread-tx", init.ProducerID, init.ProducerEpoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = topic, parts
	add.Topics = append(add.Topics, at)
	added, err := add.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range added.Topics[0].Partitions {
		if p.ErrorCode != 0 {
			t.Fatalf("add %d: %v", p.Partition, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = "spread-tx", init.ProducerID, init.ProducerEpoch, true
	if ended, err := end.RequestWith(ctx, cl); err != nil || ended.ErrorCode != 0 {
		t.Fatalf("end: %v %v", err, ended)
	}
	for {
		described, err := adm.DescribeTransactions(ctx, "spread-tx")
		if err != nil {
			t.Fatal(err)
		}
		if d := described["spread-tx"]; d.State == "CompleteCommit" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the transaction never completed: %+v", described)
		case <-time.After(20 * time.Millisecond):
		}
	}
	// The two nodes that do not lead the id's partition refuse its requests with NOT_COORDINATOR.
	refused := 0
	for _, n := range nodes {
		c, err := (wire.Dialer{}).Dial(ctx, n.KafkaAddr())
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrEndTxnRequest()
		req.Version = 3
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = "spread-tx", init.ProducerID, init.ProducerEpoch
		resp, err := c.RoundTrip(ctx, req)
		_ = c.Close()
		if err != nil {
			t.Fatal(err)
		}
		switch code := resp.(*kmsg.EndTxnResponse).ErrorCode; code {
		case kerr.NotCoordinator.Code:
			refused++
		case kerr.InvalidTxnState.Code:
		default:
			t.Fatalf("EndTxn at node of %s: %v", n.KafkaAddr(), kerr.ErrorForCode(code))
		}
	}
	if refused != 2 {
		t.Fatalf("%d nodes answered NOT_COORDINATOR, want 2", refused)
	}
	// Each partition holds exactly its marker.
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset != 1 {
			t.Errorf("partition %d: end offset %d (%v), want 1: its marker", o.Partition, o.Offset, o.Err)
		}
	})
}
