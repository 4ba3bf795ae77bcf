package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// benchResult is the part of `weir bench --json` the harness reads.
type benchResult struct {
	Records       int64   `json:"records"`
	Errors        int64   `json:"errors"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	Latency       *struct {
		P50 float64 `json:"p50"`
		P99 float64 `json:"p99"`
	} `json:"latency_ms"`
}

// kafkaTarget is anything speaking the Kafka protocol that `weir bench` (built from this checkout) drives.
type kafkaTarget struct {
	weirBin string
	brokers string
}

// bench runs `weir bench MODE` with the given flags and returns its JSON summary.
func (k kafkaTarget) bench(ctx context.Context, mode string, args ...string) (benchResult, error) {
	full := append([]string{"bench", mode, "--brokers", k.brokers, "--json", "--interval", "0", "--timeout", "30s",
		"--size", strconv.Itoa(recordSize), "--linger", "0s"}, args...)
	cmd := exec.CommandContext(ctx, k.weirBin, full...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var res benchResult
	if jerr := json.Unmarshal(out.Bytes(), &res); jerr != nil {
		return res, fmt.Errorf("weir %v: %w: %s", full, err, errOut.String())
	}
	if err != nil {
		return res, fmt.Errorf("weir %v: %w: %s", full, err, errOut.String())
	}
	return res, nil
}

// weirNode is one `weir serve` process on loopback with its own data folder.
type weirNode struct {
	cmd                *exec.Cmd
	kafkaAddr, httpURL string
}

func startWeir(ctx context.Context, bin, dir string) (*weirNode, error) {
	kafkaAddr, httpAddr, ctlAddr := freeAddr(), freeAddr(), freeAddr()
	cmd := exec.Command(bin, "serve", "--data-dir", dir, "--kafka-addr", kafkaAddr, "--http-addr", httpAddr,
		"--controller-addr", ctlAddr)
	logf, err := os.Create(filepath.Join(filepath.Dir(dir), filepath.Base(dir)+".log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	n := &weirNode{cmd: cmd, kafkaAddr: kafkaAddr, httpURL: "http://" + httpAddr + "/healthz"}
	if err := waitHealthy(ctx, n.httpURL); err != nil {
		n.stop()
		return nil, fmt.Errorf("weir: %w", err)
	}
	return n, nil
}

func (n *weirNode) target(bin string) kafkaTarget {
	return kafkaTarget{weirBin: bin, brokers: n.kafkaAddr}
}

// stop asks the node to shut down cleanly and waits for it.
func (n *weirNode) stop() {
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		_ = n.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = n.cmd.Process.Kill()
		<-done
	}
}

// fakeCluster is franz-go's in-memory Kafka (kfake) in this process: no disk at all.
type fakeCluster struct{ c *kfake.Cluster }

func startFake() (*fakeCluster, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return nil, err
	}
	return &fakeCluster{c: c}, nil
}

func (f *fakeCluster) target(bin string) kafkaTarget {
	return kafkaTarget{weirBin: bin, brokers: f.c.ListenAddrs()[0]}
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("no free loopback port: %v", err))
	}
	defer l.Close()
	return l.Addr().String()
}

// waitHealthy polls url until it answers 200, for up to a minute.
func waitHealthy(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not healthy: %w", url, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// rssBytes reads a process's resident set size from /proc (Linux).
func rssBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			kb, err := strconv.ParseInt(string(bytes.Fields(v)[0]), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}
