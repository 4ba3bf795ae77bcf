package controller

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/tlstest"
)

// syncBuffer is a bytes.Buffer that a logger and the test may use at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMuxMutualTLS serves the controller RPC through a mux under mutual TLS: a client with a
// certificate of the cluster's CA is answered; one whose certificate another CA signed, one
// without a certificate and one without TLS are refused at the handshake, and each refusal is
// logged with the remote address.
func TestMuxMutualTLS(t *testing.T) {
	ca, foreign := tlstest.NewCA(t), tlstest.NewCA(t)
	node := func(ca *tlstest.CA, cn string) tls.Certificate {
		return ca.Node(t, pkix.Name{CommonName: cn}).TLS(t)
	}
	serverTLS := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{node(ca, "node-1")},
		ClientCAs: ca.Pool, ClientAuth: tls.RequireAndVerifyClientCert}
	client := func(cert ...tls.Certificate) *tls.Config {
		return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: ca.Pool, Certificates: cert}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := newRPCServer(ctx, func(context.Context, string, json.RawMessage) (any, error) { return "ok", nil })
	defer srv.close()
	var logs syncBuffer
	m := newMux(ln, srv.serve, ln.Addr().String())
	m.serverTLS, m.log = serverTLS, slog.New(slog.NewTextHandler(&logs, nil))
	go m.run()
	defer m.close()

	call := func(cfg *tls.Config) error {
		c := newRPCClient(5*time.Second, cfg)
		defer c.close()
		var out string
		_, err := c.call(ctx, ln.Addr().String(), methodStatus, struct{}{}, &out)
		if err == nil && out != "ok" {
			t.Fatalf("answer %q", out)
		}
		return err
	}
	if err := call(client(node(ca, "node-2"))); err != nil {
		t.Fatalf("a node of the cluster: %v", err)
	}
	for name, cfg := range map[string]*tls.Config{
		"another CA's certificate": client(node(foreign, "node-2")),
		"no certificate":           client(),
		"no TLS":                   nil,
	} {
		if err := call(cfg); err == nil {
			t.Errorf("%s: answered", name)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(logs.String(), "controller: refused a connection: TLS handshake failed") < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("three refusals not logged:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "remote=127.0.0.1:") {
		t.Fatalf("refusal without the remote address:\n%s", logs.String())
	}
}
