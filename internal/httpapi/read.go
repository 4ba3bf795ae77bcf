package httpapi

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// fetchBytesDefault is the max_bytes of a read unless it says otherwise.
	fetchBytesDefault = 1 << 20
	// keepAliveEvery is how long an SSE stream waits for records before it writes a comment line.
	keepAliveEvery = 15 * time.Second
	// metadataAge is how old the cached metadata that locates a partition's leader may be.
	metadataAge = time.Second
)

// fetchPool lends kgo clients to reads, one read at a time each, so that a Fetch parked on the
// broker delays no other read (answers are in request order on a connection).
type fetchPool struct {
	newClient func() (*kgo.Client, error)
	sem       chan struct{}

	mu     sync.Mutex
	free   []*kgo.Client
	all    []*kgo.Client
	closed bool
}

func newFetchPool(n int, newClient func() (*kgo.Client, error)) *fetchPool {
	return &fetchPool{newClient: newClient, sem: make(chan struct{}, n)}
}

// get lends a client, waiting for one while all are lent; put gives it back.
func (p *fetchPool) get(ctx context.Context) (*kgo.Client, error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		<-p.sem
		return nil, kgo.ErrClientClosed
	}
	if n := len(p.free); n > 0 {
		cl := p.free[n-1]
		p.free = p.free[:n-1]
		return cl, nil
	}
	cl, err := p.newClient()
	if err != nil {
		<-p.sem
		return nil, err
	}
	p.all = append(p.all, cl)
	return cl, nil
}

func (p *fetchPool) put(cl *kgo.Client) {
	p.mu.Lock()
	p.free = append(p.free, cl)
	p.mu.Unlock()
	<-p.sem
}

// close closes every client; reads in progress end with ErrClientClosed.
func (p *fetchPool) close() {
	p.mu.Lock()
	p.closed = true
	all := p.all
	p.mu.Unlock()
	for _, cl := range all {
		cl.Close()
	}
}

// fetched is what one Fetch of a partition gave.
type fetched struct {
	records []*kgo.Record
	// batchesEnd is the offset after the last batch decoded, -1 if none was (batchesEnd).
	batchesEnd     int64
	highWatermark  int64
	logStartOffset int64
}

// fetchOnce sends one Fetch for topic/partition from offset to the partition's leader through cl,
// parking on the broker up to wait, and decodes the records at or above offset: when n > 0, only as
// many batches as hold the first n of them (firstBatches), else all.
func fetchOnce(ctx context.Context, cl *kgo.Client, topic string, partition int32, offset int64, n int64, maxBytes int32, wait time.Duration) (fetched, error) {
	leader, id, err := locate(ctx, cl, topic, partition, metadataAge)
	if err != nil {
		return fetched{}, err
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(wait.Milliseconds())
	req.MinBytes = 1
	req.MaxBytes = maxBytes
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.LogStartOffset = partition, offset, maxBytes, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(leader)))
	if err != nil {
		return fetched{}, err
	}
	if err := kafkaCode(resp.ErrorCode); err != nil {
		return fetched{}, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fetched{}, errorf(http.StatusBadGateway, "internal", "the leader answered a Fetch of one partition with %d topics", len(resp.Topics))
	}
	p := &resp.Topics[0].Partitions[0]
	if err := kafkaCode(p.ErrorCode); err != nil {
		// A moved leader is found again by the next read.
		_, _, _ = locate(ctx, cl, topic, partition, 0)
		return fetched{}, err
	}
	opts := kgo.ProcessFetchPartitionOpts{Offset: offset, Topic: topic, Partition: partition}
	all := p.RecordBatches
	p.RecordBatches = firstBatches(all, offset, n)
	fp, _ := kgo.ProcessFetchPartition(opts, p, kgo.DefaultDecompressor(), nil)
	if fp.Err == nil && int64(len(fp.Records)) < n && len(p.RecordBatches) < len(all) {
		// The batches cut off were needed after all: some of the first n offsets held no records
		// (transaction markers, aborted records).
		p.RecordBatches = all
		fp, _ = kgo.ProcessFetchPartition(opts, p, kgo.DefaultDecompressor(), nil)
	}
	if fp.Err != nil {
		return fetched{}, fp.Err
	}
	return fetched{records: fp.Records, batchesEnd: batchesEnd(p.RecordBatches), highWatermark: fp.HighWatermark, logStartOffset: fp.LogStartOffset}, nil
}

// firstBatches is raw, the record batches of a Fetch answer from offset, cut after the first v2 batch
// that holds offset n-1 past offset, so that a read of n records decompresses and decodes only the
// batches it answers with: a 1 MiB Fetch of compressed batches can hold a hundred times the records
// of an answer, and decoding them took most of a read's CPU. n <= 0, and anything but whole v2 batch
// headers, leave raw whole.
func firstBatches(raw []byte, offset, n int64) []byte {
	if n <= 0 {
		return raw
	}
	last := offset + n - 1
	for at := 0; at < len(raw); {
		batchLast, end, ok := batchSpan(raw[at:])
		if !ok {
			return raw
		}
		if batchLast >= last {
			return raw[:at+end]
		}
		at += end
	}
	return raw
}

// batchesEnd is the offset after the last whole v2 batch in raw, or -1 if raw holds none or anything
// else: a read whose batches held no records (transaction markers only) moves on past them.
func batchesEnd(raw []byte) int64 {
	next := int64(-1)
	for at := 0; at < len(raw); {
		batchLast, end, ok := batchSpan(raw[at:])
		if !ok {
			break
		}
		next = batchLast + 1
		at += end
	}
	return next
}

// batchSpan reads the v2 batch header at the start of b: the batch's last offset and its length in
// bytes, ok false unless b starts with a whole v2 batch.
func batchSpan(b []byte) (last int64, end int, ok bool) {
	const (
		lengthAt, magicAt, lastDeltaAt = 8, 16, 23
		lengthOverhead, headerSize     = 12, 61
	)
	if len(b) < headerSize || b[magicAt] != 2 {
		return 0, 0, false
	}
	end = lengthOverhead + int(int32(binary.BigEndian.Uint32(b[lengthAt:])))
	if end <= lengthOverhead || end > len(b) {
		return 0, 0, false
	}
	return int64(binary.BigEndian.Uint64(b)) + int64(int32(binary.BigEndian.Uint32(b[lastDeltaAt:]))), end, true
}

// locate is the leader and id of topic/partition, from metadata at most age old.
func locate(ctx context.Context, cl *kgo.Client, topic string, partition int32, age time.Duration) (int32, [16]byte, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.RequestCachedMetadata(ctx, req, age)
	if err != nil {
		return 0, [16]byte{}, err
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kafkaCode(t.ErrorCode); err != nil {
			return 0, [16]byte{}, err
		}
		for _, p := range t.Partitions {
			if p.Partition != partition {
				continue
			}
			if p.Leader < 0 {
				return 0, [16]byte{}, kafkaErrorf(http.StatusServiceUnavailable, "unavailable", "LEADER_NOT_AVAILABLE",
					"%s[%d] has no leader", topic, partition)
			}
			return p.Leader, t.TopicID, nil
		}
		return 0, [16]byte{}, kafkaErrorf(http.StatusNotFound, "partition_not_found", "UNKNOWN_TOPIC_OR_PARTITION",
			"topic %q has no partition %d", topic, partition)
	}
	return 0, [16]byte{}, kafkaErrorf(http.StatusNotFound, "topic_not_found", "UNKNOWN_TOPIC_OR_PARTITION", "topic %q does not exist", topic)
}

// startOffset resolves where a read starts: offset (a number, earliest or latest) or timestamp.
func (a *API) startOffset(ctx context.Context, r *http.Request, topic string, partition int32) (int64, error) {
	q := r.URL.Query()
	s, ts := q.Get("offset"), q.Get("timestamp")
	if s != "" && ts != "" {
		return 0, errorf(http.StatusBadRequest, "invalid_parameter", "give offset or timestamp, not both")
	}
	if ts != "" {
		ms, err := strconv.ParseInt(ts, 10, 64)
		if err != nil {
			return 0, errorf(http.StatusBadRequest, "invalid_parameter", "timestamp %q: want milliseconds since the epoch", ts)
		}
		listed, err := a.adm.ListOffsetsAfterMilli(ctx, ms, topic)
		return pickOffset(listed, err, topic, partition)
	}
	switch s {
	case "", "earliest":
		listed, err := a.adm.ListStartOffsets(ctx, topic)
		return pickOffset(listed, err, topic, partition)
	case "latest":
		listed, err := a.adm.ListEndOffsets(ctx, topic)
		return pickOffset(listed, err, topic, partition)
	}
	o, err := strconv.ParseInt(s, 10, 64)
	if err != nil || o < 0 {
		return 0, errorf(http.StatusBadRequest, "invalid_parameter", "offset %q: want a number, earliest or latest", s)
	}
	return o, nil
}

// pickOffset is the offset listed for topic/partition.
func pickOffset(listed kadm.ListedOffsets, err error, topic string, partition int32) (int64, error) {
	if err != nil {
		return 0, fromErr(err)
	}
	lo, ok := listed.Lookup(topic, partition)
	switch {
	case !ok:
		return 0, kafkaErrorf(http.StatusNotFound, "partition_not_found", "UNKNOWN_TOPIC_OR_PARTITION",
			"topic %q has no partition %d", topic, partition)
	case lo.Err != nil:
		return 0, fromErr(lo.Err)
	}
	return lo.Offset, nil
}

// readAnswer is the answer of a read by offset; Records is appended by hand.
type readAnswer struct {
	NextOffset     int64 `json:"next_offset"`
	HighWatermark  int64 `json:"high_watermark"`
	LogStartOffset int64 `json:"log_start_offset"`
}

// read serves GET /v1/topics/{topic}/partitions/{partition}/records.
func (a *API) read(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel, err := a.requestContext(w, r)
	if err != nil {
		return err
	}
	defer cancel()
	topic := r.PathValue("topic")
	partition, err := pathPartition(r)
	if err != nil {
		return err
	}
	maxRecords, err := queryInt(r, "max", recordsDefault, 1, recordsMax)
	if err != nil {
		return err
	}
	maxBytes, err := queryInt(r, "max_bytes", fetchBytesDefault, 1, 64<<20)
	if err != nil {
		return err
	}
	wait, err := queryWait(r)
	if err != nil {
		return err
	}
	enc, err := parseEncoding(r.URL.Query().Get("encoding"))
	if err != nil {
		return err
	}
	offset, err := a.startOffset(ctx, r, topic, partition)
	if err != nil {
		return err
	}
	cl, err := a.fetch.get(ctx)
	if err != nil {
		return fromErr(err)
	}
	f, err := fetchOnce(ctx, cl, topic, partition, offset, maxRecords, int32(maxBytes), wait)
	a.fetch.put(cl)
	if err != nil {
		return fromErr(err)
	}
	recs := f.records
	if len(recs) > int(maxRecords) {
		recs = recs[:maxRecords]
	}
	ans := readAnswer{NextOffset: offset, HighWatermark: f.highWatermark, LogStartOffset: f.logStartOffset}
	switch n := len(recs); {
	case n < len(f.records):
		ans.NextOffset = recs[n-1].Offset + 1
	case n > 0:
		ans.NextOffset = max(recs[n-1].Offset+1, f.batchesEnd)
	default:
		ans.NextOffset = max(offset, f.batchesEnd)
	}
	head, _ := json.Marshal(ans)
	writeRecords(w, head, recs, enc)
	return nil
}

// stream serves GET /v1/topics/{topic}/partitions/{partition}/stream: the partition's records as
// Server-Sent Events from offset (or after Last-Event-ID), until the client goes away or Close.
func (a *API) stream(w http.ResponseWriter, r *http.Request) error {
	topic := r.PathValue("topic")
	partition, err := pathPartition(r)
	if err != nil {
		return err
	}
	enc, err := parseEncoding(r.URL.Query().Get("encoding"))
	if err != nil {
		return err
	}
	select {
	case a.streams <- struct{}{}:
		defer func() { <-a.streams }()
	default:
		return errorf(http.StatusTooManyRequests, "too_many_streams", "this node serves %d streams, its most", cap(a.streams))
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(a.ctx, cancel)()
	var offset int64
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		o, err := strconv.ParseInt(last, 10, 64)
		if err != nil || o < 0 {
			return errorf(http.StatusBadRequest, "invalid_parameter", "Last-Event-ID %q: want an offset", last)
		}
		offset = o + 1
	} else {
		sctx, scancel := context.WithTimeout(ctx, requestTimeout)
		offset, err = a.startOffset(sctx, r, topic, partition)
		scancel()
		if err != nil {
			return err
		}
	}
	// A stream holds a client of its own for its life, outside the pool of reads.
	cl, err := a.opts.newClient(kgo.ClientID("weir-http-stream"))
	if err != nil {
		return fromErr(err)
	}
	defer cl.Close()
	if _, _, err := locate(ctx, cl, topic, partition, 0); err != nil {
		return err
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(": weir stream of " + topic + "[" + strconv.Itoa(int(partition)) + "]\n\n"))
	_ = rc.Flush()
	var b []byte
	for ctx.Err() == nil {
		f, err := fetchOnce(ctx, cl, topic, partition, offset, 0, fetchBytesDefault, keepAliveEvery)
		b = b[:0]
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			e := fromErr(err)
			if e.Status != http.StatusServiceUnavailable && e.Code != "timeout" {
				msg, _ := json.Marshal(errorBody{e})
				b = append(append(append(b, "event: error\ndata: "...), msg...), "\n\n"...)
				_, _ = w.Write(b)
				_ = rc.Flush()
				return nil
			}
			// A leader moving or a broker restarting: try again after a moment.
			select {
			case <-ctx.Done():
			case <-a.opts.Clock.After(time.Second):
			}
			continue
		case len(f.records) == 0:
			b = append(b, ": keep-alive\n\n"...)
		}
		for _, rec := range f.records {
			b = append(b, "event: record\nid: "...)
			b = strconv.AppendInt(b, rec.Offset, 10)
			b = append(b, "\ndata: "...)
			b = appendRecord(b, rec, enc)
			b = append(b, "\n\n"...)
			offset = rec.Offset + 1
		}
		// Batches of no records (transaction markers) are passed, not fetched again at once.
		offset = max(offset, f.batchesEnd)
		if _, err := w.Write(b); err != nil {
			return nil
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
	}
	return nil
}
