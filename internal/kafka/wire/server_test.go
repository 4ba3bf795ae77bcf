package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/clock"
)

func TestWireHeaderVersions(t *testing.T) {
	h := &testHandler{}
	ts := startServer(t, h, nil)
	c := dial(t, ts.addr)
	client := "weir-test"

	tests := []struct {
		name    string
		version int16
		body    kmsg.Request
		tags    []byte
	}{
		{"ApiVersions v0, header v1", 0, kmsg.NewPtrApiVersionsRequest(), nil},
		{"ApiVersions v3, header v2", 3, &kmsg.ApiVersionsRequest{ClientSoftwareName: "weir", ClientSoftwareVersion: "1"}, nil},
		{"Metadata v1, header v1", 1, metadataRequest("a", "b"), nil},
		{"Metadata v9, header v2", 9, metadataRequest("c"), nil},
		// Two unknown tagged fields in the header: tag 5 with 3 bytes, tag 700 with 0 bytes.
		{"Metadata v12, header v2 with tags", 12, metadataRequest("d"), []byte{2, 5, 3, 'x', 'y', 'z', 0xbc, 0x05, 0}},
	}
	for i, tt := range tests {
		corr := int32(100 + i)
		write(t, c, encodeRequest(tt.version, corr, &client, tt.body, tt.tags))
		gotCorr, rest := readResponse(t, c)
		if gotCorr != corr {
			t.Fatalf("%s: correlation id %d, want %d", tt.name, gotCorr, corr)
		}
		resp := tt.body.ResponseKind()
		decodeResponse(t, rest, resp, tt.version)
		if m, ok := resp.(*kmsg.MetadataResponse); ok {
			want := tt.body.(*kmsg.MetadataRequest).Topics
			if len(m.Topics) != len(want) || *m.Topics[0].Topic != *want[0].Topic {
				t.Fatalf("%s: topics %v, want %v", tt.name, m.Topics, want)
			}
		}
	}
	reqs := h.requests()
	if len(reqs) != len(tests) {
		t.Fatalf("%d requests handled, want %d", len(reqs), len(tests))
	}
	for i, req := range reqs {
		if req.ClientID == nil || *req.ClientID != client || req.Version != tests[i].version || req.Remote == nil {
			t.Fatalf("request %d: %+v", i, req)
		}
	}
	if sw := reqs[1].Body.(*kmsg.ApiVersionsRequest); sw.ClientSoftwareName != "weir" {
		t.Fatalf("ApiVersions v3 body: %+v", sw)
	}
}

func TestWireNullClientID(t *testing.T) {
	h := &testHandler{}
	ts := startServer(t, h, nil)
	c := dial(t, ts.addr)
	write(t, c, encodeRequest(1, 7, nil, metadataRequest("a"), nil))
	if corr, _ := readResponse(t, c); corr != 7 {
		t.Fatalf("correlation id %d", corr)
	}
	if id := h.requests()[0].ClientID; id != nil {
		t.Fatalf("client id %q, want null", *id)
	}
}

func TestWireOrderingWithBlockingReplies(t *testing.T) {
	const n = 32
	gates := make([]chan struct{}, n)
	for i := range gates {
		gates[i] = make(chan struct{})
	}
	h := &testHandler{called: make(chan struct{}, n)}
	h.replyHook = func(ctx context.Context, req *Request) {
		select {
		case <-gates[req.CorrelationID]:
		case <-ctx.Done():
		}
	}
	ts := startServer(t, h, func(s *Server) { s.MaxPendingReplies = n })
	c := dial(t, ts.addr)
	for i := range n {
		write(t, c, encodeRequest(4, int32(i), nil, metadataRequest("t"), nil))
	}
	for range n {
		<-h.called
	}
	// Every request was handled while the first reply still blocks; release them last to first.
	for i := n - 1; i >= 0; i-- {
		close(gates[i])
	}
	for i := range n {
		if corr, _ := readResponse(t, c); corr != int32(i) {
			t.Fatalf("response %d has correlation id %d", i, corr)
		}
	}
}

func TestWireUnsupportedApiVersions(t *testing.T) {
	h := &testHandler{}
	ts := startServer(t, h, nil)
	c := dial(t, ts.addr)
	// A v127 body is unknown to everyone: send bytes that no version could parse.
	write(t, c, rawFrame(18, 127, 41, []byte{0xde, 0xad}))
	corr, rest := readResponse(t, c)
	if corr != 41 {
		t.Fatalf("correlation id %d", corr)
	}
	var resp kmsg.ApiVersionsResponse
	decodeResponse(t, rest, &resp, 0)
	if resp.ErrorCode != 35 || len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != 18 {
		t.Fatalf("response %+v", resp)
	}
	if req := h.requests()[0]; !req.Unsupported || req.Body != nil || req.Version != 127 {
		t.Fatalf("request %+v", req)
	}
	// The connection stays open: the client retries at a version the broker has.
	write(t, c, encodeRequest(3, 42, nil, kmsg.NewPtrApiVersionsRequest(), nil))
	if corr, rest = readResponse(t, c); corr != 42 {
		t.Fatalf("correlation id %d", corr)
	}
	decodeResponse(t, rest, &resp, 3)
	if resp.ErrorCode != 0 {
		t.Fatalf("response %+v", resp)
	}
}

func TestWireClosesOnBadInput(t *testing.T) {
	valid := encodeRequest(1, 1, nil, metadataRequest("a"), nil)
	tests := []struct {
		name  string
		frame []byte
	}{
		{"unknown key", rawFrame(9999, 0, 1, nil)},
		{"unsupported version", encodeRequest(13, 1, nil, metadataRequest("a"), nil)},
		{"negative version", rawFrame(3, -1, 1, nil)},
		{"negative size", []byte{0xff, 0xff, 0xff, 0xfe}},
		{"short header", []byte{0, 0, 0, 3, 0, 3, 0}},
		{"bad client id length", append([]byte{0, 0, 0, 10}, 0, 3, 0, 1, 0, 0, 0, 1, 0x7f, 0xff)},
		{"body that does not decode", rawFrame(3, 1, 1, []byte{0, 0, 0, 5, 0})},
		{"trailing bytes", func() []byte {
			f := append(append([]byte(nil), valid...), 0xaa, 0xbb)
			binary.BigEndian.PutUint32(f, uint32(len(f)-4))
			return f
		}()},
		{"bad header tags", encodeRequest(9, 1, nil, metadataRequest("a"), []byte{1, 0, 50})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &testHandler{}
			ts := startServer(t, h, nil)
			c := dial(t, ts.addr)
			write(t, c, tt.frame)
			expectClosed(t, c)
			if n := len(h.requests()); n != 0 {
				t.Fatalf("%d requests reached the handler", n)
			}
			// Other connections are unaffected.
			c2 := dial(t, ts.addr)
			write(t, c2, valid)
			if corr, _ := readResponse(t, c2); corr != 1 {
				t.Fatalf("correlation id %d", corr)
			}
		})
	}
}

func TestWireHugeSizeClosesWithoutAllocating(t *testing.T) {
	h := &testHandler{}
	ts := startServer(t, h, nil)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	c := dial(t, ts.addr)
	write(t, c, []byte{0x7f, 0xff, 0xff, 0xff}) // 2 GiB - 1
	expectClosed(t, c)
	c = dial(t, ts.addr)
	write(t, c, encodeRequest(0, 1, nil, kmsg.NewPtrApiVersionsRequest(), nil))
	readResponse(t, c)
	write(t, c, []byte{0x7f, 0xff, 0xff, 0xff}, []byte{1, 2, 3})
	expectClosed(t, c)
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Fatalf("serving two 2 GiB size prefixes allocated %d bytes", grew)
	}
}

func TestWireFirstRequestLimit(t *testing.T) {
	h := &testHandler{}
	ts := startServer(t, h, func(s *Server) { s.MaxFirstRequestBytes = 1 << 10 })
	topics := make([]string, 200)
	for i := range topics {
		topics[i] = "topic-with-a-long-enough-name"
	}
	big := encodeRequest(1, 2, nil, metadataRequest(topics...), nil)
	if len(big) < 2<<10 {
		t.Fatalf("test request of only %d bytes", len(big))
	}

	c := dial(t, ts.addr)
	write(t, c, big)
	expectClosed(t, c)

	c = dial(t, ts.addr)
	write(t, c, encodeRequest(0, 1, nil, kmsg.NewPtrApiVersionsRequest(), nil), big)
	readResponse(t, c)
	if corr, _ := readResponse(t, c); corr != 2 {
		t.Fatalf("correlation id %d", corr)
	}
}

func TestWireSlowClientDoesNotBlockOthers(t *testing.T) {
	h := &testHandler{}
	ts := startServer(t, h, nil)
	slow := dial(t, ts.addr)
	write(t, slow, encodeRequest(0, 1, nil, kmsg.NewPtrApiVersionsRequest(), nil))
	readResponse(t, slow)
	// Declare a 90 MiB request, then trickle it one byte at a time until the test is over.
	write(t, slow, []byte{0x05, 0xa0, 0, 0, 0, 3})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			if _, err := slow.Write([]byte{0}); err != nil {
				return
			}
		}
	}()
	defer wg.Wait()
	defer close(stop)

	fast := dial(t, ts.addr)
	for i := range 50 {
		write(t, fast, encodeRequest(5, int32(i), nil, metadataRequest("t"), nil))
		if corr, _ := readResponse(t, fast); corr != int32(i) {
			t.Fatalf("correlation id %d, want %d", corr, i)
		}
	}
}

func TestWireReadFrameGrowsWithArrivingBytes(t *testing.T) {
	// A reader that declares 90 MiB and then delivers 1000 bytes before ending.
	declared := []byte{0x05, 0xa0, 0, 0}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := readFrame(&trickleReader{prefix: declared, n: 1000}, DefaultMaxRequestBytes)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, errTruncatedFrame) {
		t.Fatalf("err %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("1000 bytes of a 90 MiB frame allocated %d bytes", grew)
	}
}

// trickleReader returns prefix, then n zero bytes one at a time, then EOF.
type trickleReader struct {
	prefix []byte
	n      int
}

func (r *trickleReader) Read(p []byte) (int, error) {
	if len(r.prefix) > 0 {
		n := copy(p, r.prefix)
		r.prefix = r.prefix[n:]
		return n, nil
	}
	if r.n == 0 || len(p) == 0 {
		return 0, io.EOF
	}
	r.n--
	p[0] = 0
	return 1, nil
}

func TestWireShutdownDrains(t *testing.T) {
	const n = 8
	release := make(chan struct{})
	h := &testHandler{called: make(chan struct{}, n)}
	h.replyHook = func(ctx context.Context, _ *Request) {
		select {
		case <-release:
		case <-ctx.Done():
			t.Error("a reply was cancelled during a drain")
		}
	}
	ts := startServer(t, h, nil)
	c := dial(t, ts.addr)
	for i := range n {
		write(t, c, encodeRequest(1, int32(i), nil, metadataRequest("t"), nil))
	}
	for range n {
		<-h.called
	}
	shut := make(chan error, 1)
	go func() { shut <- ts.srv.Shutdown(context.Background()) }()
	close(release)
	for i := range n {
		if corr, _ := readResponse(t, c); corr != int32(i) {
			t.Fatalf("response %d has correlation id %d", i, corr)
		}
	}
	expectClosed(t, c)
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := ts.wait(t); err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

func TestWireShutdownDeadlineCancelsReplies(t *testing.T) {
	h := &testHandler{called: make(chan struct{}, 1)}
	var cancelled atomic.Bool
	h.replyHook = func(ctx context.Context, _ *Request) {
		<-ctx.Done()
		cancelled.Store(true)
	}
	ts := startServer(t, h, nil)
	c := dial(t, ts.addr)
	write(t, c, encodeRequest(1, 1, nil, metadataRequest("t"), nil))
	<-h.called
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ts.srv.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown: %v", err)
	}
	if !cancelled.Load() {
		t.Fatal("the blocked reply was not cancelled")
	}
	expectClosed(t, c)
	if err := ts.wait(t); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.srv.Serve(context.Background(), ln); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve after Shutdown: %v", err)
	}
}

func TestWireServeContextCancel(t *testing.T) {
	h := &testHandler{called: make(chan struct{}, 1)}
	h.replyHook = func(ctx context.Context, _ *Request) { <-ctx.Done() }
	ts := startServer(t, h, nil)
	c := dial(t, ts.addr)
	write(t, c, encodeRequest(1, 1, nil, metadataRequest("t"), nil))
	<-h.called
	ts.cancel()
	if err := ts.wait(t); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	expectClosed(t, c)
}

func TestWirePanicClosesOnlyThatConnection(t *testing.T) {
	for _, where := range []string{"handle", "reply"} {
		t.Run(where, func(t *testing.T) {
			h := &testHandler{}
			hook := func(req *Request) {
				if req.CorrelationID == 666 {
					panic("boom")
				}
			}
			if where == "handle" {
				h.handleHook = hook
			} else {
				h.replyHook = func(_ context.Context, req *Request) { hook(req) }
			}
			ts := startServer(t, h, nil)
			bad := dial(t, ts.addr)
			good := dial(t, ts.addr)
			write(t, bad, encodeRequest(1, 666, nil, metadataRequest("t"), nil))
			expectClosed(t, bad)
			write(t, good, encodeRequest(1, 1, nil, metadataRequest("t"), nil))
			if corr, _ := readResponse(t, good); corr != 1 {
				t.Fatalf("correlation id %d", corr)
			}
		})
	}
}

func TestWireIdleTimeoutCloses(t *testing.T) {
	h := &testHandler{}
	ts := startServer(t, h, func(s *Server) { s.IdleTimeout = 20 * time.Millisecond })
	c := dial(t, ts.addr)
	write(t, c, encodeRequest(0, 1, nil, kmsg.NewPtrApiVersionsRequest(), nil))
	readResponse(t, c)
	expectClosed(t, c)
}

func TestWireNilReplySendsNothing(t *testing.T) {
	h := &nilReplyHandler{testHandler: &testHandler{}}
	ts := startServer(t, h, nil)
	c := dial(t, ts.addr)
	write(t, c,
		encodeRequest(1, 1, nil, metadataRequest("silent"), nil),
		encodeRequest(1, 2, nil, metadataRequest("t"), nil))
	if corr, _ := readResponse(t, c); corr != 2 {
		t.Fatalf("correlation id %d", corr)
	}
}

// nilReplyHandler answers nothing for a Metadata request of topic "silent" (as for acks=0).
type nilReplyHandler struct{ *testHandler }

func (h *nilReplyHandler) Handle(ctx context.Context, req *Request) Reply {
	reply := h.testHandler.Handle(ctx, req)
	if m, ok := req.Body.(*kmsg.MetadataRequest); ok && *m.Topics[0].Topic == "silent" {
		return func(context.Context) kmsg.Response { return nil }
	}
	return reply
}

// countingClock is the system clock; it closes third when the time is read for the third time.
type countingClock struct {
	clock.System
	reads atomic.Int32
	third chan struct{}
}

func (c *countingClock) Now() time.Time {
	if c.reads.Add(1) == 3 {
		close(c.third)
	}
	return c.System.Now()
}

func TestWireIdleTimeoutWaitsForPendingReplies(t *testing.T) {
	clock := &countingClock{third: make(chan struct{})}
	h := &testHandler{}
	// The reader reads the clock to arm its idle deadline, to re-arm it after the request's bytes
	// arrived, and a third time only when a whole idle period passed with no byte but the reply
	// pending. The reply waits for that third read, so the connection must stay open through it.
	h.replyHook = func(ctx context.Context, _ *Request) {
		select {
		case <-clock.third:
		case <-ctx.Done():
		}
	}
	ts := startServer(t, h, func(s *Server) {
		s.IdleTimeout = 100 * time.Millisecond
		s.Clock = clock
	})
	c := dial(t, ts.addr)
	write(t, c, encodeRequest(1, 9, nil, metadataRequest("t"), nil))
	if corr, _ := readResponse(t, c); corr != 9 {
		t.Fatalf("correlation id %d", corr)
	}
	expectClosed(t, c)
}

// TestWireOnCloseHooks: hooks a Handler registers on a connection's Session run once that connection
// has closed, each key's latest only, and not for the connections still open.
func TestWireOnCloseHooks(t *testing.T) {
	ran := make(chan string, 10)
	h := &testHandler{handleHook: func(req *Request) {
		if m, ok := req.Body.(*kmsg.MetadataRequest); ok {
			name := *m.Topics[0].Topic
			req.Session.OnClose("key", func() { ran <- name })
		}
	}}
	ts := startServer(t, h, nil)
	closing, open := dial(t, ts.addr), dial(t, ts.addr)
	write(t, closing, encodeRequest(1, 1, nil, metadataRequest("first"), nil), encodeRequest(1, 2, nil, metadataRequest("second"), nil))
	write(t, open, encodeRequest(1, 1, nil, metadataRequest("still-open"), nil))
	for range 2 {
		readResponse(t, closing)
	}
	readResponse(t, open)
	select {
	case name := <-ran:
		t.Fatalf("hook %q ran while its connection was open", name)
	default:
	}
	_ = closing.Close()
	select {
	case name := <-ran:
		if name != "second" {
			t.Fatalf("hook %q ran, want the key's latest, second", name)
		}
	case <-time.After(ioBound):
		t.Fatal("no hook ran after the connection closed")
	}
	select {
	case name := <-ran:
		t.Fatalf("hook %q ran too", name)
	case <-time.After(100 * time.Millisecond):
	}
}
