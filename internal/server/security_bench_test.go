package server_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/server"
	"github.com/weir-mq/weir/internal/tlstest"
)

// benchRecords and benchValueBytes are one round of BenchmarkTLSThroughput: 32 MiB produced, then
// consumed, per listener.
const (
	benchRecords    = 32768
	benchValueBytes = 1 << 10
)

// BenchmarkTLSThroughput produces and consumes the same load through a node's PLAINTEXT listener and
// its SSL listener (TLS 1.3, AES-GCM or ChaCha20 as Go negotiates them), alternating rounds, and
// reports the throughput of each and their ratios (tls/plain; docs/security.md wants at least 0.7).
func BenchmarkTLSThroughput(b *testing.B) {
	ca := tlstest.NewCA(b)
	dir := b.TempDir()
	cfg := testConfig(dir)
	cfg.KafkaAddr = ""
	cfg.Listeners = []server.Listener{
		{Name: "PLAINTEXT", Protocol: wire.Plaintext, Addr: "127.0.0.1:0"},
		{Name: "SSL", Protocol: wire.SSL, Addr: "127.0.0.1:0"},
	}
	cfg.TLS.CertFile, cfg.TLS.KeyFile = ca.Server(b, "broker").Write(b, dir, "server")
	n, err := server.Start(b.Context(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	ctx := b.Context()
	tlsOpt := kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool, ServerName: "localhost", MinVersion: tls.VersionTLS12})
	listeners := []struct {
		name string
		opts []kgo.Opt
	}{
		{"PLAINTEXT", nil},
		{"SSL", []kgo.Opt{tlsOpt}},
	}
	adm, err := kgo.NewClient(kgo.SeedBrokers(n.ListenerAddr("PLAINTEXT")))
	if err != nil {
		b.Fatal(err)
	}
	defer adm.Close()
	// Random values, sent uncompressed: the bytes on the wire are the bytes encrypted.
	value := make([]byte, benchValueBytes)
	_, _ = rand.Read(value)
	var produceSecs, consumeSecs [2]float64
	round := 0
	for b.Loop() {
		for i, l := range listeners {
			topic := "bench-" + l.name + "-" + time.Now().Format("150405.000000")
			if _, err := kadm.NewClient(adm).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
				b.Fatal(err)
			}
			opts := append([]kgo.Opt{kgo.SeedBrokers(n.ListenerAddr(l.name)), kgo.ProducerLinger(0),
				kgo.ProducerBatchCompression(kgo.NoCompression())}, l.opts...)
			produceSecs[i] += produceRound(ctx, b, opts, topic, value)
			consumeSecs[i] += consumeRound(ctx, b, opts, topic)
		}
		round++
	}
	mb := float64(round*benchRecords*benchValueBytes) / 1e6
	b.ReportMetric(mb/produceSecs[0], "plain-produce-MB/s")
	b.ReportMetric(mb/produceSecs[1], "tls-produce-MB/s")
	b.ReportMetric(produceSecs[0]/produceSecs[1], "produce-tls/plain")
	b.ReportMetric(mb/consumeSecs[0], "plain-consume-MB/s")
	b.ReportMetric(mb/consumeSecs[1], "tls-consume-MB/s")
	b.ReportMetric(consumeSecs[0]/consumeSecs[1], "consume-tls/plain")
}

// produceRound produces benchRecords values to topic with a client of opts and returns the seconds
// it took, the client's connection included.
func produceRound(ctx context.Context, b *testing.B, opts []kgo.Opt, topic string, value []byte) float64 {
	start := time.Now()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	errs := make(chan error, 1)
	for range benchRecords {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	return time.Since(start).Seconds()
}

// consumeRound reads topic's benchRecords records from the start with a client of opts and returns
// the seconds it took.
func consumeRound(ctx context.Context, b *testing.B, opts []kgo.Opt, topic string) float64 {
	start := time.Now()
	cl, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	for got := 0; got < benchRecords; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			b.Fatal(err)
		}
		got += fs.NumRecords()
	}
	return time.Since(start).Seconds()
}

// BenchmarkSCRAMHandshake measures what a SCRAM-SHA-512 authentication adds to a new TLS
// connection: a client connects and sends one request, over SASL_SSL, then over SSL, alternating;
// it reports both in ms per connection. The broker's share is the PBKDF2-free check of the proof;
// the client's is PBKDF2 at the credential's 8192 iterations.
func BenchmarkSCRAMHandshake(b *testing.B) {
	ca := tlstest.NewCA(b)
	dir := b.TempDir()
	cfg := testConfig(dir)
	cfg.KafkaAddr = ""
	cfg.Listeners = []server.Listener{
		{Name: "PLAINTEXT", Protocol: wire.Plaintext, Addr: "127.0.0.1:0"},
		{Name: "SSL", Protocol: wire.SSL, Addr: "127.0.0.1:0"},
		{Name: "SASL_SSL", Protocol: wire.SASLSSL, Addr: "127.0.0.1:0"},
	}
	cfg.TLS.CertFile, cfg.TLS.KeyFile = ca.Server(b, "broker").Write(b, dir, "server")
	cfg.BootstrapUser = "admin:admin-secret"
	n, err := server.Start(b.Context(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	tlsOpt := kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool, ServerName: "localhost", MinVersion: tls.VersionTLS12})
	connect := func(listener string, extra ...kgo.Opt) float64 {
		start := time.Now()
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.ListenerAddr(listener)), tlsOpt}, extra...)...)
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		if err := cl.Ping(b.Context()); err != nil {
			b.Fatal(err)
		}
		return time.Since(start).Seconds()
	}
	var tlsSecs, scramSecs float64
	conns := 0
	for b.Loop() {
		tlsSecs += connect("SSL")
		scramSecs += connect("SASL_SSL", scram512("admin", "admin-secret"))
		conns++
	}
	b.ReportMetric(tlsSecs*1e3/float64(conns), "tls-ms/conn")
	b.ReportMetric(scramSecs*1e3/float64(conns), "tls+scram-ms/conn")
	b.ReportMetric((scramSecs-tlsSecs)*1e3/float64(conns), "scram-ms/conn")
}
