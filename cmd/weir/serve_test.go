package main

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/server"
)

// serveBound is how long a serve that must fail at start may run before the test calls it a hang.
const serveBound = 10 * time.Second

// runServe runs weir serve in-process on free local ports with dataDir and extra flags (later flags
// win), and returns its error; a serve still running after serveBound fails the test.
func runServe(t *testing.T, dataDir string, extra ...string) error {
	t.Helper()
	args := append([]string{"serve", "--data-dir", dataDir, "--kafka-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--controller-addr", "127.0.0.1:0"}, extra...)
	root := newRootCmd()
	root.SetArgs(args)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	ctx, cancel := context.WithTimeout(t.Context(), serveBound)
	defer cancel()
	err := root.ExecuteContext(ctx)
	if ctx.Err() != nil {
		t.Fatalf("weir %s: still running after %s, want a failed start", strings.Join(args, " "), serveBound)
	}
	return err
}

func TestServeRejectsBadFlags(t *testing.T) {
	cases := [][]string{
		{"--node-id", "-3"},
		{"--kafka-addr", "localhost"},
		{"--kafka-addr", "localhost:http"},
		{"--http-addr", ":99999"},
		{"--controller-addr", "no-port"},
		{"--advertised-kafka-addr", "host:-1"},
		{"--kafka-addr", "127.0.0.1:19092", "--http-addr", "127.0.0.1:19092"},
		{"--controller-voters", "1"},
		{"--controller-voters", "x@127.0.0.1:19093"},
		{"--controller-voters", "-1@127.0.0.1:19093"},
		{"--controller-voters", "1@127.0.0.1"},
		{"--controller-voters", "1@127.0.0.1:0"},
		{"--controller-voters", "1@:19093"},
		{"--controller-voters", "1@127.0.0.1:19093,1@127.0.0.1:19193"},
		{"--controller-voters", "1@127.0.0.1:19093,2@127.0.0.1:19093"},
		{"--controller-voters", "1@127.0.0.1:19093,"},
		// This node listens where the list puts voter 2, and is not in the list itself.
		{"--controller-addr", "127.0.0.1:19093", "--controller-voters", "2@127.0.0.1:19093"},
		// A voter that listens where the list puts another voter (node 1 given node 2's address).
		{"--controller-addr", "127.0.0.1:19193", "--controller-voters", "1@127.0.0.1:19093,2@127.0.0.1:19193"},
		{"--broker-session-timeout", "-1s"},
		{"--broker-heartbeat-interval", "-1s"},
		{"--broker-heartbeat-interval", "7s"},
		{"--broker-heartbeat-interval", "2s", "--broker-session-timeout", "1s"},
		{"--controller-raft-timeout", "1ms"},
		{"--replica-lag-time-max", "-1s"},
		{"--group-initial-rebalance-delay", "-1s"},
		{"--group-min-session-timeout", "-1s"},
		{"--group-min-session-timeout", "1h", "--group-max-session-timeout", "1m"},
		{"--group-consumer-heartbeat-interval", "-1s"},
		{"--group-consumer-heartbeat-interval", "10s", "--group-consumer-session-timeout", "10s"},
		{"--offsets-retention", "-1h"},
		{"--offsets-topic-num-partitions", "-1"},
		{"--offsets-topic-replication-factor", "-1"},
		{"--http-members-max", "0"},
		{"--share-record-lock-duration", "5s"},
		{"--share-delivery-count-limit", "11"},
		{"--share-partition-max-record-locks", "50"},
		{"--share-session-timeout", "44s"},
		{"--share-session-timeout", "61s"},
		{"--share-heartbeat-interval", "4s"},
		{"--share-heartbeat-interval", "16s"},
		{"--share-state-topic-num-partitions", "-1"},
		{"--share-state-topic-replication-factor", "-1"},
		{"--authorizer", "simple"},
		{"--authorizer", "acl", "--super-users", "admin"},
		{"--authorizer", "acl", "--super-users", "User:admin;User:"},
	}
	for _, args := range cases {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			err := runServe(t, dir, args...)
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
	t.Run("from the environment", func(t *testing.T) {
		t.Setenv("WEIR_NODE_ID", "-3")
		if err := runServe(t, filepath.Join(t.TempDir(), "data")); !errors.Is(err, errUsage) {
			t.Fatalf("WEIR_NODE_ID=-3: err %v, want a usage error", err)
		}
	})
}

func TestServeFailedStartLeavesNoDataDir(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, flag := range []string{"--kafka-addr", "--controller-addr", "--http-addr"} {
		t.Run(flag, func(t *testing.T) {
			tmp := t.TempDir()
			fresh := filepath.Join(tmp, "new", "data")
			if err := runServe(t, fresh, flag, busy.Addr().String()); err == nil {
				t.Fatalf("serve with %s on a busy port started", flag)
			}
			if _, err := os.Stat(filepath.Join(tmp, "new")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the failed start left %s behind (%v)", filepath.Join(tmp, "new"), err)
			}
			existing := filepath.Join(tmp, "existing")
			if err := os.Mkdir(existing, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := runServe(t, existing, flag, busy.Addr().String()); err == nil {
				t.Fatalf("serve with %s on a busy port started", flag)
			}
			if _, err := os.Stat(existing); err != nil {
				t.Errorf("the failed start removed the data directory that existed before it: %v", err)
			}
		})
	}
}

func TestServeSettingsPrecedence(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "weir.conf")
	writeFile(t, conf, "# every layer sets node-id; env and file set rack; only the file sets http-addr\r\n"+
		"node-id = 3\nrack = from-file\nhttp-addr = 127.0.0.1:18080\n  data-dir=  /var/lib/weir  \n")
	t.Setenv("WEIR_NODE_ID", "2")
	t.Setenv("WEIR_RACK", "from-env")
	t.Setenv("WEIR_CONFIG", conf)
	cmd := newServeCmd()
	if err := cmd.ParseFlags([]string{"--node-id", "1"}); err != nil {
		t.Fatal(err)
	}
	if err := loadSettings(cmd.LocalNonPersistentFlags()); err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]string{
		"node-id": "1", "rack": "from-env", "http-addr": "127.0.0.1:18080", "data-dir": "/var/lib/weir",
		"kafka-addr": server.DefaultConfig().KafkaAddr,
	} {
		if got := cmd.Flags().Lookup(flag).Value.String(); got != want {
			t.Errorf("--%s = %q, want %q", flag, got, want)
		}
	}
}

func TestServeConfigFileErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"node-id 3\n", `:1: "node-id 3": want key = value`},
		{"\nnode-id = 3\nnode-id = 4\n", ":3: node-id is set again (first on line 2)"},
		{"config = other.conf\n", `:1: unknown key "config"`},
		{"= 3\n", `:1: "= 3": want key = value`},
		// A value the command line overrides is checked all the same.
		{"kafka-addr = 127.0.0.1:0\nnode-id = one\n", `:2: node-id "one": want an integer`},
	} {
		conf := filepath.Join(t.TempDir(), "weir.conf")
		writeFile(t, conf, c.text)
		err := runServe(t, filepath.Join(t.TempDir(), "data"), "--config", conf, "--node-id", "1")
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), conf+c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("config %q: err %v, want one usage line with %q", c.text, err, conf+c.want)
		}
	}
}
