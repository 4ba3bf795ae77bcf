package main

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/weir-mq/weir/internal/server"
)

func TestCLIACL(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.KafkaAddr, cfg.HTTPAddr, cfg.ControllerAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Authorizer, cfg.SuperUsers = server.AuthorizerACL, []string{"User:ANONYMOUS"}
	n, err := server.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	b := []string{"--brokers", n.KafkaAddr()}

	mustRun(t, "", append([]string{"acl", "add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "write", "--topic", "orders"}, b...)...)
	mustRun(t, "", append([]string{"acl", "add", "--deny-principal", "User:bob", "--deny-host", "10.0.0.1", "--topic", "logs-", "--resource-pattern-type", "prefixed"}, b...)...)
	list := func(args ...string) []aclEntry {
		t.Helper()
		var got []aclEntry
		if err := json.Unmarshal([]byte(mustRun(t, "", append(append([]string{"acl", "list", "--json"}, args...), b...)...)), &got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := list(); len(got) != 3 {
		t.Fatalf("list: %+v, want 3 ACLs", got)
	}
	// MATCH on logs-app finds bob's prefixed deny, and nothing on orders.
	got := list("--topic", "logs-app", "--resource-pattern-type", "match")
	if len(got) != 1 || got[0] != (aclEntry{"User:bob", "10.0.0.1", "ALL", "DENY", "TOPIC", "logs-", "PREFIXED"}) {
		t.Fatalf("list match logs-app: %+v", got)
	}
	out := mustRun(t, "", append([]string{"acl", "remove", "--allow-principal", "User:alice", "--topic", "orders"}, b...)...)
	if rows := fields(out); len(rows) != 3 {
		t.Fatalf("remove printed %q, want a header and 2 ACLs", out)
	}
	if got := list(); len(got) != 1 {
		t.Fatalf("after remove: %+v", got)
	}

	for _, args := range [][]string{
		{"acl", "add", "--topic", "x"},
		{"acl", "add", "--allow-principal", "User:a"},
		{"acl", "add", "--allow-principal", "alice", "--topic", "x"},
		{"acl", "add", "--allow-principal", "User:a", "--topic", "x", "--operation", "fly"},
		{"acl", "add", "--allow-principal", "User:a", "--topic", "x", "--resource-pattern-type", "match"},
		{"acl", "remove"},
	} {
		if r := runCLI(t, "", append(args, b...)...); !errors.Is(r.err, errUsage) {
			t.Errorf("weir %v: %v, want a usage error", args, r.err)
		}
	}
}
