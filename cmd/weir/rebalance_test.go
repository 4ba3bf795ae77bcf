package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/server"
)

// TestCLIRebalanceBalanced drives `weir cluster rebalance` against one real node: a one-broker
// cluster is balanced, so the dry run plans nothing and the command moves nothing; bad flags are
// usage errors.
func TestCLIRebalanceBalanced(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.KafkaAddr, cfg.HTTPAddr, cfg.ControllerAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Logger = slog.New(slog.DiscardHandler)
	n, err := server.Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() { _ = n.Close() })
	b := n.KafkaAddr()
	mustRun(t, "", "--brokers", b, "topic", "create", "r", "--partitions", "3")

	res := runCLI(t, "", "cluster", "rebalance", "--brokers", b, "--dry-run")
	if res.err != nil || strings.TrimSpace(res.stdout) != `{"version":1,"partitions":[]}` ||
		!strings.Contains(res.stderr, "plan: 0 of 3 partitions change: 0 replicas move (0 B to copy)") {
		t.Errorf("dry run: %v\nstdout %s\nstderr %s", res.err, res.stdout, res.stderr)
	}
	out := mustRun(t, "", "cluster", "rebalance", "--brokers", b, "--throttle", "1000")
	if !strings.Contains(out, "the cluster is balanced") {
		t.Errorf("rebalance:\n%s", out)
	}
	for _, args := range [][]string{{"--throttle", "-1"}, {"--wait", "0s"}, {"extra"}} {
		res := runCLI(t, "", append([]string{"cluster", "rebalance", "--brokers", b}, args...)...)
		if res.err == nil {
			t.Errorf("rebalance %v: no error", args)
		}
	}
}

// TestRebalanceProgressLine: the line names partitions and bytes, and the ETA at the rate so far.
func TestRebalanceProgressLine(t *testing.T) {
	for _, c := range []struct {
		m    moveProgress
		want string
	}{
		{moveProgress{moved: 0, total: 9, toCopy: 4 << 20, elapsed: time.Second}, "moved 0 of 9 partitions, copied 0 B of 4.0 MiB, ETA unknown"},
		{moveProgress{moved: 0, total: 9, copied: 1 << 20, toCopy: 4 << 20, elapsed: time.Second}, "moved 0 of 9 partitions, copied 1.0 MiB of 4.0 MiB, ETA unknown"},
		{moveProgress{moved: 3, total: 9, copied: 1 << 20, toCopy: 4 << 20, elapsed: 2 * time.Second, rate: 512 << 10}, "moved 3 of 9 partitions, copied 1.0 MiB of 4.0 MiB, 512.0 KiB/s, ETA 6s"},
		{moveProgress{moved: 9, total: 9, copied: 5 << 20, toCopy: 4 << 20, elapsed: 7 * time.Second}, "moved 9 of 9 partitions, copied 5.0 MiB of 5.0 MiB, done in 7s"},
		{moveProgress{moved: 1, total: 2, copied: 3 << 30, toCopy: 3 << 30, elapsed: time.Minute}, "moved 1 of 2 partitions, copied 3.0 GiB of 3.0 GiB, catching up"},
	} {
		if got := c.m.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.m, got, c.want)
		}
	}
}
