package main

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"strings"
	"testing"

	"github.com/weir-mq/weir/internal/server"
)

func TestCLIQuota(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.KafkaAddr, cfg.HTTPAddr, cfg.ControllerAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := server.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	b := []string{"--brokers", n.KafkaAddr()}
	mustRun(t, "", append([]string{"quota", "set", "--user", "alice", "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152"}, b...)...)
	mustRun(t, "", append([]string{"quota", "set", "--user", "alice", "--client-id-default", "--add-config", "request_percentage=50"}, b...)...)
	mustRun(t, "", append([]string{"quota", "set", "--client-id", "app", "--add-config", "producer_byte_rate=1024"}, b...)...)
	describe := func(args ...string) map[string]map[string]float64 {
		t.Helper()
		var list []quotaEntry
		if err := json.Unmarshal([]byte(mustRun(t, "", append(append([]string{"quota", "describe", "--json"}, args...), b...)...)), &list); err != nil {
			t.Fatal(err)
		}
		out := map[string]map[string]float64{}
		for _, e := range list {
			out[e.Entity] = e.Values
		}
		return out
	}
	all := describe()
	if len(all) != 3 || !maps.Equal(all["user=alice"], map[string]float64{"producer_byte_rate": 1 << 20, "consumer_byte_rate": 2 << 20}) ||
		all["user=alice,client-id=<default>"]["request_percentage"] != 50 || all["client-id=app"]["producer_byte_rate"] != 1024 {
		t.Fatalf("quota describe: %v", all)
	}
	if got := describe("--client-id-default"); len(got) != 1 || got["user=alice,client-id=<default>"] == nil {
		t.Fatalf("quota describe --client-id-default: %v", got)
	}
	if out := mustRun(t, "", append([]string{"quota", "describe", "--client-id", "app"}, b...)...); !strings.Contains(out, "client-id=app") ||
		!strings.Contains(out, "producer_byte_rate=1024") {
		t.Fatalf("quota describe table:\n%s", out)
	}
	mustRun(t, "", append([]string{"quota", "delete", "--user", "alice", "--delete-config", "producer_byte_rate"}, b...)...)
	if got := describe("--user", "alice"); len(got["user=alice"]) != 1 {
		t.Fatalf("after quota delete: %v", got)
	}
	if r := runCLI(t, "", append([]string{"quota", "set", "--client-id", "x", "--add-config", "fetch_rate=1"}, b...)...); r.err == nil ||
		!strings.Contains(r.err.Error(), "INVALID_REQUEST") {
		t.Fatalf("an unknown quota key: %v", r.err)
	}
	for _, args := range [][]string{
		{"quota", "set", "--add-config", "producer_byte_rate=1"},
		{"quota", "set", "--user", "a"},
		{"quota", "set", "--user", "a", "--add-config", "producer_byte_rate"},
		{"quota", "set", "--user", "a", "--user-default", "--add-config", "producer_byte_rate=1"},
		{"quota", "delete", "--user", "a"},
	} {
		if r := runCLI(t, "", append(args, b...)...); !errors.Is(r.err, errUsage) {
			t.Errorf("weir %v: %v, want a usage error", args, r.err)
		}
	}
}
