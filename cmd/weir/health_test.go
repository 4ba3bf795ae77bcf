package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func TestHealthExitsByHealthz(t *testing.T) {
	var serving atomic.Bool
	serving.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		if !serving.Load() {
			http.Error(w, "not serving", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	if out := mustRun(t, "", "health", "--http", addr); out != "ok\n" {
		t.Fatalf("health of a serving node printed %q, want ok", out)
	}
	serving.Store(false)
	r := runCLI(t, "", "health", "--http", addr)
	if !errors.Is(r.err, errUnhealthy) || !strings.Contains(r.err.Error(), "503") || !strings.Contains(r.err.Error(), "not serving") {
		t.Fatalf("health of a node answering 503: err %v, want errUnhealthy with the status and the body", r.err)
	}
	srv.Close()
	if r := runCLI(t, "", "health", "--http", addr, "--timeout", "2s"); !errors.Is(r.err, errUnreachable) {
		t.Fatalf("health of a closed port: err %v, want errUnreachable", r.err)
	}
}
