package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/server"
	"github.com/weir-mq/weir/internal/txn"
)

// openTxn leaves an Ongoing transaction of id over t-0 and returns its producer id.
func openTxn(t *testing.T, ctx context.Context, cl *kgo.Client, id string) int64 {
	t.Helper()
	var init *kmsg.InitProducerIDResponse
	for {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(id), 60000
		var err error
		if init, err = req.RequestWith(ctx, cl); err != nil {
			t.Fatal(err)
		}
		if init.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if init.ErrorCode != 0 {
		t.Fatalf("init: %v", kerr.ErrorForCode(init.ErrorCode))
	}
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = id, init.ProducerID, init.ProducerEpoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = "t", []int32{0}
	add.Topics = append(add.Topics, at)
	resp, err := add.RequestWith(ctx, cl)
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("add: %v %+v", err, resp)
	}
	return init.ProducerID
}

func TestCLITxn(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.KafkaAddr, cfg.HTTPAddr, cfg.ControllerAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Txn = txn.Config{StatePartitions: 1}
	n, err := server.Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() { _ = n.Close() })
	addr := n.KafkaAddr()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), testBound)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	pid := openTxn(t, ctx, cl, "hanging")

	out := mustRun(t, "", "txn", "list", "--brokers", addr)
	if row := findRow(out, "hanging"); len(row) != 4 || row[1] != "Ongoing" || row[2] != strconv.FormatInt(pid, 10) {
		t.Fatalf("txn list:\n%s", out)
	}
	var listed []txnListEntry
	if err := json.Unmarshal([]byte(mustRun(t, "", "txn", "list", "--state", "CompleteCommit", "--json", "--brokers", addr)), &listed); err != nil || len(listed) != 0 {
		t.Fatalf("txn list --state CompleteCommit: %+v %v", listed, err)
	}
	var d txnDescription
	if err := json.Unmarshal([]byte(mustRun(t, "", "txn", "describe", "hanging", "--json", "--brokers", addr)), &d); err != nil {
		t.Fatal(err)
	}
	if d.State != "Ongoing" || d.ProducerID != pid || d.Start == nil || len(d.Partitions) != 1 || d.Partitions[0] != "t-0" {
		t.Fatalf("txn describe: %+v", d)
	}
	if text := mustRun(t, "", "txn", "describe", "hanging", "--brokers", addr); findRow(text, "PARTITIONS")[1] != "t-0" {
		t.Fatalf("txn describe:\n%s", text)
	}
	if r := runCLI(t, "", "txn", "describe", "nobody", "--brokers", addr); !errors.Is(r.err, errNoSuchTxn) {
		t.Fatalf("describe of an unknown id: %v", r.err)
	}
	if r := runCLI(t, "", "txn", "abort", "--topic", "t", "--brokers", addr); !errors.Is(r.err, errUsage) {
		t.Fatalf("abort without a producer: %v", r.err)
	}
	out = mustRun(t, "", "txn", "abort", "--topic", "t", "--partition", "0", "--producer-id", strconv.FormatInt(pid, 10),
		"--producer-epoch", "0", "--coordinator-epoch", "0", "--brokers", addr)
	if !strings.Contains(out, "aborted producer") {
		t.Fatalf("txn abort: %s", out)
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("t", 0); o.Offset != 1 {
		t.Fatalf("end offset after the abort marker: %d", o.Offset)
	}
}
