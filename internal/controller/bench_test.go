package controller

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"sort"
	"testing"
	"time"
)

// BenchmarkControllerImage10kPartitions reports the heap held by an image of 100 topics of 100
// partitions at replication factor 3 over 5 brokers, and the cost of fencing a broker in it.
func BenchmarkControllerImage10kPartitions(b *testing.B) {
	build := func() *Image {
		img := NewImage("cluster", 1)
		var err error
		for id := int32(1); id <= 5; id++ {
			if img, err = Apply(img, RegisterBroker{Broker: Broker{NodeID: id, Host: "h", Port: 9000 + id, Incarnation: "i"}}); err != nil {
				b.Fatal(err)
			}
		}
		for i := 0; i < 100; i++ {
			var id TopicID
			id[0], id[1] = byte(i), 1
			if img, err = Apply(img, CreateTopic{Name: fmt.Sprintf("topic-%03d", i), ID: id, Partitions: 100, ReplicationFactor: 3}); err != nil {
				b.Fatal(err)
			}
		}
		return img
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	img := build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Apply(img, FenceBroker{NodeID: 1 + int32(i%5)}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc), "image-bytes")
	runtime.KeepAlive(img)
}

// BenchmarkRaftFailover measures, over three in-process nodes on real TCP listeners, the time from
// closing the controller leader to the next committed metadata change proposed through a
// surviving node, and reports the median.
func BenchmarkRaftFailover(b *testing.B) {
	var samples []time.Duration
	for i := 0; i < b.N; i++ {
		var lns []net.Listener
		var voters []Voter
		for id := int32(1); id <= 3; id++ {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			lns = append(lns, ln)
			voters = append(voters, Voter{NodeID: id, Addr: ln.Addr().String()})
		}
		var stores []*Store
		for j, ln := range lns {
			s, err := OpenRaft(RaftConfig{
				Self: Broker{NodeID: int32(j + 1), Host: "127.0.0.1", Port: 9000 + int32(j)},
				Dir:  b.TempDir(), Listener: ln, Voters: voters, Clock: realClock{}, Logger: quietLogger(),
			})
			if err != nil {
				b.Fatal(err)
			}
			stores = append(stores, s)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		for _, s := range stores {
			if err := s.WaitReady(ctx); err != nil {
				b.Fatal(err)
			}
		}
		var survivor *Store
		for _, s := range stores {
			if s.node.isLeader() {
				_ = s.Close()
			} else {
				survivor = s
			}
		}
		start := time.Now()
		for {
			if _, err := survivor.CreateTopic(ctx, "after", 1, nil, false); err == nil {
				break
			} else if ctx.Err() != nil {
				b.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		samples = append(samples, time.Since(start))
		cancel()
		for _, s := range stores {
			_ = s.Close()
		}
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	b.ReportMetric(float64(samples[len(samples)/2].Milliseconds()), "median-ms")
}

// image100k builds the image docs/scaling.md measures: 1,000 topics of 100 partitions at replication
// factor 3 over 30 brokers (100,000 partitions, 10,000 replicas a broker).
func image100k(b *testing.B) *Image {
	b.Helper()
	img := NewImage("cluster", 1)
	var err error
	for id := int32(1); id <= 30; id++ {
		if img, err = Apply(img, RegisterBroker{Broker: Broker{NodeID: id, Host: "h", Port: 9000 + id, Incarnation: "i"}}); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 1000 {
		var id TopicID
		id[0], id[1], id[2] = byte(i), byte(i>>8), 1
		if img, err = Apply(img, CreateTopic{Name: fmt.Sprintf("topic-%04d", i), ID: id, Partitions: 100, ReplicationFactor: 3}); err != nil {
			b.Fatal(err)
		}
	}
	return img
}

// BenchmarkControllerImage100kPartitions reports, for an image of 100,000 partitions, the heap it
// holds and the time Apply takes for the commands a running cluster commits most (an ISR change, a
// topic creation, a broker fenced and unfenced) and for a snapshot's encoding.
func BenchmarkControllerImage100kPartitions(b *testing.B) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	img := image100k(b)
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.Logf("image of 100,000 partitions: %d bytes of heap", after.HeapAlloc-before.HeapAlloc)

	b.Run("AlterPartition", func(b *testing.B) {
		t, _ := img.Topic("topic-0500")
		st := t.States[7]
		shrink := AlterPartition{Topic: t.Name, Partition: 7, Leader: st.Leader, LeaderEpoch: st.LeaderEpoch,
			PartitionEpoch: st.PartitionEpoch, ISR: st.ISR[:2]}
		for b.Loop() {
			if _, err := Apply(img, shrink); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("CreateTopic", func(b *testing.B) {
		create := CreateTopic{Name: "one-more", ID: TopicID{0xff}, Partitions: 12, ReplicationFactor: 3}
		for b.Loop() {
			if _, err := Apply(img, create); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("FenceBroker", func(b *testing.B) {
		for b.Loop() {
			if _, err := Apply(img, FenceBroker{NodeID: 7}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Snapshot", func(b *testing.B) {
		var size int
		for b.Loop() {
			data, err := encodeImage(img)
			if err != nil {
				b.Fatal(err)
			}
			size = len(data)
		}
		b.ReportMetric(float64(size), "snapshot-bytes")
	})
	runtime.KeepAlive(img)
}
