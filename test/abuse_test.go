package test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka error codes the abuse tests expect.
const (
	errCorruptMessage     = 2
	errUnsupportedVersion = 35
	errInvalidRecord      = 87
)

// closeWait bounds how long a test waits for the broker to close a bad connection.
const closeWait = 10 * time.Second

// rawConn is a client connection that writes whatever bytes a test gives it.
type rawConn struct {
	t    testing.TB
	conn net.Conn
}

func dialRaw(t testing.TB, n *node) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", n.kafkaAddr(), 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", n.kafkaAddr(), err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, conn: c}
}

// send writes b. A write error is returned, not fatal: the broker may close early on purpose.
func (c *rawConn) send(b []byte) error {
	if err := c.conn.SetWriteDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return err
	}
	_, err := c.conn.Write(b)
	return err
}

// readFrame reads one response frame and returns its bytes after the size prefix, or the read error.
func (c *rawConn) readFrame(wait time.Duration) ([]byte, error) {
	if err := c.conn.SetReadDeadline(time.Now().Add(wait)); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(c.conn, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > 64<<20 {
		return nil, fmt.Errorf("response size %d", n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(c.conn, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// response reads one response frame, checks its correlation id and returns the body after it
// (and after the empty tag buffer of a flexible response header).
func (c *rawConn) response(corr int32, flexibleHeader bool) []byte {
	c.t.Helper()
	b, err := c.readFrame(closeWait)
	if err != nil {
		c.t.Fatalf("read response %d: %v", corr, err)
	}
	if got := int32(binary.BigEndian.Uint32(b)); got != corr {
		c.t.Fatalf("response correlation id %d, want %d", got, corr)
	}
	b = b[4:]
	if flexibleHeader {
		if len(b) == 0 || b[0] != 0 {
			c.t.Fatalf("response %d: flexible header without an empty tag buffer: % x", corr, b[:min(len(b), 8)])
		}
		b = b[1:]
	}
	return b
}

// outcome is what the broker did with a bad request.
type outcome int

const (
	closedConn outcome = iota // closed the connection (possibly after answering)
	answered                  // answered with the request's correlation id and kept the connection
)

// expectClosed waits until the broker closes the connection. When answerOK is set, a response with
// the request's correlation id is accepted instead. Anything else, or still open after closeWait,
// fails the test.
func (c *rawConn) expectClosed(corr int32, answerOK bool) outcome {
	c.t.Helper()
	deadline := time.Now().Add(closeWait)
	for {
		b, err := c.readFrame(time.Until(deadline))
		switch {
		case err == nil && answerOK && len(b) >= 4 && int32(binary.BigEndian.Uint32(b)) == corr:
			return answered
		case err == nil:
			c.t.Logf("frame of %d bytes before the close: % x", len(b), b[:min(len(b), 16)])
		case isClosed(err):
			return closedConn
		default:
			c.t.Fatalf("connection not closed within %v: %v", closeWait, err)
		}
	}
}

// isClosed reports whether a read error means the peer closed or reset the connection.
func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// header encodes a request header: v1 (key, version, correlation id, client id), or v2 when
// flexible (v1 plus an empty tag buffer).
func header(key, version int16, corr int32, flexible bool) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	const clientID = "weir-abuse"
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	if flexible {
		b = append(b, 0)
	}
	return b
}

// frame prefixes a request (header and body) with its size.
func frame(parts ...[]byte) []byte {
	size := 0
	for _, p := range parts {
		size += len(p)
	}
	out := binary.BigEndian.AppendUint32(nil, uint32(size))
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// apiVersionsV0 is a complete ApiVersions v0 request frame.
func apiVersionsV0(corr int32) []byte {
	return frame(header(18, 0, corr, false))
}

// checkAPIVersions sends ApiVersions v0 and checks the broker answers it without error.
func (c *rawConn) checkAPIVersions(corr int32) {
	c.t.Helper()
	if err := c.send(apiVersionsV0(corr)); err != nil {
		c.t.Fatalf("send ApiVersions: %v", err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	if err := resp.ReadFrom(c.response(corr, false)); err != nil {
		c.t.Fatalf("decode ApiVersions v0 response: %v", err)
	}
	if resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		c.t.Fatalf("ApiVersions v0: error %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
}

// goodClient is a well-behaved franz-go producer and consumer used while the broker is abused. Its
// producer is not idempotent, so that a context deadline can fail records in flight if the broker
// dies (an idempotent producer must wait for an answer that would never come).
type goodClient struct {
	topic string
	prod  *kgo.Client
	cons  *kgo.Client
	seq   int
}

func newGoodClient(ctx context.Context, t testing.TB, n *node, topic string) *goodClient {
	t.Helper()
	n.createTopic(ctx, t, topic, 1, nil)
	return &goodClient{
		topic: topic,
		prod:  n.client(t, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite()),
		cons: n.client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
			kgo.FetchMaxWait(500*time.Millisecond)),
	}
}

// roundTrip produces one record and consumes until it comes back.
func (g *goodClient) roundTrip(ctx context.Context, t testing.TB) {
	t.Helper()
	g.seq++
	want := fmt.Sprintf("good-%06d", g.seq)
	if err := g.prod.ProduceSync(ctx, &kgo.Record{Topic: g.topic, Value: []byte(want)}).FirstErr(); err != nil {
		t.Fatalf("good client: produce %s: %v", want, err)
	}
	for {
		fs := g.cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("good client: %s not consumed: %v", want, ctx.Err())
		}
		if err := fs.Err0(); err != nil {
			t.Fatalf("good client: fetch: %v", err)
		}
		found := false
		fs.EachRecord(func(r *kgo.Record) { found = found || string(r.Value) == want })
		if found {
			return
		}
	}
}

// background keeps a second producer writing to its own topic until the returned stop is called;
// stop reports how many records it wrote and the first error other than the stop itself.
func background(ctx context.Context, t testing.TB, n *node, topic string) (stop func() (int, error)) {
	t.Helper()
	n.createTopic(ctx, t, topic, 1, nil)
	cl := n.client(t, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite())
	bctx, cancel := context.WithCancel(ctx)
	var (
		wg    sync.WaitGroup
		count int
		first error
	)
	wg.Go(func() {
		for bctx.Err() == nil {
			err := cl.ProduceSync(bctx, &kgo.Record{Topic: topic, Value: []byte("bg")}).FirstErr()
			switch {
			case err == nil:
				count++
			case bctx.Err() == nil && first == nil:
				first = err
			}
			select {
			case <-bctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	return func() (int, error) {
		cancel()
		wg.Wait()
		return count, first
	}
}

// TestAbuse feeds one broker malformed, oversized and slow connections while well-behaved clients
// keep producing and consuming. After every bad connection the broker must close it (or answer it
// with an error, where the protocol allows), still answer a fresh connection, and serve the good
// client; at the end the process is alive and its output shows no panic.
func TestAbuse(t *testing.T) {
	ctx := testContext(t, 90*time.Second)
	n := startNode(t, nodeOptions{})
	good := newGoodClient(ctx, t, n, "abuse-good")
	good.roundTrip(ctx, t)
	stopBG := background(ctx, t, n, "abuse-bg")

	// run runs a subtest and stops the whole test if the broker died in it.
	run := func(name string, f func(t *testing.T)) {
		t.Run(name, f)
		if !n.alive() {
			t.Fatalf("broker process died during %q", name)
		}
	}

	var corr int32 = 100
	next := func() int32 { corr++; return corr }
	after := func(t *testing.T) {
		t.Helper()
		dialRaw(t, n).checkAPIVersions(next())
		good.roundTrip(ctx, t)
	}

	sizeOnly := []struct {
		name        string
		size        uint32
		validBefore bool
	}{
		{"size 2 GiB", 1<<31 - 1, false},
		{"size 2 GiB after a valid request", 1<<31 - 1, true},
		{"size 200 MiB", 200 << 20, true},
		{"negative size", 0xfffffff0, false},
		{"size -1", 0xffffffff, false},
		{"zero size", 0, false},
		{"size shorter than a header", 3, false},
	}
	for _, tc := range sizeOnly {
		run(tc.name, func(t *testing.T) {
			c := dialRaw(t, n)
			if tc.validBefore {
				c.checkAPIVersions(next())
			}
			msg := binary.BigEndian.AppendUint32(nil, tc.size)
			if tc.size < 8 {
				msg = append(msg, pseudoRandom(int(tc.size))...)
			} else {
				msg = append(msg, header(3, 1, next(), false)...)
			}
			_ = c.send(msg)
			c.expectClosed(corr, false)
			after(t)
		})
	}

	unsupported := []struct {
		name         string
		key, version int16
	}{
		{"unknown api key", 32000, 0},
		{"negative api key", -7, 0},
		{"unsupported metadata version", 3, 99},
		{"unsupported produce version", 0, 1000},
	}
	for _, tc := range unsupported {
		run(tc.name, func(t *testing.T) {
			c := dialRaw(t, n)
			id := next()
			_ = c.send(frame(header(tc.key, tc.version, id, false), pseudoRandom(16)))
			c.expectClosed(id, false)
			after(t)
		})
	}

	run("api versions unknown version", func(t *testing.T) {
		c := dialRaw(t, n)
		id := next()
		if err := c.send(frame(header(18, 999, id, true), pseudoRandom(24))); err != nil {
			t.Fatalf("send: %v", err)
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		if err := resp.ReadFrom(c.response(id, false)); err != nil {
			t.Fatalf("decode v0 ApiVersions response: %v", err)
		}
		if resp.ErrorCode != errUnsupportedVersion {
			t.Errorf("error code %d, want UNSUPPORTED_VERSION (%d)", resp.ErrorCode, errUnsupportedVersion)
		}
		if len(resp.ApiKeys) == 0 {
			t.Errorf("no api keys listed in the UNSUPPORTED_VERSION reply")
		}
		c.checkAPIVersions(next())
		after(t)
	})

	garbage := []struct {
		name         string
		key, version int16
		flexible     bool
		body         []byte
	}{
		{"garbage after produce v7 header", 0, 7, false, pseudoRandom(200)},
		{"garbage after fetch v4 header", 1, 4, false, pseudoRandom(57)},
		{"metadata v1 claiming 2^31-1 topics", 3, 1, false, []byte{0x7f, 0xff, 0xff, 0xff}},
		{"metadata v1 topic name longer than the frame", 3, 1, false, []byte{0, 0, 0, 1, 0x7f, 0xff, 'a'}},
		{"produce v9 compact array of 2^31 topics", 0, 9, true, []byte{0x00, 0xff, 0xff, 0, 0, 0x27, 0x10, 0xff, 0xff, 0xff, 0xff, 0x0f}},
		{"api versions v3 tag buffer of 2^28 tags", 18, 3, true, []byte{0x05, 'x', 'y', 'z', 'w', 0x02, '1', 0xff, 0xff, 0xff, 0x7f}},
		{"list offsets v1 truncated", 2, 1, false, []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 0}},
	}
	for _, tc := range garbage {
		run(tc.name, func(t *testing.T) {
			c := dialRaw(t, n)
			id := next()
			_ = c.send(frame(header(tc.key, tc.version, id, tc.flexible), tc.body))
			if c.expectClosed(id, true) == answered {
				t.Logf("answered (not closed)")
			}
			after(t)
		})
	}

	run("produce batches with good and bad crc", func(t *testing.T) {
		const topic = "abuse-crc"
		n.createTopic(ctx, t, topic, 1, nil)
		c := dialRaw(t, n)
		if code := c.produceV7(topic, next(), recordBatch(false)); code != 0 {
			t.Fatalf("valid batch: error code %d, want 0 (the test's own encoding is then suspect)", code)
		}
		end := endOffset(ctx, t, n, topic)
		code := c.produceV7(topic, next(), recordBatch(true))
		if code != errCorruptMessage && code != errInvalidRecord {
			t.Errorf("batch with a bad CRC: error code %d, want CORRUPT_MESSAGE (%d) or INVALID_RECORD (%d)", code, errCorruptMessage, errInvalidRecord)
		}
		if got := endOffset(ctx, t, n, topic); got != end {
			t.Errorf("end offset %d after a rejected batch, want %d", got, end)
		}
		after(t)
	})

	run("slowloris", func(t *testing.T) {
		c := dialRaw(t, n)
		slow := apiVersionsV0(next())
		const hold = 4 // seconds, one byte each
		done := make(chan error, 1)
		go func() {
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for i := range hold {
				if err := c.send(slow[i : i+1]); err != nil {
					done <- err
					return
				}
				<-tick.C
			}
			done <- nil
		}()
		trips := 0
		for {
			good.roundTrip(ctx, t)
			trips++
			select {
			case err := <-done:
				if err != nil {
					t.Logf("broker closed the slow connection: %v", err)
				}
				t.Logf("%d good round trips while a client sent %d bytes at one a second", trips, hold)
				after(t)
				return
			case <-ctx.Done():
				t.Fatalf("slow client not done: %v", ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	})

	count, err := stopBG()
	if err != nil {
		t.Errorf("background producer: %v", err)
	}
	if count == 0 {
		t.Errorf("background producer wrote nothing during the abuse")
	}
	t.Logf("background producer wrote %d records during the abuse", count)
	if !n.alive() {
		t.Fatalf("broker process died")
	}
}

// produceV7 sends one Produce v7 (acks=-1) request with batch for partition 0 of topic and returns
// the partition's error code.
func (c *rawConn) produceV7(topic string, corr int32, batch []byte) int16 {
	c.t.Helper()
	c.sendProduceV7(topic, corr, 10_000, batch)
	return c.readProduceV7(corr).ErrorCode
}

// sendProduceV7 sends one Produce v7 (acks=-1) request with batch for partition 0 of topic, which
// the broker may hold for at most timeoutMillis.
func (c *rawConn) sendProduceV7(topic string, corr, timeoutMillis int32, batch []byte) {
	c.t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version = 7
	req.Acks = -1
	req.TimeoutMillis = timeoutMillis
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = 0
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if err := c.send(frame(header(0, 7, corr, false), req.AppendTo(nil))); err != nil {
		c.t.Fatalf("send produce: %v", err)
	}
}

// readProduceV7 reads the answer to the Produce v7 request corr, which must name one partition, and
// returns that partition's answer.
func (c *rawConn) readProduceV7(corr int32) kmsg.ProduceResponseTopicPartition {
	c.t.Helper()
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 7
	if err := resp.ReadFrom(c.response(corr, false)); err != nil {
		c.t.Fatalf("decode produce v7 response: %v", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		c.t.Fatalf("produce response: %d topics, want one with one partition", len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0]
}

// recordBatch encodes an uncompressed, non-idempotent magic 2 batch of two records, with a correct
// CRC-32C or, when corrupt is set, a wrong one.
func recordBatch(corrupt bool) []byte {
	var records []byte
	for i, v := range []string{"crc-a", "crc-b"} {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // the zero Length is one varint byte
		records = r.AppendTo(records)
	}
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{
		Magic:           2,
		LastOffsetDelta: 1,
		FirstTimestamp:  now,
		MaxTimestamp:    now,
		ProducerID:      -1,
		ProducerEpoch:   -1,
		FirstSequence:   -1,
		NumRecords:      2,
		Records:         records,
	}
	b.Length = int32(len(b.AppendTo(nil)) - 12)
	enc := b.AppendTo(nil)
	crc := crc32.Checksum(enc[21:], crc32.MakeTable(crc32.Castagnoli))
	if corrupt {
		crc ^= 0x5a5a5a5a
	}
	binary.BigEndian.PutUint32(enc[17:21], crc)
	return enc
}

// endOffset is partition 0's end offset.
func endOffset(ctx context.Context, t testing.TB, n *node, topic string) int64 {
	t.Helper()
	ends, err := n.admin(t).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("end offset of %s: %v", topic, err)
	}
	o, ok := ends.Lookup(topic, 0)
	if !ok {
		t.Fatalf("no end offset for %s[0]", topic)
	}
	return o.Offset
}
