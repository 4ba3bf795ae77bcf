package wire

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/clock/clocktest"
	"github.com/weir-mq/weir/internal/tlstest"
)

// saslHandler is testHandler plus SaslAuthenticate: AuthBytes "good" authenticates the connection
// as User:alice for lifetime (none when zero), anything else fails it.
type saslHandler struct {
	testHandler
	clock    *clocktest.Manual
	lifetime time.Duration
}

func (h *saslHandler) Supports(key, version int16) bool {
	return key == 36 && version >= 0 && version <= 2 || key == 17 && version == 0 || h.testHandler.Supports(key, version)
}

func (h *saslHandler) Handle(ctx context.Context, req *Request) Reply {
	if hs, ok := req.Body.(*kmsg.SASLHandshakeRequest); ok {
		req.Session.ExpectRawTokens()
		resp := hs.ResponseKind()
		return func(context.Context) kmsg.Response { return resp }
	}
	body, ok := req.Body.(*kmsg.SASLAuthenticateRequest)
	if !ok {
		return h.testHandler.Handle(ctx, req)
	}
	resp := body.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.SASLAuthBytes = []byte("answer")
	if string(body.SASLAuthBytes) == "good" {
		var expiry time.Time
		if h.lifetime > 0 {
			expiry = h.clock.Now().Add(h.lifetime)
		}
		req.Session.Authenticate("User:alice", expiry)
	} else {
		resp.ErrorCode = 58
		req.Session.CloseAfterReply()
	}
	return func(context.Context) kmsg.Response { return resp }
}

// startListener serves h on a loopback listener described by l until the test ends.
func startListener(t *testing.T, h Handler, l Listener, configure func(*Server)) string {
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
	served := make(chan error, 1)
	go func() { served <- srv.ServeListener(ctx, ln, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("ServeListener: %v", err)
		}
	})
	return ln.Addr().String()
}

func authenticate(bytes string) *kmsg.SASLAuthenticateRequest {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SASLAuthBytes = []byte(bytes)
	return req
}

func TestSessionSASLGating(t *testing.T) {
	clk := clocktest.NewManual(time.Now())
	h := &saslHandler{clock: clk}
	addr := startListener(t, h, Listener{Name: "SECURE", Protocol: SASLPlaintext}, func(s *Server) { s.Clock = clk })

	early := dial(t, addr)
	write(t, early, encodeRequest(4, 1, nil, metadataRequest("t"), nil))
	expectClosed(t, early)

	c := dial(t, addr)
	write(t, c, encodeRequest(3, 1, nil, kmsg.NewPtrApiVersionsRequest(), nil))
	if id, _ := readResponse(t, c); id != 1 {
		t.Fatalf("ApiVersions before authentication: correlation id %d", id)
	}
	write(t, c, encodeRequest(1, 2, nil, authenticate("good"), nil), encodeRequest(4, 3, nil, metadataRequest("t"), nil))
	for want := int32(2); want <= 3; want++ {
		if id, _ := readResponse(t, c); id != want {
			t.Fatalf("correlation id %d, want %d", id, want)
		}
	}
	reqs := h.requests()
	last := reqs[len(reqs)-1]
	if last.Key != 3 || last.Principal != "User:alice" || last.Listener != "SECURE" {
		t.Fatalf("metadata after authentication: key %d principal %q listener %q", last.Key, last.Principal, last.Listener)
	}

	bad := dial(t, addr)
	before := len(h.requests())
	write(t, bad, encodeRequest(1, 7, nil, authenticate("bad"), nil), encodeRequest(4, 8, nil, metadataRequest("t"), nil))
	if id, _ := readResponse(t, bad); id != 7 {
		t.Fatalf("failed authentication: correlation id %d", id)
	}
	expectClosed(t, bad)
	if n := len(h.requests()) - before; n != 0 {
		t.Fatalf("%d requests handled after a failed authentication", n)
	}
}

// TestSessionRawTokens: after a SaslHandshake v0, frames are bare tokens and answers bare bytes,
// until the exchange succeeds; a failed bare token closes the connection without an answer.
func TestSessionRawTokens(t *testing.T) {
	clk := clocktest.NewManual(time.Now())
	h := &saslHandler{clock: clk}
	addr := startListener(t, h, Listener{Name: "SASL_PLAINTEXT", Protocol: SASLPlaintext}, func(s *Server) { s.Clock = clk })
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "PLAIN"

	c := dial(t, addr)
	write(t, c, encodeRequest(0, 1, nil, hs, nil))
	readResponse(t, c)
	write(t, c, []byte{0, 0, 0, 4}, []byte("good"), encodeRequest(4, 2, nil, metadataRequest("t"), nil))
	var bare [10]byte
	if _, err := io.ReadFull(c, bare[:]); err != nil || string(bare[4:]) != "answer" || bare[3] != 6 {
		t.Fatalf("bare answer % x, %v", bare, err)
	}
	if id, _ := readResponse(t, c); id != 2 {
		t.Fatalf("metadata after the bare exchange: correlation id %d", id)
	}
	if reqs := h.requests(); reqs[len(reqs)-1].Principal != "User:alice" {
		t.Fatalf("principal %q", reqs[len(reqs)-1].Principal)
	}

	bad := dial(t, addr)
	write(t, bad, encodeRequest(0, 1, nil, hs, nil))
	readResponse(t, bad)
	write(t, bad, []byte{0, 0, 0, 3}, []byte("bad"))
	if data, err := io.ReadAll(bad); len(data) > 0 || err != nil {
		t.Fatalf("a failed bare token: answered % x, then %v; want a close and nothing else", data, err)
	}
}

func TestSessionExpiryClosesConnection(t *testing.T) {
	clk := clocktest.NewManual(time.Now())
	h := &saslHandler{clock: clk, lifetime: time.Minute}
	addr := startListener(t, h, Listener{Name: "SASL_PLAINTEXT", Protocol: SASLPlaintext}, func(s *Server) { s.Clock = clk })
	c := dial(t, addr)
	write(t, c, encodeRequest(1, 1, nil, authenticate("good"), nil), encodeRequest(4, 2, nil, metadataRequest("t"), nil))
	readResponse(t, c)
	readResponse(t, c)
	clk.Advance(59 * time.Second)
	write(t, c, encodeRequest(1, 3, nil, authenticate("good"), nil))
	readResponse(t, c)
	clk.Advance(59 * time.Second)
	write(t, c, encodeRequest(4, 4, nil, metadataRequest("t"), nil))
	if id, _ := readResponse(t, c); id != 4 {
		t.Fatalf("metadata within the renewed session: correlation id %d", id)
	}
	clk.Advance(2 * time.Second)
	write(t, c, encodeRequest(4, 5, nil, metadataRequest("t"), nil))
	expectClosed(t, c)
}

func TestTLSListenerPrincipalAndHandshakes(t *testing.T) {
	ca := tlstest.NewCA(t)
	cfg := &tls.Config{
		Certificates: []tls.Certificate{ca.Server(t, "broker").TLS(t)},
		ClientCAs:    ca.Pool,
		ClientAuth:   tls.VerifyClientCertIfGiven,
		MinVersion:   tls.VersionTLS12,
	}
	h := &testHandler{}
	addr := startListener(t, h, Listener{Name: "SSL", Protocol: SSL, TLS: cfg},
		func(s *Server) { s.HandshakeTimeout = 300 * time.Millisecond })

	// A client that connects and never hand-shakes is closed after the handshake timeout.
	stalled := dial(t, addr)

	alice := ca.Client(t, pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"example"}})
	for _, tc := range []struct {
		certs []tls.Certificate
		want  string
	}{
		{certs: []tls.Certificate{alice.TLS(t)}, want: "User:CN=alice,OU=eng,O=example"},
		{want: AnonymousPrincipal},
	} {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool, Certificates: tc.certs, ServerName: "localhost"})
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(ioBound))
		write(t, c, encodeRequest(4, 1, nil, metadataRequest("t"), nil))
		readResponse(t, c)
		_ = c.Close()
		reqs := h.requests()
		if got := reqs[len(reqs)-1]; got.Principal != tc.want || got.Listener != "SSL" {
			t.Fatalf("principal %q listener %q, want %q on SSL", got.Principal, got.Listener, tc.want)
		}
	}
	expectClosed(t, stalled)

	// A plaintext Kafka client on the TLS port: its first frame is no TLS handshake.
	plain := dial(t, addr)
	write(t, plain, encodeRequest(4, 1, nil, metadataRequest("t"), nil))
	expectClosed(t, plain)
}

func TestServeListenerNeedsTLSConfig(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{Handler: &testHandler{}}
	if err := srv.ServeListener(t.Context(), ln, Listener{Name: "SSL", Protocol: SSL}); err == nil {
		t.Fatal("an SSL listener without a TLS configuration served")
	}
}

func TestParseSecurityProtocol(t *testing.T) {
	for _, name := range []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"} {
		if p, err := ParseSecurityProtocol(name); err != nil || string(p) != name {
			t.Errorf("%s: %v %v", name, p, err)
		}
	}
	for _, name := range []string{"", "plaintext", "TLS", "SASL"} {
		if _, err := ParseSecurityProtocol(name); err == nil {
			t.Errorf("%q parsed", name)
		}
	}
}
