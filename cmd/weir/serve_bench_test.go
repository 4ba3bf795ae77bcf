package main

import (
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/freeport"
)

// BenchmarkServeToMetadata starts the built binary as a single node in a fresh data directory and
// measures the time from the process start to the first Metadata answer that lists the node (ns/op),
// then stops it with SIGTERM outside the timer.
func BenchmarkServeToMetadata(b *testing.B) {
	bin := buildWeir(b)
	for b.Loop() {
		kafka, http, ctrl := freePort(b), freePort(b), freePort(b)
		cmd := exec.CommandContext(b.Context(), bin, "serve", "--data-dir", filepath.Join(b.TempDir(), "data"),
			"--kafka-addr", kafka, "--http-addr", http, "--controller-addr", ctrl)
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		firstMetadata(b, kafka)
		b.StopTimer()
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			b.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			b.Fatalf("weir serve after SIGTERM: %v", err)
		}
		b.StartTimer()
	}
}

// firstMetadata asks addr for Metadata, every millisecond, until an answer lists a broker.
func firstMetadata(b *testing.B, addr string) {
	b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RetryBackoffFn(func(int) time.Duration { return time.Millisecond }))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(serveBound)
	for {
		m, err := adm.BrokerMetadata(b.Context())
		if err == nil && len(m.Brokers) > 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("no Metadata answer from %s within %s: %v", addr, serveBound, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// freePort returns a free loopback address below the ephemeral range (freeport).
func freePort(tb testing.TB) string {
	tb.Helper()
	addrs, err := freeport.Addrs(1)
	if err != nil {
		tb.Fatal(err)
	}
	return addrs[0]
}
