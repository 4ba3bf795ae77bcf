package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/server"
)

const (
	// benchRecords are the records per side per round: enough that a side's fixed costs (a consumer's
	// group join, a connection's setup) do not decide its rate. At 20000, the franz-go consumer's
	// rounds ran at 150k-280k records per second against 800k at 100000, and the poll ratio looked
	// 0.75 where the steady state gives about 0.3.
	benchRecords   = 100000
	benchBatch     = 100 // records per HTTP publish
	benchValueSize = 1024
	benchRounds    = 5
)

// benchConns is how many keep-alive HTTP connections publish at once (and goroutines produce in the
// same shape with franz-go): -args -bench.conns=N changes it from 64 (docs/http.md, "Speed").
var benchConns = flag.Int("bench.conns", 64, "BenchmarkHTTPVsKafka: HTTP connections publishing at once")

// benchValues is how many distinct random values the benchmarks publish and produce, in turn: many,
// so that neither side's batches compress better than real payloads would (one value repeated in a
// batch of 100 compresses about a hundred times over in franz-go's snappy batches). -args
// -bench.values=N changes it from 6400.
var benchValues = flag.Int("bench.values", 6400, "BenchmarkHTTPVsKafka, BenchmarkHTTPPollVsKafka: distinct random values of 1 KiB")

// BenchmarkHTTPVsKafka measures, on one node and in alternating rounds, HTTP publish (batches of 100
// 1 KiB records over 64 keep-alive connections, or -bench.conns) against a franz-go producer at
// acks=all, and an HTTP member polling max=1000 against a franz-go group consumer. Each round runs
// the sides one after the other; the metrics are the medians over the rounds of each side's records
// per second and of each round's ratio, HTTP over franz-go (a round's sides ran under the same load
// of a shared machine). The target (docs/http.md, "Speed") is a ratio of at least 0.5 for both.
//
// A sixth side reads by offset without a group (GET .../partitions/{p}/records, max=1000, one reader
// per partition), against the same franz-go consumer: read-ratio.
//
// Two more measures say what bounds the rates: the CPU time the process spent per record in each
// publish and poll side (-cpu-us/rec), and the storage's sync rounds per 100 records published
// (-syncs/100rec), with their mean duration on the HTTP side (http-publish-sync-ms).
//
// A fifth side, franz-go in the HTTP side's shape (one goroutine per connection, each producing 100
// records and waiting for them before the next 100), gives publish-ratio-same-shape: what HTTP costs
// over a Kafka client that keeps as few records in flight, apart from what keeping few records in
// flight costs.
func BenchmarkHTTPVsKafka(b *testing.B) {
	n := startNode(b, b.TempDir())
	createTopic(b, n, "bench", 4, nil)
	values := benchValueSet()
	bodies := publishBodies(values)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *benchConns}}
	b.Cleanup(hc.CloseIdleConnections)
	pc := client(b, n, kgo.ProducerLinger(0))

	var kafkaPub, httpPub, kafkaPoll, httpPoll, pubRatio, pollRatio, kafkaBatches, shapeRatio, httpRead, readRatio []float64
	var kafkaRounds, httpRounds, batchesRounds, httpRoundMs []float64
	var kafkaPubCPU, httpPubCPU, batchesCPU, kafkaPollCPU, httpPollCPU []float64
	round := 0
	for b.Loop() {
		for range benchRounds {
			round++
			var kp, hp, kb float64
			var hs rounds
			kafkaPubCPU = append(kafkaPubCPU, cpuPerRecord(func() {
				kafkaRounds = append(kafkaRounds, syncRounds(b, n, func() { kp = rate(timed(func() { benchKafkaProduce(b, pc, values) })) }).perBatch())
			}))
			httpPubCPU = append(httpPubCPU, cpuPerRecord(func() {
				hs = syncRounds(b, n, func() { hp = rate(timed(func() { benchHTTPPublish(b, n, hc, bodies) })) })
			}))
			httpRounds, httpRoundMs = append(httpRounds, hs.perBatch()), append(httpRoundMs, hs.ms())
			batchesCPU = append(batchesCPU, cpuPerRecord(func() {
				batchesRounds = append(batchesRounds, syncRounds(b, n, func() { kb = rate(timed(func() { benchKafkaBatches(b, pc, values) })) }).perBatch())
			}))
			kafkaBatches, shapeRatio = append(kafkaBatches, kb), append(shapeRatio, hp/kb)
			var kc, hq float64
			kafkaPollCPU = append(kafkaPollCPU, cpuPerRecord(func() { kc = rate(timed(func() { benchKafkaConsume(b, n, fmt.Sprintf("kafka-%d", round)) })) }))
			httpPollCPU = append(httpPollCPU, cpuPerRecord(func() { hq = rate(timed(func() { benchHTTPPoll(b, n, hc, fmt.Sprintf("http-%d", round)) })) }))
			hr := rate(timed(func() { benchHTTPRead(b, n, hc) }))
			kafkaPub, httpPub, pubRatio = append(kafkaPub, kp), append(httpPub, hp), append(pubRatio, hp/kp)
			kafkaPoll, httpPoll, pollRatio = append(kafkaPoll, kc), append(httpPoll, hq), append(pollRatio, hq/kc)
			httpRead, readRatio = append(httpRead, hr), append(readRatio, hr/kc)
		}
	}
	b.ReportMetric(median(kafkaPub), "kafka-produce-rec/s")
	b.ReportMetric(median(httpPub), "http-publish-rec/s")
	b.ReportMetric(median(pubRatio), "publish-ratio")
	b.ReportMetric(median(kafkaBatches), "kafka-produce-batches-rec/s")
	b.ReportMetric(median(shapeRatio), "publish-ratio-same-shape")
	b.ReportMetric(median(kafkaRounds), "kafka-produce-syncs/100rec")
	b.ReportMetric(median(httpRounds), "http-publish-syncs/100rec")
	b.ReportMetric(median(batchesRounds), "kafka-produce-batches-syncs/100rec")
	b.ReportMetric(median(httpRoundMs), "http-publish-sync-ms")
	b.ReportMetric(median(kafkaPubCPU), "kafka-produce-cpu-us/rec")
	b.ReportMetric(median(httpPubCPU), "http-publish-cpu-us/rec")
	b.ReportMetric(median(batchesCPU), "kafka-produce-batches-cpu-us/rec")
	b.ReportMetric(median(kafkaPollCPU), "kafka-consume-cpu-us/rec")
	b.ReportMetric(median(httpPollCPU), "http-poll-cpu-us/rec")
	b.ReportMetric(median(kafkaPoll), "kafka-consume-rec/s")
	b.ReportMetric(median(httpPoll), "http-poll-rec/s")
	b.ReportMetric(median(pollRatio), "poll-ratio")
	b.ReportMetric(median(httpRead), "http-read-rec/s")
	b.ReportMetric(median(readRatio), "read-ratio")
	b.Logf("publish ratios by round %.2f (same shape %.2f), poll ratios %.2f, read ratios %.2f", pubRatio, shapeRatio, pollRatio, readRatio)
	b.Logf("CPU µs per record: franz-go produce %.1f, HTTP publish %.1f, franz-go in HTTP's shape %.1f, franz-go consume %.1f, HTTP poll %.1f",
		kafkaPubCPU, httpPubCPU, batchesCPU, kafkaPollCPU, httpPollCPU)
	b.Logf("sync rounds per %d records: franz-go %.2f, HTTP %.2f, franz-go in HTTP's shape %.2f; HTTP's rounds took %.2f ms", benchBatch,
		kafkaRounds, httpRounds, batchesRounds, httpRoundMs)
}

// benchPollRounds are BenchmarkHTTPPollVsKafka's rounds: more than BenchmarkHTTPVsKafka's, since its
// rounds are short and the medians of a shared machine's rates need many.
const benchPollRounds = 9

// BenchmarkHTTPPollVsKafka measures the poll sides of BenchmarkHTTPVsKafka alone: benchRecords records
// are produced once, then each round reads them with a new franz-go group consumer and with a new
// HTTP member polling max=1000, one after the other. The metrics are the medians over the rounds of
// each side's records per second, of each round's ratio (HTTP over franz-go) and of each side's CPU
// time per record.
func BenchmarkHTTPPollVsKafka(b *testing.B) {
	n := startNode(b, b.TempDir())
	createTopic(b, n, "bench", 4, nil)
	hc := &http.Client{}
	b.Cleanup(hc.CloseIdleConnections)
	benchKafkaProduce(b, client(b, n, kgo.ProducerLinger(0)), benchValueSet())
	var kafkaPoll, httpPoll, ratio, kafkaCPU, httpCPU []float64
	round := 0
	for b.Loop() {
		for range benchPollRounds {
			round++
			var kc, hq float64
			kafkaCPU = append(kafkaCPU, cpuPerRecord(func() { kc = rate(timed(func() { benchKafkaConsume(b, n, fmt.Sprintf("kafka-%d", round)) })) }))
			httpCPU = append(httpCPU, cpuPerRecord(func() { hq = rate(timed(func() { benchHTTPPoll(b, n, hc, fmt.Sprintf("http-%d", round)) })) }))
			kafkaPoll, httpPoll, ratio = append(kafkaPoll, kc), append(httpPoll, hq), append(ratio, hq/kc)
		}
	}
	b.ReportMetric(median(kafkaPoll), "kafka-consume-rec/s")
	b.ReportMetric(median(httpPoll), "http-poll-rec/s")
	b.ReportMetric(median(ratio), "poll-ratio")
	b.ReportMetric(median(kafkaCPU), "kafka-consume-cpu-us/rec")
	b.ReportMetric(median(httpCPU), "http-poll-cpu-us/rec")
	b.Logf("poll ratios by round %.2f; CPU µs per record: franz-go consume %.1f, HTTP poll %.1f", ratio, kafkaCPU, httpCPU)
}

// rounds are the storage's group-commit rounds (fdatasyncs) that ran while a side published.
type rounds struct {
	count   float64
	seconds float64
}

// perBatch is rounds per benchBatch records published.
func (r rounds) perBatch() float64 { return r.count / (benchRecords / benchBatch) }

// ms is a round's mean duration in milliseconds.
func (r rounds) ms() float64 { return 1000 * r.seconds / r.count }

// syncRounds runs f and counts the node's sync rounds meanwhile, from /metrics: publishing at acks=all
// is answered after the round that makes the records durable, so a side's rate is the records a round
// carries over a round's duration.
func syncRounds(b *testing.B, n *server.Node, f func()) rounds {
	before := syncMetrics(b, n)
	f()
	after := syncMetrics(b, n)
	return rounds{count: after.count - before.count, seconds: after.seconds - before.seconds}
}

func syncMetrics(b *testing.B, n *server.Node) rounds {
	resp, err := http.Get("http://" + n.HTTPAddr() + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	var r rounds
	for line := range strings.Lines(string(raw)) {
		name, v, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch name {
		case "weir_storage_sync_round_duration_seconds_count":
			r.count, err = strconv.ParseFloat(v, 64)
		case "weir_storage_sync_round_duration_seconds_sum":
			r.seconds, err = strconv.ParseFloat(v, 64)
		}
		if err != nil {
			b.Fatalf("/metrics: %s: %v", line, err)
		}
	}
	return r
}

// cpuPerRecord runs f, a side's round, and returns the CPU time the process spent meanwhile (the
// node's, its clients' and the benchmark's, user and system) in microseconds per record: what the
// side costs the machine, which on a machine shared with other work bounds its rate better than the
// rate measured.
func cpuPerRecord(f func()) float64 {
	before := processCPU()
	f()
	return float64((processCPU() - before).Microseconds()) / benchRecords
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rate is records per second of a side's round that took d.
func rate(d time.Duration) float64 { return benchRecords / d.Seconds() }

// median is the median of v (the mean of the middle two for an even count).
func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	return (s[(len(s)-1)/2] + s[len(s)/2]) / 2
}

func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

// benchKafkaProduce produces benchRecords keyed 1 KiB records asynchronously and waits for all.
func benchKafkaProduce(b *testing.B, cl *kgo.Client, values [][]byte) {
	ctx := testCtx(b)
	var wg sync.WaitGroup
	wg.Add(benchRecords)
	for i := range benchRecords {
		cl.Produce(ctx, &kgo.Record{Topic: "bench", Key: fmt.Appendf(nil, "k%d", i%benchBatch), Value: values[i%len(values)]},
			func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
				wg.Done()
			})
	}
	wg.Wait()
}

// benchKafkaBatches produces benchRecords keyed 1 KiB records as benchHTTPPublish posts them:
// benchConns goroutines, each producing benchBatch records at a time and waiting for them.
func benchKafkaBatches(b *testing.B, cl *kgo.Client, values [][]byte) {
	ctx := testCtx(b)
	batches := make(chan int, benchRecords/benchBatch)
	for j := range benchRecords / benchBatch {
		batches <- j
	}
	close(batches)
	var wg sync.WaitGroup
	for range *benchConns {
		wg.Go(func() {
			for j := range batches {
				recs := make([]*kgo.Record, benchBatch)
				for i := range recs {
					recs[i] = &kgo.Record{Topic: "bench", Key: fmt.Appendf(nil, "k%d", i), Value: values[(j*benchBatch+i)%len(values)]}
				}
				if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// benchHTTPPublish posts benchRecords records in batches over benchConns connections, the bodies in
// turn.
func benchHTTPPublish(b *testing.B, n *server.Node, hc *http.Client, bodies [][]byte) {
	ctx := testCtx(b)
	url := "http://" + n.HTTPAddr() + "/v1/topics/bench/records"
	batches := make(chan int, benchRecords/benchBatch)
	for j := range benchRecords / benchBatch {
		batches <- j
	}
	close(batches)
	var wg sync.WaitGroup
	for range *benchConns {
		wg.Go(func() {
			for j := range batches {
				req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(bodies[j%len(bodies)]))
				resp, err := hc.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Errorf("publish: %d", resp.StatusCode)
					return
				}
			}
		})
	}
	wg.Wait()
}

// benchKafkaConsume reads benchRecords records with a new franz-go group consumer from the start.
func benchKafkaConsume(b *testing.B, n *server.Node, group string) {
	cl := client(b, n, kgo.ConsumerGroup(group), kgo.ConsumeTopics("bench"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := testCtx(b)
	got := 0
	for got < benchRecords {
		fs := cl.PollRecords(ctx, 1000)
		if ctx.Err() != nil {
			b.Fatalf("consumed %d of %d", got, benchRecords)
		}
		got += fs.NumRecords()
	}
}

// benchHTTPPoll reads benchRecords records with a new HTTP member polling max=1000, then leaves.
func benchHTTPPoll(b *testing.B, n *server.Node, hc *http.Client, group string) {
	ctx := testCtx(b)
	base := "http://" + n.HTTPAddr() + "/v1/groups/" + group
	url := base + "/records?topic=bench&from=earliest&max=1000&wait=1000"
	member, got := "", 0
	var buf bytes.Buffer
	for got < benchRecords {
		if ctx.Err() != nil {
			b.Fatalf("polled %d of %d", got, benchRecords)
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		raw, err := readCounted(&buf, resp)
		if err != nil {
			b.Fatalf("poll: %v", err)
		}
		got += bytes.Count(raw, []byte(`{"topic":`))
		if member == "" {
			_, rest, _ := bytes.Cut(raw, []byte(`"member_id":"`))
			id, _, _ := bytes.Cut(rest, []byte(`"`))
			member = string(id)
			url = base + "/records?max=1000&wait=1000&member=" + member
		}
	}
	req, _ := http.NewRequestWithContext(context.Background(), "DELETE", base+"/members/"+member, nil)
	if resp, err := hc.Do(req); err == nil {
		_ = resp.Body.Close()
	}
}

// readCounted reads an answer into buf, reused from one answer to the next: the answer is counted,
// not decoded, and not read into a new slice grown from nothing each time (io.ReadAll), because the
// client shares the node's two cores and what it spends is charged to the HTTP side.
func readCounted(buf *bytes.Buffer, resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	buf.Reset()
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, buf.Bytes())
	}
	return buf.Bytes(), nil
}

// benchHTTPRead reads benchRecords records by offset, max=1000 at a time, with one reader per
// partition of the topic from its start, each moving on to the answer's next_offset.
func benchHTTPRead(b *testing.B, n *server.Node, hc *http.Client) {
	ctx := testCtx(b)
	var got atomic.Int64
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Go(func() {
			var buf bytes.Buffer
			offset := int64(0)
			for got.Load() < benchRecords {
				url := fmt.Sprintf("http://%s/v1/topics/bench/partitions/%d/records?offset=%d&max=1000", n.HTTPAddr(), p, offset)
				req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
				resp, err := hc.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				raw, err := readCounted(&buf, resp)
				if err != nil {
					b.Errorf("read: %v", err)
					return
				}
				got.Add(int64(bytes.Count(raw, []byte(`{"topic":`))))
				_, next, _ := bytes.Cut(raw, []byte(`"next_offset":`))
				end := bytes.IndexByte(next, ',')
				if offset, err = strconv.ParseInt(string(next[:max(end, 0)]), 10, 64); err != nil {
					b.Errorf("read: no next_offset in %.200s", raw)
					return
				}
			}
		})
	}
	wg.Wait()
}

// benchValueSet is -bench.values values of benchValueSize random letters and digits: printable, as
// most HTTP values are, and about as hard to compress as real payloads. One value repeated compressed
// fifty times over in the franz-go sides' snappy batches, so that their consumer moved a fiftieth of
// the bytes an HTTP answer carries; a few hundred distinct values still let a batch's compression
// find repeats.
func benchValueSet() [][]byte {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	rng := rand.New(rand.NewPCG(1, 2))
	values := make([][]byte, max(*benchValues, 1))
	for i := range values {
		v := make([]byte, benchValueSize)
		for j := range v {
			v[j] = alphabet[rng.IntN(len(alphabet))]
		}
		values[i] = v
	}
	return values
}

// publishBodies are the HTTP publish bodies of benchBatch records each that carry values in turn,
// as many as it takes to carry each value once.
func publishBodies(values [][]byte) [][]byte {
	bodies := make([][]byte, (len(values)+benchBatch-1)/benchBatch)
	for j := range bodies {
		recs := make([]map[string]string, benchBatch)
		for i := range recs {
			recs[i] = map[string]string{"key": fmt.Sprintf("k%d", i), "value": string(values[(j*benchBatch+i)%len(values)])}
		}
		bodies[j], _ = json.Marshal(map[string]any{"records": recs})
	}
	return bodies
}
