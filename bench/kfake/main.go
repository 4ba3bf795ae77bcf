// Command kfake drives the same franz-go load against weir (a real process with its default durability) and
// against franz-go's in-memory fake cluster (kfake, no disk at all), alternating A B A B, and prints the
// medians and the weir/kfake ratio. The fake does no I/O, so the ratio is the cost of weir's durability and
// protocol handling.
//
//	go run ./bench/kfake [-records 200000] [-rounds 3] [-size 1024] [-partitions 4]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

type result struct{ produce, consume float64 } // records per second

func main() {
	records := flag.Int("records", 200_000, "records per run")
	rounds := flag.Int("rounds", 3, "rounds (each runs weir and kfake once)")
	size := flag.Int("size", 1024, "record value size in bytes")
	partitions := flag.Int("partitions", 4, "partitions of the topic")
	flag.Parse()
	if err := run(*records, *rounds, *size, int32(*partitions)); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(records, rounds, size int, partitions int32) error {
	tmp, err := os.MkdirTemp("", "weir-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "weir")
	build := exec.Command("go", "build", "-o", bin, "./cmd/weir")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building weir: %w", err)
	}
	var weirRuns, fakeRuns []result
	for i := range rounds {
		w, err := runWeir(bin, filepath.Join(tmp, fmt.Sprint("data", i)), records, size, partitions)
		if err != nil {
			return fmt.Errorf("weir round %d: %w", i, err)
		}
		f, err := runFake(records, size, partitions)
		if err != nil {
			return fmt.Errorf("kfake round %d: %w", i, err)
		}
		fmt.Printf("round %d: weir produce %.0f/s consume %.0f/s | kfake produce %.0f/s consume %.0f/s\n",
			i+1, w.produce, w.consume, f.produce, f.consume)
		weirRuns, fakeRuns = append(weirRuns, w), append(fakeRuns, f)
	}
	wp, wc := median(weirRuns, func(r result) float64 { return r.produce }), median(weirRuns, func(r result) float64 { return r.consume })
	fp, fc := median(fakeRuns, func(r result) float64 { return r.produce }), median(fakeRuns, func(r result) float64 { return r.consume })
	mb := func(rps float64) float64 { return rps * float64(size) / (1 << 20) }
	fmt.Printf("\n%d records of %d B, %d partitions, acks=all, idempotent, %d rounds (medians)\n", records, size, partitions, rounds)
	fmt.Printf("%-8s %14s %10s %14s %10s\n", "", "produce rec/s", "MiB/s", "consume rec/s", "MiB/s")
	fmt.Printf("%-8s %14.0f %10.1f %14.0f %10.1f\n", "weir", wp, mb(wp), wc, mb(wc))
	fmt.Printf("%-8s %14.0f %10.1f %14.0f %10.1f\n", "kfake", fp, mb(fp), fc, mb(fc))
	fmt.Printf("%-8s %14.2f %10s %14.2f\n", "ratio", wp/fp, "", wc/fc)
	return nil
}

func median(rs []result, f func(result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func runFake(records, size int, partitions int32) (result, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "bench"))
	if err != nil {
		return result{}, err
	}
	defer c.Close()
	return load(c.ListenAddrs()[0], records, size, partitions, false)
}

func runWeir(bin, dir string, records, size int, partitions int32) (result, error) {
	kafkaAddr, httpAddr, ctlAddr := freeAddr(), freeAddr(), freeAddr()
	cmd := exec.Command(bin, "serve", "--data-dir", dir, "--kafka-addr", kafkaAddr, "--http-addr", httpAddr,
		"--controller-addr", ctlAddr)
	cmd.Stderr = nil
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	if err := waitHealthy(httpAddr, 20*time.Second); err != nil {
		return result{}, err
	}
	return load(kafkaAddr, records, size, partitions, true)
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func waitHealthy(addr string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("weir did not become healthy")
}

// load produces records to topic "bench" with one acks=all producer, then reads them all back with one
// consumer, and returns both rates.
func load(addr string, records, size int, partitions int32, create bool) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if create {
		adm, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			return result{}, err
		}
		_, err = kadm.NewClient(adm).CreateTopic(ctx, partitions, 1, nil, "bench")
		adm.Close()
		if err != nil {
			return result{}, fmt.Errorf("create topic: %w", err)
		}
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		return result{}, err
	}
	value := make([]byte, size)
	var wg sync.WaitGroup
	var perr error
	var mu sync.Mutex
	start := time.Now()
	for range records {
		wg.Add(1)
		prod.Produce(ctx, &kgo.Record{Topic: "bench", Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				perr = err
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	produceTime := time.Since(start)
	prod.Close()
	if perr != nil {
		return result{}, fmt.Errorf("produce: %w", perr)
	}

	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("bench"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(64<<20))
	if err != nil {
		return result{}, err
	}
	defer cons.Close()
	start = time.Now()
	got := 0
	for got < records {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return result{}, fmt.Errorf("consume after %d records: %w", got, err)
		}
		got += fs.NumRecords()
	}
	consumeTime := time.Since(start)
	return result{
		produce: float64(records) / produceTime.Seconds(),
		consume: float64(records) / consumeTime.Seconds(),
	}, nil
}
