package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestWireClientRoundTrip drives a Client against a Server: flexible and non-flexible headers both
// ways, ApiVersions' v0 response header at a flexible version, the client id and rising correlation
// ids reaching the server.
func TestWireClientRoundTrip(t *testing.T) {
	h := &testHandler{}
	ts := startServer(t, h, nil)
	ctx, cancel := context.WithTimeout(context.Background(), ioBound)
	defer cancel()
	c, err := Dialer{ClientID: "weir-test"}.Dial(ctx, ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, version := range []int16{12, 1} {
		req := metadataRequest("a", "b")
		req.SetVersion(version)
		resp, err := c.RoundTrip(ctx, req)
		if err != nil {
			t.Fatalf("metadata v%d: %v", version, err)
		}
		m := resp.(*kmsg.MetadataResponse)
		if m.GetVersion() != version || len(m.Topics) != 2 || *m.Topics[1].Topic != "b" || m.Brokers[0].Port != 9092 {
			t.Fatalf("metadata v%d: %+v", version, m)
		}
	}
	for _, version := range []int16{3, 0} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = version
		resp, err := c.RoundTrip(ctx, req)
		if err != nil {
			t.Fatalf("api versions v%d: %v", version, err)
		}
		if keys := resp.(*kmsg.ApiVersionsResponse).ApiKeys; len(keys) != 2 || keys[1].MaxVersion != 3 {
			t.Fatalf("api versions v%d: %+v", version, keys)
		}
	}
	got := h.requests()
	if len(got) != 4 {
		t.Fatalf("%d requests handled", len(got))
	}
	for i, req := range got {
		if req.CorrelationID != int32(i+1) || req.ClientID == nil || *req.ClientID != "weir-test" {
			t.Errorf("request %d: correlation id %d, client id %v", i, req.CorrelationID, req.ClientID)
		}
	}
}

// TestWireClientRefusesBadResponses answers a Client with frames it must refuse, each closing the
// Client: later round trips return the same error without sending anything.
func TestWireClientRefusesBadResponses(t *testing.T) {
	valid := func(correlationID int32) []byte {
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = 12
		b, err := appendResponse(nil, correlationID, resp)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	frame := func(body ...byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	cases := []struct {
		name    string
		respond func(correlationID int32) []byte
		want    error
	}{
		{"size above the limit", func(int32) []byte { return frame(make([]byte, 2<<10)...) }, errFrameTooLarge},
		{"negative size", func(int32) []byte { return []byte{0xff, 0xff, 0xff, 0xff} }, errNegativeSize},
		{"ends inside the frame", func(int32) []byte { return valid(1)[:12] }, errTruncatedFrame},
		{"no correlation id", func(int32) []byte { return frame(0, 0) }, errMalformedResponse},
		{"another correlation id", func(id int32) []byte { return valid(id + 1) }, errWrongCorrelation},
		{"tagged field past the frame", func(id int32) []byte { return frame(0, 0, 0, byte(id), 1, 0, 0x7f) }, errMalformedResponse},
		{"body cut short", func(id int32) []byte { return frame(0, 0, 0, byte(id), 0, 0xff) }, errMalformedResponse},
		{"broker closes", func(int32) []byte { return nil }, io.EOF},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := rawBroker(t, tc.respond)
			ctx, cancel := context.WithTimeout(context.Background(), ioBound)
			defer cancel()
			c, err := Dialer{MaxResponseBytes: 1 << 10}.Dial(ctx, addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			req := metadataRequest("a")
			req.Version = 12
			if _, err := c.RoundTrip(ctx, req); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			first := c.err
			if _, err := c.RoundTrip(ctx, req); err == nil || err != first {
				t.Fatalf("round trip after a failure: %v, want %v", err, first)
			}
		})
	}
}

// TestWireClientContextEnds: a round trip whose broker does not answer returns when its context
// ends, with the context's error, and closes the Client.
func TestWireClientContextEnds(t *testing.T) {
	h := &testHandler{replyHook: func(ctx context.Context, _ *Request) { <-ctx.Done() }}
	ts := startServer(t, h, nil)
	for _, tc := range []struct {
		name string
		want error
		end  func(context.Context) (context.Context, context.CancelFunc)
	}{
		{"deadline", context.DeadlineExceeded, func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, 50*time.Millisecond)
		}},
		{"cancel", context.Canceled, func(ctx context.Context) (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(ctx)
			time.AfterFunc(50*time.Millisecond, cancel)
			return ctx, cancel
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bound, cancelBound := context.WithTimeout(context.Background(), ioBound)
			defer cancelBound()
			c, err := Dialer{}.Dial(bound, ts.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := tc.end(bound)
			defer cancel()
			if _, err := c.RoundTrip(ctx, metadataRequest("a")); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if _, err := c.RoundTrip(bound, metadataRequest("a")); !errors.Is(err, tc.want) {
				t.Fatalf("round trip after the context ended: %v", err)
			}
		})
	}
}

func TestWireClientDialFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), ioBound)
	defer cancel()
	if _, err := (Dialer{}).Dial(ctx, addr); err == nil {
		t.Fatal("dial of a closed port succeeded")
	}
}

// rawBroker accepts connections on 127.0.0.1 until the test ends. On each it reads one request
// frame, writes what respond returns for its correlation id and closes the connection.
func rawBroker(t *testing.T, respond func(correlationID int32) []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				_ = nc.SetDeadline(time.Now().Add(ioBound))
				frame, err := readFrame(nc, 1<<20)
				if err != nil || len(frame) < 8 {
					return
				}
				_, _ = nc.Write(respond(int32(binary.BigEndian.Uint32(frame[4:]))))
			}()
		}
	}()
	return ln.Addr().String()
}
