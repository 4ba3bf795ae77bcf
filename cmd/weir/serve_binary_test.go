package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// buildWeir builds this package's binary into a temporary directory that every user may read, so a
// test may run it as another user too.
func buildWeir(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	bin := filepath.Join(dir, "weir")
	if out, err := exec.CommandContext(tb.Context(), "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		tb.Fatalf("go build: %v\n%s", err, out)
	}
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	return bin
}

// serveFailure is a `weir serve` that must exit non-zero at start with one line on stderr.
type serveFailure struct {
	name string
	args []string
	env  []string
	// asNobody runs the binary as user nobody when the test runs as root, whom permissions do not stop.
	asNobody bool
	want     []string
}

func TestServeStartErrorsFromTheBinary(t *testing.T) {
	bin := buildWeir(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	tmp := t.TempDir()
	file := filepath.Join(tmp, "a-file")
	readOnly := filepath.Join(tmp, "read-only")
	badConf := filepath.Join(tmp, "bad.conf")
	unknownConf := filepath.Join(tmp, "unknown.conf")
	writeFile(t, file, "")
	writeFile(t, badConf, "# a node\nkafka-addr = 127.0.0.1:0\n\ndrain-timeout = 5\n")
	writeFile(t, unknownConf, "kafak-addr = 127.0.0.1:0\n")
	if err := os.Mkdir(readOnly, 0o555); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	b := busy.Addr().String()
	for _, c := range []serveFailure{
		{name: "kafka port in use", args: []string{"--kafka-addr", b}, want: []string{"--kafka-addr " + b + ": address already in use"}},
		{name: "http port in use", args: []string{"--http-addr", b}, want: []string{"--http-addr " + b + ": address already in use"}},
		{name: "controller port in use", args: []string{"--controller-addr", b}, want: []string{"--controller-addr " + b + ": address already in use"}},
		{name: "data dir is a file", args: []string{"--data-dir", file}, want: []string{"--data-dir " + file + ": not a directory"}},
		{name: "data dir under a file", args: []string{"--data-dir", filepath.Join(file, "data")}, want: []string{"--data-dir", "not a directory"}},
		{name: "data dir unwritable", args: []string{"--data-dir", readOnly}, asNobody: true,
			want: []string{"--data-dir " + readOnly + ": not writable: permission denied"}},
		{name: "flag does not parse", args: []string{"--drain-timeout", "5"}, want: []string{`--drain-timeout "5": want a duration`}},
		{name: "env does not parse", env: []string{"WEIR_NODE_ID=abc"}, want: []string{`WEIR_NODE_ID "abc": want an integer`}},
		{name: "env out of range", env: []string{"WEIR_OFFSETS_TOPIC_REPLICATION_FACTOR=40000"},
			want: []string{`WEIR_OFFSETS_TOPIC_REPLICATION_FACTOR "40000": out of range for int16`}},
		{name: "config value does not parse", args: []string{"--config", badConf}, want: []string{badConf + `:4: drain-timeout "5": want a duration`}},
		{name: "config key unknown", args: []string{"--config", unknownConf}, want: []string{unknownConf + `:1: unknown key "kafak-addr"`}},
		{name: "config file missing", env: []string{"WEIR_CONFIG=" + filepath.Join(tmp, "none.conf")},
			want: []string{"--config " + filepath.Join(tmp, "none.conf") + ": no such file or directory"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dataDir := filepath.Join(tmp, strings.ReplaceAll(c.name, " ", "-"))
			code, stderr := runServeBinary(t, bin, c, dataDir)
			if code != 1 {
				t.Errorf("exit status %d, want 1 (stderr %q)", code, stderr)
			}
			line, rest, _ := strings.Cut(stderr, "\n")
			if rest != "" || !strings.HasPrefix(line, "weir: ") {
				t.Fatalf("stderr %q: want one line starting with weir:", stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(line, w) {
					t.Errorf("stderr %q: want %q in it", line, w)
				}
			}
			if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the failed start left %s behind (%v)", dataDir, err)
			}
		})
	}
}

// runServeBinary runs `weir serve` on free local ports and dataDir, then c's flags (which win), and
// returns its exit status and stderr.
func runServeBinary(t *testing.T, bin string, c serveFailure, dataDir string) (int, string) {
	t.Helper()
	args := append([]string{"serve", "--data-dir", dataDir, "--kafka-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--controller-addr", "127.0.0.1:0"}, c.args...)
	ctx, cancel := context.WithTimeout(t.Context(), serveBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), c.env...)
	if c.asNobody && os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("weir %s: still running after %s, want a failed start", strings.Join(args, " "), serveBound)
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
