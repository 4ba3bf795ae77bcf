package server

import (
	"bytes"
	"crypto/tls"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/clock/clocktest"
	"github.com/weir-mq/weir/internal/tlstest"
)

// servedCert is the leaf certificate a handshake would present now.
func servedCert(t *testing.T, r *tlsReloader) []byte {
	t.Helper()
	cfg, err := r.config().GetConfigForClient(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Certificates[0].Certificate[0]
}

func TestTLSReloadOnChange(t *testing.T) {
	ca := tlstest.NewCA(t)
	dir := t.TempDir()
	first, second := ca.Server(t, "first"), ca.Server(t, "second")
	certFile, keyFile := first.Write(t, dir, "server")
	clk := clocktest.NewManual(time.Now())
	var logs bytes.Buffer
	r, err := newTLSReloader(TLSConfig{CertFile: certFile, KeyFile: keyFile}, clk, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	was := servedCert(t, r)
	touch := func(at time.Time) {
		for _, f := range []string{certFile, keyFile} {
			if err := os.Chtimes(f, at, at); err != nil {
				t.Fatal(err)
			}
		}
	}

	second.Write(t, dir, "server")
	touch(time.Now().Add(time.Minute))
	if !bytes.Equal(servedCert(t, r), was) {
		t.Fatal("the certificate changed before the reload interval passed")
	}
	clk.Advance(2 * tlsReloadInterval)
	now := servedCert(t, r)
	if bytes.Equal(now, was) {
		t.Fatal("the rewritten certificate was not reloaded")
	}

	tlstest.WriteFile(t, filepath.Join(dir, "server.crt"), []byte("not a certificate"))
	touch(time.Now().Add(2 * time.Minute))
	clk.Advance(2 * tlsReloadInterval)
	if !bytes.Equal(servedCert(t, r), now) {
		t.Fatal("a certificate that does not parse replaced the one in use")
	}
	if !bytes.Contains(logs.Bytes(), []byte("keeping the previous ones")) {
		t.Fatalf("the failed reload was not logged: %s", logs.String())
	}
}

func TestTLSClientAuthModes(t *testing.T) {
	ca := tlstest.NewCA(t)
	dir := t.TempDir()
	certFile, keyFile := ca.Server(t, "broker").Write(t, dir, "server")
	caFile := filepath.Join(dir, "ca.pem")
	tlstest.WriteFile(t, caFile, ca.PEM)
	for mode, want := range map[string]tls.ClientAuthType{
		"none": tls.NoClientCert, "requested": tls.VerifyClientCertIfGiven, "required": tls.RequireAndVerifyClientCert,
	} {
		r, err := newTLSReloader(TLSConfig{CertFile: certFile, KeyFile: keyFile, CAFile: caFile, ClientAuth: mode},
			clocktest.NewManual(time.Now()), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if got := r.get(); got.ClientAuth != want || got.ClientCAs == nil || got.MinVersion != tls.VersionTLS12 {
			t.Errorf("%s: client auth %v, CAs %v", mode, got.ClientAuth, got.ClientCAs != nil)
		}
	}
	if _, err := newTLSReloader(TLSConfig{CertFile: certFile, KeyFile: filepath.Join(dir, "missing")},
		clocktest.NewManual(time.Now()), slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("a missing key loaded")
	}
}
