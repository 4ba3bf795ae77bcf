package record_test

import (
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/record"
)

// TestKeyPartition checks the partitioner against franz-go's default (Kafka's murmur2).
func TestKeyPartition(t *testing.T) {
	p := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		key := make([]byte, i%37)
		for j := range key {
			key[j] = byte(rng.Uint32())
		}
		n := int32(1 + i%13)
		if got, want := record.KeyPartition(key, n), int32(p.Partition(&kgo.Record{Key: key}, int(n))); got != want {
			t.Fatalf("key %x of %d partitions: %d, want %d", key, n, got, want)
		}
	}
}
