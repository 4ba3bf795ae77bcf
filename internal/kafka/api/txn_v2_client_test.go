package api_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTxnClientVersions runs franz-go's transactional producer on a node finalizing each transaction
// version: kgo takes TV2 when the node finalizes transaction.version 2 (Produce v12, EndTxn v5, no
// AddPartitionsToTxn), else the classic protocol. Under TV2 every transaction's end bumps the epoch,
// and its markers carry the bumped epoch.
func TestTxnClientVersions(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		t.Run(fmt.Sprintf("TV%d", tv), func(t *testing.T) {
			n := startTxnNodeTV(t, tv)
			createTopic(t, newAdmin(t, n), "t", 1, nil)
			ctx := testCtx(t)
			cl := newClient(t, n, kgo.TransactionalID("kgo-tx"), kgo.DefaultProduceTopic("t"), kgo.RequiredAcks(kgo.AllISRAcks()))
			for i, end := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort, kgo.TryCommit} {
				if err := cl.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				for j := range 3 {
					if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("%d-%d", i, j))).FirstErr(); err != nil {
						t.Fatalf("produce: %v", err)
					}
				}
				if err := cl.EndTransaction(ctx, end); err != nil {
					t.Fatalf("end transaction %d: %v", i, err)
				}
			}
			r := dialTxn(t, n)
			d := r.waitState("kgo-tx", "CompleteCommit")
			ms := markers(t, n, "t", 0)
			if len(ms) != 3 || !ms[0].Commit || ms[1].Commit || !ms[2].Commit {
				t.Fatalf("markers %+v", ms)
			}
			wantEpochs := []int16{0, 0, 0}
			if tv == 2 {
				wantEpochs = []int16{1, 2, 3}
			}
			for i, m := range ms {
				if m.ProducerEpoch != wantEpochs[i] {
					t.Fatalf("TV%d: marker epochs %+v, want %v", tv, ms, wantEpochs)
				}
			}
			if d.ProducerEpoch != wantEpochs[2] {
				t.Fatalf("TV%d: the id's epoch is %d, want %d", tv, d.ProducerEpoch, wantEpochs[2])
			}
			got := values(consumeN(t, n, "t", kgo.NewOffset().AtStart(), 6, kgo.FetchIsolationLevel(kgo.ReadCommitted())))
			if want := []string{"0-0", "0-1", "0-2", "2-0", "2-1", "2-2"}; !slices.Equal(got, want) {
				t.Fatalf("read_committed read %v, want %v", got, want)
			}

			// A second producer with the id fences the first.
			checkFenced(ctx, t, cl, newClient(t, n, kgo.TransactionalID("kgo-tx"), kgo.DefaultProduceTopic("t")))
		})
	}
}

// TestTxnClientGroupTransactSession copies a topic with franz-go's GroupTransactSession, a
// consume-transform-produce loop whose offsets commit inside its transactions, under each transaction
// version: the output read_committed holds every input record once, in order, and the group's
// committed offset is the input's end.
func TestTxnClientGroupTransactSession(t *testing.T) {
	const records = 300
	for _, tv := range []int16{1, 2} {
		t.Run(fmt.Sprintf("TV%d", tv), func(t *testing.T) {
			n := startTxnNodeTV(t, tv)
			adm := newAdmin(t, n)
			createTopic(t, adm, "in", 1, nil)
			createTopic(t, adm, "out", 1, nil)
			ctx := testCtx(t)
			prod := newClient(t, n, kgo.DefaultProduceTopic("in"))
			var in []*kgo.Record
			for i := range records {
				in = append(in, kgo.StringRecord(fmt.Sprint(i)))
			}
			if err := prod.ProduceSync(ctx, in...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			sess, err := kgo.NewGroupTransactSession(
				kgo.SeedBrokers(n.KafkaAddr()), kgo.TransactionalID("copy"), kgo.ConsumerGroup("copier"),
				kgo.ConsumeTopics("in"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DefaultProduceTopic("out"),
				kgo.RequireStableFetchOffsets(), kgo.FetchMaxPartitionBytes(4096),
			)
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			copied := 0
			for copied < records {
				fs := sess.PollFetches(ctx)
				if err := ctx.Err(); err != nil {
					t.Fatalf("copied %d of %d: %v", copied, records, err)
				}
				if err := sess.Begin(); err != nil {
					t.Fatal(err)
				}
				fs.EachRecord(func(r *kgo.Record) {
					sess.Produce(ctx, kgo.StringRecord("copy-"+string(r.Value)), nil)
				})
				committed, err := sess.End(ctx, kgo.TryCommit)
				if err != nil {
					t.Fatalf("end: %v", err)
				}
				if committed {
					copied += fs.NumRecords()
				}
			}
			got := values(consumeN(t, n, "out", kgo.NewOffset().AtStart(), records, kgo.FetchIsolationLevel(kgo.ReadCommitted())))
			for i, v := range got {
				if v != fmt.Sprint("copy-", i) {
					t.Fatalf("output record %d is %q", i, v)
				}
			}
			// The last commit's offsets show once its marker reaches the group's partition.
			for {
				offsets, err := adm.FetchOffsets(ctx, "copier")
				if err != nil {
					t.Fatal(err)
				}
				o, ok := offsets.Lookup("in", 0)
				if ok && o.At == records {
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("committed offset %+v, want %d", o, records)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}
