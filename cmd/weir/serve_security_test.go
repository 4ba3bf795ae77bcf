package main

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeRejectsBadSecurityFlags: every bad listener, TLS or SASL setting ends the start with one
// usage line naming a flag, before the data directory is created.
func TestServeRejectsBadSecurityFlags(t *testing.T) {
	plain := []string{"--listeners", "PLAINTEXT://127.0.0.1:0"}
	cases := [][]string{
		{"--listeners", "PLAINTEXT://127.0.0.1:0", "--kafka-addr", "127.0.0.1:0"},
		{"--listeners", "PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0"},
		{"--listeners", "SECURE://127.0.0.1:0"},
		{"--listeners", "SECURE://127.0.0.1:0", "--listener-security-protocol-map", "SECURE:TLS"},
		{"--listeners", "plain://127.0.0.1:0"},
		{"--listeners", "PLAINTEXT://127.0.0.1"},
		{"--listeners", "SASL_SSL://127.0.0.1:0", "--tls-cert", "c.pem", "--tls-key", "k.pem"},
		{"--listeners", "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"},
		{"--advertised-listeners", "PLAINTEXT://h:1"},
		append(plain, "--advertised-listeners", "OTHER://h:1"),
		append(plain, "--inter-broker-listener-name", "NOPE"),
		append(plain, "--tls-client-auth", "maybe"),
		append(plain, "--tls-client-auth", "required"),
		append(plain, "--tls-cert", "c.pem"),
		append(plain, "--sasl-mechanisms", "GSSAPI"),
		append(plain, "--sasl-session-lifetime", "-1s"),
		append(plain, "--bootstrap-user", "admin"),
	}
	for _, args := range cases {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			root := newRootCmd()
			root.SetArgs(append([]string{"serve", "--data-dir", dir, "--http-addr", "127.0.0.1:0", "--controller-addr", "127.0.0.1:0"}, args...))
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			ctx, cancel := context.WithTimeout(t.Context(), serveBound)
			defer cancel()
			err := root.ExecuteContext(ctx)
			if !errors.Is(err, errUsage) {
				t.Fatalf("err %v, want a usage error", err)
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "--") {
				t.Errorf("error %q: want one line naming the flag", msg)
			}
			if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the data directory was created (%v)", err)
			}
		})
	}
}
