package wire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestWireFrameClass(t *testing.T) {
	for _, tc := range []struct {
		n, class int
	}{
		{0, -1},
		{frameClassMin - 1, -1},
		{frameClassMin, 0},
		{frameClassMin + 1, 1},
		{2 * frameClassMin, 1},
		{1 << 20, 20 - frameClassMinShift},
		{1<<20 + 1, 21 - frameClassMinShift},
		{frameEagerMax, 23 - frameClassMinShift},
		{frameEagerMax + 1, 24 - frameClassMinShift},
		{frameClassMax, len(framePools) - 1},
		{frameClassMax + 1, -1},
	} {
		if got := frameClass(tc.n); got != tc.class {
			t.Errorf("frameClass(%d) = %d, want %d", tc.n, got, tc.class)
		}
		if tc.n > frameEagerMax && tc.class >= 0 {
			// allocated only as the frame's bytes arrive (newFrameBuf), then pooled
			putFrameBuf(newFrameBuf(tc.n))
		}
		b := getFrameBuf(tc.n)
		switch {
		case tc.class < 0 && b != nil:
			t.Errorf("getFrameBuf(%d) pooled a frame without a class", tc.n)
		case tc.class >= 0 && b == nil:
			// the pool may drop what it holds at any garbage collection
		case tc.class >= 0 && (len(*b) != tc.n || cap(*b) != 1<<(frameClassMinShift+tc.class)):
			t.Errorf("getFrameBuf(%d): len %d cap %d", tc.n, len(*b), cap(*b))
		}
		putFrameBuf(b)
	}
}

// TestReadFrameLargeProduceGrowsThenPools: a Produce frame above frameEagerMax with no pooled buffer is
// read into a buffer that grows as its bytes arrive and ends at its class's capacity, returned as
// pooled; a stalled one of the same declared size pins no more than frameChunk.
func TestReadFrameLargeProduceGrowsThenPools(t *testing.T) {
	const size = frameEagerMax + 1<<20
	body := make([]byte, size)
	binary.BigEndian.PutUint16(body, produceKey)
	for i := 2; i < size; i++ {
		body[i] = byte(i)
	}
	frame := binary.BigEndian.AppendUint32(nil, size)
	frame = append(frame, body...)
	for framePools[frameClass(size)].Get() != nil {
	}
	buf, pb, err := readPooledFrame(bufio.NewReader(bytes.NewReader(frame)), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if pb == nil || cap(*pb) != 16<<20 || !bytes.Equal(buf, body) {
		t.Fatalf("pooled %v, cap %d, bytes equal %v", pb != nil, cap(buf), bytes.Equal(buf, body))
	}
	putFrameBuf(pb)

	for framePools[frameClass(size)].Get() != nil {
	}
	stalled := append(binary.BigEndian.AppendUint32(nil, size), body[:frameChunk/2]...)
	if _, _, err := readPooledFrame(bufio.NewReader(bytes.NewReader(stalled)), 1<<30); err != errTruncatedFrame {
		t.Fatalf("a frame cut short: %v, want errTruncatedFrame", err)
	}
}

// produceRecorder serves Produce (any version from 3) without looking at the records as a batch: Handle
// copies them, and the Reply, which waits until the reader has handled window more requests (so their
// frames were read, into reused buffers if the wire gave this one back too early), checks that the
// records it aliases still hold the copy. Requests whose correlation id is a multiple of 5 get a nil
// Reply, whose buffer goes back at once.
type produceRecorder struct {
	t       *testing.T
	window  int
	handled []chan struct{}

	mu      sync.Mutex
	checked int
}

func (h *produceRecorder) Supports(key, version int16) bool { return key == produceKey && version >= 3 }

func (h *produceRecorder) Handle(_ context.Context, req *Request) Reply {
	i := int(req.CorrelationID)
	body := req.Body.(*kmsg.ProduceRequest)
	records := body.Topics[0].Partitions[0].Records
	want := bytes.Clone(records)
	close(h.handled[i])
	if i%5 == 0 {
		return nil
	}
	later := h.handled[min(i+h.window, len(h.handled)-1)]
	return func(ctx context.Context) kmsg.Response {
		select {
		case <-later:
		case <-ctx.Done():
			return nil
		}
		if !bytes.Equal(records, want) {
			h.t.Errorf("request %d: its records changed before its Reply returned", i)
		}
		h.mu.Lock()
		h.checked++
		h.mu.Unlock()
		resp := body.ResponseKind().(*kmsg.ProduceResponse)
		resp.Topics = []kmsg.ProduceResponseTopic{{Topic: body.Topics[0].Topic}}
		return resp
	}
}

// TestWireProduceFrameKeptUntilReplied pipelines Produce requests whose records (1 to 6 KiB of random
// bytes, several frames per pool class) differ, after a connection that ends inside a pooled frame,
// and checks that each request's records are intact when its Reply runs, while later frames are read.
func TestWireProduceFrameKeptUntilReplied(t *testing.T) {
	const n = 300
	h := &produceRecorder{t: t, window: 40, handled: make([]chan struct{}, n)}
	for i := range h.handled {
		h.handled[i] = make(chan struct{})
	}
	ts := startServer(t, h, nil)

	// A frame cut short gives its buffer back without a request.
	cut := dial(t, ts.addr)
	partial := binary.BigEndian.AppendUint32(nil, 4000)
	write(t, cut, append(partial, make([]byte, 1000)...))
	_ = cut.Close()

	rng := rand.New(rand.NewPCG(1, 2))
	var frames []byte
	for i := range n {
		records := make([]byte, frameClassMin+rng.IntN(5*frameClassMin))
		for j := range records {
			records[j] = byte(rng.Uint32())
		}
		req := kmsg.NewPtrProduceRequest()
		req.Acks = 1
		topic := kmsg.NewProduceRequestTopic()
		topic.Topic = "t"
		part := kmsg.NewProduceRequestTopicPartition()
		part.Records = records
		topic.Partitions = append(topic.Partitions, part)
		req.Topics = append(req.Topics, topic)
		frames = append(frames, encodeRequest(9, int32(i), nil, req, nil)...)
	}
	c := dial(t, ts.addr)
	go func() { _, _ = c.Write(frames) }()
	for i := range n {
		if i%5 == 0 {
			continue
		}
		corr, _ := readResponse(t, c)
		if int(corr) != i {
			t.Fatalf("response %d, want %d", corr, i)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.checked != n-n/5 {
		t.Fatalf("%d Replies checked their records, want %d", h.checked, n-n/5)
	}
}

// TestReadPooledFrameProduceOnly: of two frames of the same pooled size, the Produce is read into a
// pooled buffer and the Metadata request into one of its own, byte for byte either way.
func TestReadPooledFrameProduceOnly(t *testing.T) {
	for _, tc := range []struct {
		key    int16
		pooled bool
	}{{produceKey, true}, {3, false}} {
		body := make([]byte, 4<<10)
		binary.BigEndian.PutUint16(body, uint16(tc.key))
		for i := 2; i < len(body); i++ {
			body[i] = byte(i)
		}
		wire := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
		wire = append(wire, body...)
		frame, pb, err := readPooledFrame(bufio.NewReader(bytes.NewReader(wire)), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if (pb != nil) != tc.pooled {
			t.Errorf("key %d: pooled %v, want %v", tc.key, pb != nil, tc.pooled)
		}
		if !bytes.Equal(frame, body) {
			t.Errorf("key %d: the frame read differs from the one sent", tc.key)
		}
		putFrameBuf(pb)
	}
}
