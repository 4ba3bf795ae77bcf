package weirtest_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/weirtest"
)

// A node started inside the program, a topic, a record written with franz-go and read back.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir, err := os.MkdirTemp("", "weirtest-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	node, err := weirtest.Start(ctx, dir, weirtest.Options{})
	if err != nil {
		panic(err)
	}
	defer node.Close()

	cl, err := kgo.NewClient(kgo.SeedBrokers(node.Addr()), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		panic(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Key: []byte("alice"), Value: []byte("paid")}).FirstErr(); err != nil {
		panic(err)
	}
	fetches := cl.PollFetches(ctx)
	if err := fetches.Err(); err != nil {
		panic(err)
	}
	fetches.EachRecord(func(r *kgo.Record) { fmt.Printf("%s %s at offset %d\n", r.Key, r.Value, r.Offset) })
	// Output: alice paid at offset 0
}
