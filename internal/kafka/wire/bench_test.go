package wire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// benchHandler answers every request with one prebuilt response per key, so that the benchmark
// measures the wire's read, decode, dispatch and write loop rather than a handler.
type benchHandler struct {
	responses map[int16]kmsg.Response
}

func (h *benchHandler) Supports(key, version int16) bool { return h.responses[key] != nil }

func (h *benchHandler) Handle(_ context.Context, req *Request) Reply {
	resp := h.responses[req.Key]
	return func(context.Context) kmsg.Response { return resp }
}

// BenchmarkWireRoundTrip pipelines requests on one connection and reads every response; allocs/op
// are those of one request's whole trip (client side included, which allocates nothing per request).
func BenchmarkWireRoundTrip(b *testing.B) {
	produce := kmsg.NewPtrProduceRequest()
	produce.Acks = -1
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "bench"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = make([]byte, 1<<10)
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)

	produceResp := kmsg.NewPtrProduceResponse()
	prt := kmsg.NewProduceResponseTopic()
	prt.Topic = "bench"
	prt.Partitions = append(prt.Partitions, kmsg.NewProduceResponseTopicPartition())
	produceResp.Topics = append(produceResp.Topics, prt)
	metadataResp := kmsg.NewPtrMetadataResponse()
	metadataResp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 1, Host: "localhost", Port: 9092}}

	// A fetch answered with 4 MiB of records, four partitions of 1 MiB: its response is encoded
	// into a pooled buffer sized from the start (bigbuf.go), so B/op stays far below its size.
	fetch := kmsg.NewPtrFetchRequest()
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "bench"
	fetch.Topics = append(fetch.Topics, ft)
	fetchResp := kmsg.NewPtrFetchResponse()
	frt := kmsg.NewFetchResponseTopic()
	frt.Topic = "bench"
	for i := range 4 {
		fp := kmsg.NewFetchResponseTopicPartition()
		fp.Partition, fp.RecordBatches = int32(i), make([]byte, 1<<20)
		frt.Partitions = append(frt.Partitions, fp)
	}
	fetchResp.Topics = append(fetchResp.Topics, frt)

	client := "bench-client"
	cases := []struct {
		name  string
		frame []byte
	}{
		{"metadata-v9", encodeRequest(9, 1, &client, metadataRequest("bench"), nil)},
		{"produce-v9-1KiB", encodeRequest(9, 1, &client, produce, nil)},
		{"fetch-v11-4MiB", encodeRequest(11, 1, &client, fetch, nil)},
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			h := &benchHandler{responses: map[int16]kmsg.Response{0: produceResp, 1: fetchResp, 3: metadataResp}}
			ts := startServer(b, h, nil)
			c := dial(b, ts.addr)
			written := make(chan error, 1)
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.frame)))
			b.ResetTimer()
			go func() {
				w := bufio.NewWriterSize(c, 64<<10)
				for range b.N {
					if _, err := w.Write(bc.frame); err != nil {
						written <- err
						return
					}
				}
				written <- w.Flush()
			}()
			r := bufio.NewReaderSize(c, 64<<10)
			var buf []byte
			for i := range b.N {
				var size [4]byte
				if _, err := io.ReadFull(r, size[:]); err != nil {
					b.Fatalf("response %d: %v", i, err)
				}
				n := int(binary.BigEndian.Uint32(size[:]))
				if cap(buf) < n {
					buf = make([]byte, n)
				}
				if _, err := io.ReadFull(r, buf[:n]); err != nil {
					b.Fatalf("response %d: %v", i, err)
				}
			}
			b.StopTimer()
			if err := <-written; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkWireReadFrame reads frames of typical produce sizes: a frame up to frameEagerMax costs one
// allocation of its own size and no copies.
func BenchmarkWireReadFrame(b *testing.B) {
	for _, size := range []int{1 << 10, 1 << 20, 4 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			frame := make([]byte, 4+size)
			binary.BigEndian.PutUint32(frame, uint32(size))
			r := bytes.NewReader(frame)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				r.Reset(frame)
				if _, err := readFrame(r, 100<<20); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWireDecode decodes one request frame as the reader loop does, trailing-bytes check
// included, reusing the connection's decoder.
func BenchmarkWireDecode(b *testing.B) {
	produce := kmsg.NewPtrProduceRequest()
	produce.Acks = -1
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "bench"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = make([]byte, 1<<10)
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)
	fetch := kmsg.NewPtrFetchRequest()
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "bench"
	for i := range int32(8) {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition = i
		ft.Partitions = append(ft.Partitions, fp)
	}
	fetch.Topics = append(fetch.Topics, ft)

	client := "bench-client"
	cases := []struct {
		name  string
		frame []byte
	}{
		{"metadata-v9", encodeRequest(9, 1, &client, metadataRequest("bench"), nil)},
		{"produce-v9-1KiB", encodeRequest(9, 1, &client, produce, nil)},
		{"fetch-v11-8p", encodeRequest(11, 1, &client, fetch, nil)},
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			d := decoder{supports: func(int16, int16) bool { return true }}
			frame := bc.frame[sizeLen:]
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.decode(frame); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
