package server_test

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/server"
	"github.com/weir-mq/weir/internal/txn"
)

// TestServerTxnMarkersAcrossNodes: on three nodes, a transaction over partitions led by every node
// ends with a marker at each leader: the coordinator writes its own partitions' markers directly and
// sends WriteTxnMarkers to the other two.
// startTxnCluster starts three nodes, each with one __transaction_state partition and finalizing
// transaction.version tv, and a client of all three.
func startTxnCluster(t *testing.T, tv int16) ([]*server.Node, *kgo.Client, *kadm.Client) {
	t.Helper()
	ctx := testCtx(t)
	nodes := startVoters(ctx, t, func(_ int, cfg server.Config) server.Config {
		cfg.BrokerHeartbeatInterval = 100 * time.Millisecond
		cfg.LeaderRebalanceInterval = -1
		cfg.Txn = txn.Config{StatePartitions: 1}
		cfg.TransactionVersion = tv
		return cfg
	})
	cl := client(t, nodes[0], kgo.SeedBrokers(nodes[0].KafkaAddr(), nodes[1].KafkaAddr(), nodes[2].KafkaAddr()))
	return nodes, cl, kadm.NewClient(cl)
}

// spreadTopic creates topic with six partitions, one replica each, and waits until every node leads
// some of them.
func spreadTopic(t *testing.T, adm *kadm.Client, topic string) []int32 {
	t.Helper()
	ctx := testCtx(t)
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
	return parts
}

func TestServerTxnMarkersAcrossNodes(t *testing.T) {
	ctx := testCtx(t)
	nodes, cl, adm := startTxnCluster(t, 1)
	const topic = "spread"
	parts := spreadTopic(t, adm, topic)

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

// TestServerTxnVerifyAcrossNodes: on three nodes, partition leaders that do not coordinate the
// transactional id ask its coordinator over the Kafka protocol: a produce to a partition never added is
// refused at every leader with nothing written (KIP-890 part 1); franz-go's transactions commit through
// explicit adds and verification (TV1, and TV2 with a client capped below Produce v12) or through the
// leaders' implicit adds (TV2), and read_committed reads every committed record once.
func TestServerTxnVerifyAcrossNodes(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		t.Run(fmt.Sprintf("TV%d", tv), func(t *testing.T) {
			ctx := testCtx(t)
			nodes, cl, adm := startTxnCluster(t, tv)
			const topic = "spread"
			parts := spreadTopic(t, adm, topic)

			var init *kmsg.InitProducerIDResponse
			for {
				req := kmsg.NewPtrInitProducerIDRequest()
				req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr("raw-tx"), 60000
				var err error
				if init, err = req.RequestWith(ctx, cl); err != nil {
					t.Fatal(err)
				}
				if init.ErrorCode != kerr.CoordinatorLoadInProgress.Code && init.ErrorCode != kerr.ConcurrentTransactions.Code && init.ErrorCode != kerr.NotCoordinator.Code {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if init.ErrorCode != 0 {
				t.Fatalf("init: %v", kerr.ErrorForCode(init.ErrorCode))
			}
			// Each partition's leader, over a connection that keeps the version asked for.
			md, err := adm.Metadata(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			leaders := map[int32]*wire.Client{}
			for _, p := range md.Topics[topic].Partitions.Sorted() {
				c, err := (wire.Dialer{}).Dial(ctx, nodes[p.Leader-1].KafkaAddr())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = c.Close() })
				leaders[p.Partition] = c
			}
			for _, p := range parts {
				req := kmsg.NewPtrProduceRequest()
				req.Version, req.TransactionID, req.Acks, req.TimeoutMillis = 11, kmsg.StringPtr("raw-tx"), -1, 10000
				rt := kmsg.NewProduceRequestTopic()
				rt.Topic = topic
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Partition = p
				b := kmsg.RecordBatch{
					Magic: 2, Attributes: 0x10, ProducerID: init.ProducerID, ProducerEpoch: init.ProducerEpoch,
					NumRecords: 1, Records: []byte{14, 0, 0, 0, 1, 2, 'x', 0}, PartitionLeaderEpoch: -1, LastOffsetDelta: 0,
				}
				rp.Records = b.AppendTo(nil)
				fixBatch(rp.Records)
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp, err := leaders[p].RoundTrip(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				code := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
				if code != kerr.TransactionAbortable.Code {
					t.Fatalf("produce to partition %d, never added: %v, want TRANSACTION_ABORTABLE", p, kerr.ErrorForCode(code))
				}
			}
			ends, err := adm.ListEndOffsets(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			ends.Each(func(o kadm.ListedOffset) {
				if o.Err != nil || o.Offset != 0 {
					t.Errorf("partition %d: end offset %d (%v) after refused produces", o.Partition, o.Offset, o.Err)
				}
			})

			seeds := kgo.SeedBrokers(nodes[0].KafkaAddr(), nodes[1].KafkaAddr(), nodes[2].KafkaAddr())
			capped := kversion.Stable()
			capped.SetMaxKeyVersion(0, 11)
			want := 0
			for i, opts := range [][]kgo.Opt{nil, {kgo.MaxVersions(capped)}} {
				opts = append(opts, seeds, kgo.TransactionalID(fmt.Sprint("kgo-tx-", i)), kgo.DefaultProduceTopic(topic),
					kgo.RecordPartitioner(kgo.ManualPartitioner()))
				pr := client(t, nodes[0], opts...)
				for range 2 {
					if err := pr.BeginTransaction(); err != nil {
						t.Fatal(err)
					}
					for _, p := range parts {
						if err := pr.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
							t.Fatalf("client %d: produce to %d: %v", i, p, err)
						}
						want++
					}
					if err := pr.EndTransaction(ctx, kgo.TryCommit); err != nil {
						t.Fatalf("client %d: commit: %v", i, err)
					}
				}
			}
			cons := client(t, nodes[0], seeds, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			got := 0
			for got < want {
				fs := cons.PollFetches(ctx)
				if ctx.Err() != nil {
					t.Fatalf("read %d of %d committed records", got, want)
				}
				got += fs.NumRecords()
			}
			if got != want {
				t.Fatalf("read %d records, want %d", got, want)
			}
		})
	}
}

// fixBatch sets the length and CRC of an encoded record batch.
func fixBatch(b []byte) {
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
}
