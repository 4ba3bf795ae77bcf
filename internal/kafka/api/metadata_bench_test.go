package api_test

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/clock"
	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/kafka/api"
	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/vfs"
)

// BenchmarkMetadata100kPartitions measures Metadata v12 (the version franz-go sends) answered by
// broker 1 over an image of 1,000 topics of 100 partitions at replication factor 3 over 30 brokers,
// the image of the controller's BenchmarkControllerImage100kPartitions: for every topic (a null topic
// list, a client's full refresh) and for one topic by name. Each iteration handles the request and
// encodes the response as the wire does; response-bytes is the encoded body.
func BenchmarkMetadata100kPartitions(b *testing.B) {
	br := broker100k(b)
	b.Run("AllTopics", func(b *testing.B) {
		resp := benchMetadata(b, br, nil)
		if len(resp.Topics) != 1000 || len(resp.Topics[999].Partitions) != 100 || len(resp.Brokers) != 30 {
			b.Fatalf("%d topics, %d brokers: want 1,000 topics of 100 partitions, 30 brokers", len(resp.Topics), len(resp.Brokers))
		}
	})
	b.Run("OneTopic", func(b *testing.B) {
		rt := kmsg.NewMetadataRequestTopic()
		name := "topic-0500"
		rt.Topic = &name
		resp := benchMetadata(b, br, []kmsg.MetadataRequestTopic{rt})
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 100 {
			b.Fatalf("topics %+v: want topic-0500 with 100 partitions", resp.Topics)
		}
	})
}

// benchMetadata times broker br answering a Metadata v12 request for topics (nil: all) and
// encoding the response into a reused buffer, and returns the last response.
func benchMetadata(b *testing.B, br *api.Broker, topics []kmsg.MetadataRequestTopic) *kmsg.MetadataResponse {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	req.Topics = topics
	wreq := &wire.Request{Key: req.Key(), Version: req.Version, Body: req, Principal: wire.AnonymousPrincipal, Listener: "PLAINTEXT"}
	ctx := b.Context()
	var resp kmsg.Response
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		resp = br.Handle(ctx, wreq)(ctx)
		buf = resp.AppendTo(buf[:0])
	}
	b.ReportMetric(float64(len(buf)), "response-bytes")
	return resp.(*kmsg.MetadataResponse)
}

// broker100k returns broker 1 of 30 serving an image of 1,000 topics ("topic-0000" to "topic-0999")
// of 100 partitions at replication factor 3, built with Apply.
func broker100k(b *testing.B) *api.Broker {
	b.Helper()
	cmds := make([]controller.Command, 0, 1030)
	for id := int32(1); id <= 30; id++ {
		cmds = append(cmds, controller.RegisterBroker{Broker: controller.Broker{NodeID: id, Host: "h", Port: 9000 + id, Incarnation: "i"}})
	}
	for i := range 1000 {
		var id controller.TopicID
		id[0], id[1], id[2] = byte(i), byte(i>>8), 1
		cmds = append(cmds, controller.CreateTopic{Name: fmt.Sprintf("topic-%04d", i), ID: id, Partitions: 100, ReplicationFactor: 3})
	}
	return brokerOver(b, cmds)
}

// brokerOver returns broker 1 serving the image that cmds build from a new one (the first command
// must register broker 1), opened from the metadata file WriteLocal writes, in memory, so that no
// command pays for writing the whole image. Its partition manager hosts no replica.
func brokerOver(tb testing.TB, cmds []controller.Command) *api.Broker {
	tb.Helper()
	img := controller.NewImage("cluster", 1)
	var err error
	for _, c := range cmds {
		if img, err = controller.Apply(img, c); err != nil {
			tb.Fatal(err)
		}
	}
	fsys := vfs.NewMem()
	if err := controller.WriteLocal(fsys, "/data/controller", img); err != nil {
		tb.Fatal(err)
	}
	self, _ := img.Broker(1)
	meta, err := controller.OpenLocal(fsys, "/data/controller", self, clock.System{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = meta.Close() })
	if meta.Image().Version != img.Version {
		tb.Fatalf("store opened at version %d, want the written image's %d", meta.Image().Version, img.Version)
	}
	replicas, err := partition.NewManager("/data/logs", partition.ManagerOptions{FS: fsys, NodeID: 1})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = replicas.Close() })
	br, err := api.New(api.Options{NodeID: 1, Metadata: meta, Replicas: replicas, Clock: clock.System{}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(br.Close)
	return br
}
