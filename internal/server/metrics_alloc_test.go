package server

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/clock"
	"github.com/weir-mq/weir/internal/kafka/wire"
)

// fixedHandler answers every request with the same response.
type fixedHandler struct{ resp kmsg.Response }

func (fixedHandler) Supports(int16, int16) bool { return true }

func (h fixedHandler) Handle(context.Context, *wire.Request) wire.Reply {
	return func(context.Context) kmsg.Response { return h.resp }
}

// produceOf builds a Produce request of one batch of batchBytes to each of nParts partitions of
// topic t, and the response answering all of them without an error.
func produceOf(nParts, batchBytes int) (*kmsg.ProduceRequest, *kmsg.ProduceResponse) {
	req, resp := kmsg.NewPtrProduceRequest(), kmsg.NewPtrProduceResponse()
	req.Acks = 1
	rt, st := kmsg.NewProduceRequestTopic(), kmsg.NewProduceResponseTopic()
	rt.Topic, st.Topic = "t", "t"
	for p := range int32(nParts) {
		rp, sp := kmsg.NewProduceRequestTopicPartition(), kmsg.NewProduceResponseTopicPartition()
		rp.Partition, sp.Partition = p, p
		rp.Records = make([]byte, batchBytes)
		rt.Partitions = append(rt.Partitions, rp)
		st.Partitions = append(st.Partitions, sp)
	}
	req.Topics = append(req.Topics, rt)
	resp.Topics = append(resp.Topics, st)
	return req, resp
}

// fetchOf builds a Fetch response of one batch of batchBytes from each of nParts partitions of
// topic t.
func fetchOf(nParts, batchBytes int) (*kmsg.FetchRequest, *kmsg.FetchResponse) {
	resp := kmsg.NewPtrFetchResponse()
	st := kmsg.NewFetchResponseTopic()
	st.Topic = "t"
	for p := range int32(nParts) {
		sp := kmsg.NewFetchResponseTopicPartition()
		sp.Partition = p
		sp.RecordBatches = make([]byte, batchBytes)
		st.Partitions = append(st.Partitions, sp)
	}
	resp.Topics = append(resp.Topics, st)
	return kmsg.NewPtrFetchRequest(), resp
}

// TestServerMetricsAllocs: counting a Produce or a Fetch (the request, its latency, its bytes per
// topic, its error codes) costs the same few allocations whatever its partitions and bytes: nothing
// per partition or record.
func TestServerMetricsAllocs(t *testing.T) {
	m := newMetrics(clock.System{})
	allocs := func(key int16, build func(nParts, batchBytes int) (kmsg.Request, kmsg.Response), nParts, batchBytes int) float64 {
		req, resp := build(nParts, batchBytes)
		h := m.wrap(fixedHandler{resp: resp})
		wreq := &wire.Request{Key: key, Version: 9, Body: req}
		ctx := context.Background()
		return testing.AllocsPerRun(200, func() { h.Handle(ctx, wreq)(ctx) })
	}
	for _, c := range []struct {
		api     string
		key     int16
		build   func(nParts, batchBytes int) (kmsg.Request, kmsg.Response)
		counted func() uint64
	}{
		{"Produce", kmsg.Produce.Int16(), func(n, b int) (kmsg.Request, kmsg.Response) { return produceOf(n, b) },
			func() uint64 { return m.bytesFor("t").in.Load() }},
		{"Fetch", kmsg.Fetch.Int16(), func(n, b int) (kmsg.Request, kmsg.Response) { return fetchOf(n, b) },
			func() uint64 { return m.bytesFor("t").out.Load() }},
	} {
		small, large := allocs(c.key, c.build, 1, 100), allocs(c.key, c.build, 64, 64<<10)
		if small != large || small > 2 {
			t.Errorf("%s: %v allocations for 1 partition, %v for 64; want the same, at most 2", c.api, small, large)
		}
		if c.counted() == 0 {
			t.Errorf("%s: no bytes counted for topic t", c.api)
		}
	}
}
