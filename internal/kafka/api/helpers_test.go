package api_test

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/server"
)

// testTimeout bounds every client call of a test; generous, because the machine is shared.
const testTimeout = 30 * time.Second

// startNode runs a node on 127.0.0.1:0 in a temporary directory, closed when the test ends.
func startNode(t *testing.T) *server.Node {
	t.Helper()
	return startNodeIn(t, t.TempDir())
}

// startNodeIn runs a node in dir, closed when the test ends.
func startNodeIn(t *testing.T, dir string) *server.Node {
	t.Helper()
	return startNodeWith(t, nodeConfig(dir))
}

// nodeConfig is the default config of a node in dir, listening on free loopback ports, logging nowhere.
func nodeConfig(dir string) server.Config {
	cfg := server.DefaultConfig()
	cfg.DataDir = dir
	cfg.KafkaAddr = "127.0.0.1:0"
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.ControllerAddr = "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.ShareGroups = true
	return cfg
}

// startNodeWith runs a node with cfg, closed when the test or benchmark ends.
func startNodeWith(t testing.TB, cfg server.Config) *server.Node {
	t.Helper()
	n, err := server.Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// testCtx is a context bounded by testTimeout.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// newClient returns a kgo client of n, closed when the test ends.
func newClient(t *testing.T, n *server.Node, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(n.KafkaAddr()), kgo.ProducerLinger(0), kgo.FetchMaxWait(500 * time.Millisecond)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// newAdmin returns a kadm client of n.
func newAdmin(t *testing.T, n *server.Node) *kadm.Client {
	t.Helper()
	return kadm.NewClient(newClient(t, n))
}

// createTopic creates topic with partitions and configs, failing the test on any error.
func createTopic(t *testing.T, adm *kadm.Client, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	resp, err := adm.CreateTopic(testCtx(t), partitions, 1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// consumeN reads n records with a fresh consumer from the given start, failing on timeout.
func consumeN(t *testing.T, node *server.Node, topic string, start kgo.Offset, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	opts = append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(start)}, opts...)
	cl := newClient(t, node, opts...)
	ctx := testCtx(t)
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records from %s: %v", len(got), n, topic, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s[%d]: %v", topic, p, err) })
		got = append(got, fs.Records()...)
	}
	return got
}

// rawConn speaks the protocol directly, for versions and malformed input clients never send.
type rawConn struct {
	t    *testing.T
	c    net.Conn
	corr int32
}

func dialRaw(t *testing.T, n *server.Node) *rawConn {
	t.Helper()
	var d net.Dialer
	c, err := d.DialContext(testCtx(t), "tcp", n.KafkaAddr())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(testTimeout))
	return &rawConn{t: t, c: c}
}

// send writes req at its version with a request header v1 or v2 and returns its correlation id.
func (rc *rawConn) send(req kmsg.Request) int32 {
	rc.t.Helper()
	rc.corr++
	b := make([]byte, 4, 64)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(rc.corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	if _, err := rc.c.Write(b); err != nil {
		rc.t.Fatalf("write request: %v", err)
	}
	return rc.corr
}

// recv reads the response to the request with correlation id corr into resp.
func (rc *rawConn) recv(corr int32, resp kmsg.Response) {
	rc.t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(rc.c, size[:]); err != nil {
		rc.t.Fatalf("read response size: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(rc.c, body); err != nil {
		rc.t.Fatalf("read response: %v", err)
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != corr {
		rc.t.Fatalf("correlation id %d, want %d", got, corr)
	}
	body = body[4:]
	if resp.IsFlexible() && resp.Key() != 18 {
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		rc.t.Fatalf("decode %T v%d: %v", resp, resp.GetVersion(), err)
	}
}

// do sends req and returns its decoded response.
func (rc *rawConn) do(req kmsg.Request) kmsg.Response {
	rc.t.Helper()
	corr := rc.send(req)
	resp := req.ResponseKind()
	rc.recv(corr, resp)
	return resp
}

// batchSpec describes a record batch built by testBatch.
type batchSpec struct {
	// idempotent carries producerID, producerEpoch and sequence; otherwise they are -1.
	idempotent    bool
	producerID    int64
	producerEpoch int16
	sequence      int32
	attributes    int16
	timestamp     int64
	// key, when set, is every record's key; otherwise the keys are null.
	key    string
	values []string
}

// testBatch encodes a v2 record batch with a correct CRC, as a producer would send it.
func testBatch(s batchSpec) []byte {
	var records []byte
	for i, v := range s.values {
		var r []byte
		r = append(r, 0)
		r = binary.AppendVarint(r, 0)
		r = binary.AppendVarint(r, int64(i))
		if s.key == "" {
			r = binary.AppendVarint(r, -1)
		} else {
			r = binary.AppendVarint(r, int64(len(s.key)))
			r = append(r, s.key...)
		}
		r = binary.AppendVarint(r, int64(len(v)))
		r = append(r, v...)
		r = binary.AppendVarint(r, 0)
		records = binary.AppendVarint(records, int64(len(r)))
		records = append(records, r...)
	}
	if !s.idempotent {
		s.producerID, s.producerEpoch, s.sequence = -1, -1, -1
	}
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           s.attributes,
		LastOffsetDelta:      int32(len(s.values) - 1),
		FirstTimestamp:       s.timestamp,
		MaxTimestamp:         s.timestamp,
		ProducerID:           s.producerID,
		ProducerEpoch:        s.producerEpoch,
		FirstSequence:        s.sequence,
		NumRecords:           int32(len(s.values)),
		Records:              records,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

// produceRequest is a Produce of the given version and acks carrying batch to topic[partition].
func produceRequest(version, acks int16, topic string, partition int32, batch []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.Acks = acks
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// produceRaw sends one batch to topic[partition] with acks=-1 and returns the partition's result.
func produceRaw(t *testing.T, rc *rawConn, version int16, topic string, partition int32, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	resp := rc.do(produceRequest(version, -1, topic, partition, batch)).(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("produce response shape: %+v", resp)
	}
	return resp.Topics[0].Partitions[0]
}

// metricValue reads the value of series (a metric name with its labels, as /metrics prints them) from
// the node's /metrics.
func metricValue(t *testing.T, httpAddr, series string) float64 {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodGet, "http://"+httpAddr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(regexp.QuoteMeta(series) + ` (\S+)`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("no %s in /metrics", series)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatalf("%s: %v", series, err)
	}
	return v
}
