package wire

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ioBound bounds every blocking client read or write in these tests, so that a broken server fails
// a test instead of hanging it. It is never what a test asserts on.
const ioBound = 20 * time.Second

// testHandler serves ApiVersions 0-3 and Metadata 0-12 with kmsg types. A Metadata reply echoes the
// requested topic names; its behaviour can be changed per test through the hooks.
type testHandler struct {
	// replyHook, when set, runs inside every Metadata Reply before it answers.
	replyHook func(ctx context.Context, req *Request)
	// handleHook, when set, runs inside every Handle call.
	handleHook func(req *Request)

	mu      sync.Mutex
	handled []*Request
	called  chan struct{} // one token per Handle call, when not nil
}

func (h *testHandler) Supports(key, version int16) bool {
	switch key {
	case 18:
		return version >= 0 && version <= 3
	case 3:
		return version >= 0 && version <= 12
	default:
		return false
	}
}

func (h *testHandler) Handle(_ context.Context, req *Request) Reply {
	h.mu.Lock()
	h.handled = append(h.handled, req)
	h.mu.Unlock()
	if h.handleHook != nil {
		h.handleHook(req)
	}
	if h.called != nil {
		h.called <- struct{}{}
	}
	switch req.Key {
	case 18:
		resp := kmsg.NewPtrApiVersionsResponse()
		if req.Unsupported {
			resp.Version = 0
			resp.ErrorCode = 35
			resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MinVersion: 0, MaxVersion: 3}}
		} else {
			resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{
				{ApiKey: 3, MinVersion: 0, MaxVersion: 12},
				{ApiKey: 18, MinVersion: 0, MaxVersion: 3},
			}
		}
		return func(context.Context) kmsg.Response { return resp }
	default:
		body := req.Body.(*kmsg.MetadataRequest)
		return func(ctx context.Context) kmsg.Response {
			if h.replyHook != nil {
				h.replyHook(ctx, req)
			}
			resp := kmsg.NewPtrMetadataResponse()
			resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 1, Host: "localhost", Port: 9092}}
			for _, topic := range body.Topics {
				rt := kmsg.NewMetadataResponseTopic()
				rt.Topic = topic.Topic
				resp.Topics = append(resp.Topics, rt)
			}
			return resp
		}
	}
}

func (h *testHandler) requests() []*Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*Request(nil), h.handled...)
}

// testServer is a running Server on a loopback listener.
type testServer struct {
	srv     *Server
	addr    string
	cancel  context.CancelFunc
	served  chan error
	stopped bool
}

// startServer serves h on 127.0.0.1 until the test ends; configure may set the Server's limits.
func startServer(t testing.TB, h Handler, configure func(*Server)) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{Handler: h, Logger: slog.New(slog.DiscardHandler)}
	if configure != nil {
		configure(srv)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{srv: srv, addr: ln.Addr().String(), cancel: cancel, served: make(chan error, 1)}
	go func() { ts.served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		if ts.stopped {
			return
		}
		cancel()
		if err := <-ts.served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ts
}

// wait returns Serve's result once it has returned.
func (ts *testServer) wait(t testing.TB) error {
	t.Helper()
	ts.stopped = true
	select {
	case err := <-ts.served:
		return err
	case <-time.After(ioBound):
		t.Fatal("Serve did not return")
		return nil
	}
}

func dial(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetDeadline(time.Now().Add(ioBound)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// encodeRequest builds a request frame the way a client does: header v2 when body is flexible at
// version, else v1; tags are raw tagged-field bytes for a v2 header (nil means none).
func encodeRequest(version int16, correlationID int32, clientID *string, body kmsg.Request, tags []byte) []byte {
	body.SetVersion(version)
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(body.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(correlationID))
	if clientID == nil {
		b = binary.BigEndian.AppendUint16(b, 0xffff)
	} else {
		b = binary.BigEndian.AppendUint16(b, uint16(len(*clientID)))
		b = append(b, *clientID...)
	}
	if body.IsFlexible() {
		if tags == nil {
			tags = []byte{0}
		}
		b = append(b, tags...)
	}
	b = body.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// rawFrame builds a frame from a header with the given key and version and arbitrary body bytes.
func rawFrame(key, version int16, correlationID int32, body []byte) []byte {
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(correlationID))
	b = binary.BigEndian.AppendUint16(b, 0xffff)
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func metadataRequest(topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	for _, topic := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func write(t testing.TB, c net.Conn, frames ...[]byte) {
	t.Helper()
	for _, f := range frames {
		if _, err := c.Write(f); err != nil {
			t.Fatal(err)
		}
	}
}

// readResponse reads one response frame and returns its correlation id and the bytes after it.
func readResponse(t testing.TB, c net.Conn) (int32, []byte) {
	t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatalf("reading a response: %v", err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, frame); err != nil {
		t.Fatalf("reading a response: %v", err)
	}
	if len(frame) < 4 {
		t.Fatalf("response of %d bytes", len(frame))
	}
	return int32(binary.BigEndian.Uint32(frame)), frame[4:]
}

// decodeResponse decodes rest (what follows the correlation id) into resp at version, skipping
// the response header's tagged fields when the response is flexible and not ApiVersions.
func decodeResponse(t testing.TB, rest []byte, resp kmsg.Response, version int16) {
	t.Helper()
	resp.SetVersion(version)
	if resp.IsFlexible() && resp.Key() != 18 {
		if len(rest) == 0 || rest[0] != 0 {
			t.Fatalf("flexible response header without empty tagged fields: % x", rest[:min(len(rest), 8)])
		}
		rest = rest[1:]
	}
	if err := resp.ReadFrom(rest); err != nil {
		t.Fatalf("decoding %T v%d: %v", resp, version, err)
	}
	if again := resp.AppendTo(nil); !bytes.Equal(again, rest) {
		t.Fatalf("%T v%d: %d bytes on the wire, %d when re-encoded", resp, version, len(rest), len(again))
	}
}

// expectClosed asserts that the server closes c: a read ends with EOF or a reset, not a timeout.
func expectClosed(t testing.TB, c net.Conn) {
	t.Helper()
	buf := make([]byte, 512)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("connection still open")
		}
		return
	}
}
