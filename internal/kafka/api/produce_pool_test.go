package api_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestAPIProducePooledFramesReadBack produces distinct random values concurrently with acks=0, acks=1,
// acks=all, an idempotent and a transactional producer, uncompressed so that their frames take pooled
// buffers of several size classes, while one raw connection sends produces that fail (unknown
// partition, a batch over max.message.bytes, a bad CRC, with and without acks) between good ones. Every
// value must read back byte for byte: a frame buffer given back to the pool while a request still used
// it would show up as another request's bytes.
func TestAPIProducePooledFramesReadBack(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	const topic, small = "pooled", "pooled-small"
	createTopic(t, adm, topic, 4, nil)
	createTopic(t, adm, small, 1, map[string]*string{"max.message.bytes": kadm.StringPtr("2048")})

	producers := []struct {
		name string
		txn  bool
		opts []kgo.Opt
	}{
		{"acks0", false, []kgo.Opt{kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite()}},
		{"acks1", false, []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(5)}},
		{"acksAll", false, []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(5)}},
		{"idempotent", false, nil},
		{"txn", true, []kgo.Opt{kgo.TransactionalID("pooled-txn")}},
	}
	const perProducer, perTxn = 300, 50
	var (
		mu   sync.Mutex
		sent = map[string][]byte{}
		errs []error
		wg   sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	for pi, p := range producers {
		opts := append([]kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression())}, p.opts...)
		cl := newClient(t, n, opts...)
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(pi), 7))
			ctx := testCtx(t)
			for i := 0; i < perProducer; i += perTxn {
				if p.txn {
					if err := cl.BeginTransaction(); err != nil {
						fail(fmt.Errorf("%s: begin: %w", p.name, err))
						return
					}
				}
				for j := i; j < i+perTxn; j++ {
					key := fmt.Sprintf("%s-%d", p.name, j)
					value := make([]byte, 100+rng.IntN(3000))
					for k := range value {
						value[k] = byte(rng.Uint32())
					}
					mu.Lock()
					sent[key] = value
					mu.Unlock()
					cl.Produce(ctx, &kgo.Record{Key: []byte(key), Value: value}, func(r *kgo.Record, err error) {
						if err != nil {
							fail(fmt.Errorf("%s: produce %s: %w", p.name, r.Key, err))
						}
					})
				}
				if err := cl.Flush(ctx); err != nil {
					fail(fmt.Errorf("%s: flush: %w", p.name, err))
					return
				}
				if p.txn {
					if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
						fail(fmt.Errorf("%s: commit: %w", p.name, err))
						return
					}
				}
			}
		})
	}

	rc := dialRaw(t, n)
	filler := strings.Repeat("x", 1500)
	nRaw := 0
	for i := range 100 {
		if pr := produceRaw(t, rc, 9, topic, 99, testBatch(batchSpec{values: []string{filler}})); pr.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("round %d, unknown partition: error code %d", i, pr.ErrorCode)
		}
		if pr := produceRaw(t, rc, 9, small, 0, testBatch(batchSpec{values: []string{filler + filler}})); pr.ErrorCode != kerr.MessageTooLarge.Code {
			t.Fatalf("round %d, batch too large: error code %d", i, pr.ErrorCode)
		}
		corrupt := testBatch(batchSpec{values: []string{filler}})
		corrupt[len(corrupt)-3] ^= 0xff
		if pr := produceRaw(t, rc, 9, topic, 0, corrupt); pr.ErrorCode != kerr.CorruptMessage.Code {
			t.Fatalf("round %d, bad CRC: error code %d", i, pr.ErrorCode)
		}
		// Not answered: the next response's correlation id proves the connection went on.
		rc.send(produceRequest(9, 0, topic, 0, corrupt))
		key := fmt.Sprintf("raw-%d", i)
		value := fmt.Sprintf("%s %d", filler, i)
		batch := testBatch(batchSpec{key: key, values: []string{value}})
		if pr := produceRaw(t, rc, 9, topic, int32(i%4), batch); pr.ErrorCode != 0 {
			t.Fatalf("round %d, good batch: error code %d", i, pr.ErrorCode)
		}
		mu.Lock()
		sent[key] = []byte(value)
		mu.Unlock()
		nRaw++
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d produces failed, the first: %v", len(errs), errs[0])
	}

	got := consumeN(t, n, topic, kgo.NewOffset().AtStart(), len(producers)*perProducer+nRaw)
	seen := map[string]bool{}
	for _, r := range got {
		key := string(r.Key)
		want, ok := sent[key]
		switch {
		case !ok:
			t.Fatalf("%s[%d]@%d: a record nobody produced, key %q", r.Topic, r.Partition, r.Offset, r.Key)
		case seen[key]:
			t.Fatalf("%s[%d]@%d: key %q read twice", r.Topic, r.Partition, r.Offset, key)
		case !bytes.Equal(r.Value, want):
			t.Fatalf("%s[%d]@%d: key %q: %d bytes read differ from the %d produced", r.Topic, r.Partition, r.Offset, key, len(r.Value), len(want))
		}
		seen[key] = true
	}
	if len(seen) != len(sent) {
		t.Fatalf("read %d distinct records, produced %d", len(seen), len(sent))
	}
}
