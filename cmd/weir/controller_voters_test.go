package main

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/weir-mq/weir/internal/server"
)

// TestCLIControllerVoters drives `weir cluster controller` against one real node, the only voter:
// describe names it leader and voter; removing it (the last voter), adding it again and adding a node
// that is not a broker are refused with the cluster's reason; malformed arguments are usage errors.
func TestCLIControllerVoters(t *testing.T) {
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
	out := mustRun(t, "", "cluster", "controller", "describe", "--brokers", b)
	if !strings.Contains(out, "leader 1, term ") || !strings.Contains(out, "1     leader") {
		t.Errorf("describe:\n%s", out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"remove-voter", "1"}, "INVALID_REQUEST"},
		{[]string{"remove-voter", "7"}, "VOTER_NOT_FOUND"},
		{[]string{"add-voter", "1@127.0.0.1:1"}, "DUPLICATE_VOTER"},
		{[]string{"add-voter", "5@127.0.0.1:1"}, "not a live broker"},
	} {
		res := runCLI(t, "", append(append([]string{"cluster", "controller"}, c.args...), "--brokers", b)...)
		if !errors.Is(res.err, errQuorumChange) || !strings.Contains(res.err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, res.err, c.want)
		}
	}
	for _, args := range [][]string{{"add-voter", "5"}, {"add-voter", "x@h:1"}, {"add-voter", "5@h:0"}, {"remove-voter", "one"}} {
		res := runCLI(t, "", append(append([]string{"cluster", "controller"}, args...), "--brokers", b)...)
		if !errors.Is(res.err, errUsage) {
			t.Errorf("%v: %v, want a usage error", args, res.err)
		}
	}
}
