package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// publishBody is the body of POST /v1/topics/{topic}/records.
type publishBody struct {
	Records []recordIn `json:"records"`
}

// bodyBufs holds the buffers publish bodies are read into, reused from one publish to the next;
// a buffer grown past bodyBufMax by a large body is let go instead.
var bodyBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const bodyBufMax = 4 << 20

// publishBufs are the slices a publish decodes its records into, reused from one publish to the next
// as the body's buffer is: growing a new slice of decoded records by append took more of a publish's
// CPU than scanning the body did. Slices of more than publishBufsMax records are let go.
type publishBufs struct {
	in   []recordIn
	slab []kgo.Record
	recs []*kgo.Record
}

var publishPool = sync.Pool{New: func() any { return new(publishBufs) }}

const publishBufsMax = recordsMax

// put clears the slices, which alias the body and kgo's answers, and gives them back to the pool.
func (pb *publishBufs) put() {
	if cap(pb.in) > publishBufsMax || cap(pb.slab) > publishBufsMax {
		return
	}
	clear(pb.in[:cap(pb.in)])
	clear(pb.slab)
	clear(pb.recs)
	pb.in, pb.slab, pb.recs = pb.in[:0], pb.slab[:0], pb.recs[:0]
	publishPool.Put(pb)
}

// publishLimit is the body limit of a publish to topic (its max.message.bytes) and its partition
// count (0 when it is yet to be auto-created), or topic_not_found.
func (a *API) publishLimit(topic string) (int, int32, error) {
	if t, ok := a.opts.Metadata.Topic(topic); ok {
		return t.MaxMessageBytes, t.Partitions, nil
	}
	if limit, ok := a.opts.Metadata.AutoCreate(); ok {
		return limit, 0, nil
	}
	return 0, 0, kafkaErrorf(http.StatusNotFound, "topic_not_found", "UNKNOWN_TOPIC_OR_PARTITION",
		"topic %q does not exist, and auto.create.topics.enable is false", topic)
}

// publish serves POST /v1/topics/{topic}/records: the records are checked, all of them, before any is
// produced; the answer waits for every acknowledgement.
func (a *API) publish(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel, err := a.requestContext(w, r)
	if err != nil {
		return err
	}
	defer cancel()
	topic := r.PathValue("topic")
	limit, partitions, err := a.publishLimit(topic)
	if err != nil {
		return err
	}
	buf := bodyBufs.Get().(*bytes.Buffer)
	buf.Reset()
	pb := publishPool.Get().(*publishBufs)
	// The records alias the body until produce returns, after every acknowledgement; kgo holds no
	// record past its promise.
	defer func() {
		pb.put()
		if buf.Cap() <= bodyBufMax {
			bodyBufs.Put(buf)
		}
	}()
	body, err := readBodyInto(buf, w, r, limit)
	if err != nil {
		return err
	}
	in, err := decodePublish(body, pb.in)
	if err != nil {
		return err
	}
	pb.in = in
	if len(in) == 0 {
		return errorf(http.StatusBadRequest, "invalid_record", "no records")
	}
	pb.slab = slices.Grow(pb.slab, len(in))[:len(in)]
	pb.recs = slices.Grow(pb.recs, len(in))[:len(in)]
	slab, recs := pb.slab, pb.recs
	for i := range in {
		recs[i] = &slab[i]
		if err := in[i].toRecord(recs[i], topic, i); err != nil {
			return err
		}
		if p := in[i].Partition; p != nil && (*p < 0 || partitions > 0 && *p >= partitions) {
			return kafkaErrorf(http.StatusNotFound, "partition_not_found", "UNKNOWN_TOPIC_OR_PARTITION",
				"record %d: topic %q has no partition %d", i, topic, *p)
		}
	}
	errs := a.produce(ctx, topic, partitions, recs, func(i int) bool { return in[i].Partition != nil })
	status := http.StatusOK
	for _, err := range errs {
		if err != nil {
			status = fromErr(err).Status
			break
		}
	}
	answer := appendPublished(make([]byte, 0, 64*len(recs)), recs, errs)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
	w.WriteHeader(status)
	_, _ = w.Write(answer)
	return nil
}

// appendPublished appends the answer of a publish, {"records":[…]}: for each record its partition,
// offset and timestamp, or its error. It is written by hand, as appendRecord is, because encoding/json
// took a tenth of a publish's CPU writing it.
func appendPublished(b []byte, recs []*kgo.Record, errs []error) []byte {
	b = append(b, `{"records":[`...)
	for i, rec := range recs {
		if i > 0 {
			b = append(b, ',')
		}
		if errs[i] != nil {
			e, _ := json.Marshal(fromErr(errs[i]))
			b = append(b, `{"error":`...)
			b = append(b, e...)
			b = append(b, '}')
			continue
		}
		b = append(b, `{"partition":`...)
		b = strconv.AppendInt(b, int64(rec.Partition), 10)
		b = append(b, `,"offset":`...)
		b = strconv.AppendInt(b, rec.Offset, 10)
		b = append(b, `,"timestamp":`...)
		b = strconv.AppendInt(b, rec.Timestamp.UnixMilli(), 10)
		b = append(b, '}')
	}
	return append(b, "]}\n"...)
}

// v3Record is one record of Confluent REST Proxy v3's produce body.
type v3Record struct {
	PartitionID *int32     `json:"partition_id"`
	Headers     []v3Header `json:"headers"`
	Key         *v3Data    `json:"key"`
	Value       *v3Data    `json:"value"`
	Timestamp   *time.Time `json:"timestamp"`
}

// v3Header is a v3 header: its value is base64.
type v3Header struct {
	Name  string  `json:"name"`
	Value *string `json:"value"`
}

// v3Data is a v3 key or value: its type says how data is turned into bytes.
type v3Data struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// bytes is what d stands for: STRING is the UTF-8 of a JSON string, JSON the JSON text, BINARY base64.
func (d *v3Data) bytes(name string, i int) ([]byte, error) {
	if d == nil || len(d.Data) == 0 || string(d.Data) == "null" {
		return nil, nil
	}
	switch d.Type {
	case "", "JSON":
		var buf bytes.Buffer
		if err := json.Compact(&buf, d.Data); err != nil {
			return nil, errorf(http.StatusBadRequest, "invalid_json", "record %d: %s: %v", i, name, err)
		}
		return buf.Bytes(), nil
	case "STRING", "BINARY":
		var s string
		if err := json.Unmarshal(d.Data, &s); err != nil {
			return nil, errorf(http.StatusBadRequest, "invalid_record", "record %d: %s: %s data must be a string", i, name, d.Type)
		}
		if d.Type == "STRING" {
			return []byte(s), nil
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, errorf(http.StatusBadRequest, "invalid_base64", "record %d: %s: %v", i, name, err)
		}
		return b, nil
	}
	return nil, errorf(http.StatusBadRequest, "invalid_record", "record %d: %s: type %q: weir takes STRING, JSON or BINARY (no schema registry)", i, name, d.Type)
}

// v3Result is one record's answer in the v3 shape.
type v3Result struct {
	ErrorCode   int        `json:"error_code"`
	Message     string     `json:"message,omitempty"`
	ClusterID   string     `json:"cluster_id,omitempty"`
	TopicName   string     `json:"topic_name,omitempty"`
	PartitionID *int32     `json:"partition_id,omitempty"`
	Offset      *int64     `json:"offset,omitempty"`
	Timestamp   *time.Time `json:"timestamp,omitempty"`
	Key         *v3Size    `json:"key,omitempty"`
	Value       *v3Size    `json:"value,omitempty"`
}

// v3Size describes a produced key or value.
type v3Size struct {
	Type string `json:"type"`
	Size int    `json:"size"`
}

// publishV3 serves POST /v3/clusters/{cluster}/topics/{topic}/records: one record or many
// concatenated, checked all before any is produced, answered one JSON line per record.
func (a *API) publishV3(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel, err := a.requestContext(w, r)
	if err != nil {
		return err
	}
	defer cancel()
	cluster := a.opts.Metadata.ClusterID()
	if r.PathValue("cluster") != cluster {
		return errorf(http.StatusNotFound, "cluster_not_found", "cluster %q: this is cluster %q", r.PathValue("cluster"), cluster)
	}
	topic := r.PathValue("topic")
	limit, partitions, err := a.publishLimit(topic)
	if err != nil {
		return err
	}
	body, err := readBody(w, r, limit)
	if err != nil {
		return err
	}
	var in []v3Record
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		var rec v3Record
		err := dec.Decode(&rec)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return errorf(http.StatusBadRequest, "invalid_json", "record %d: %v", len(in), err)
		}
		in = append(in, rec)
	}
	if len(in) == 0 {
		return errorf(http.StatusBadRequest, "invalid_record", "no records")
	}
	recs := make([]*kgo.Record, len(in))
	for i, v := range in {
		rec := &kgo.Record{Topic: topic}
		if rec.Key, err = v.Key.bytes("key", i); err != nil {
			return err
		}
		if rec.Value, err = v.Value.bytes("value", i); err != nil {
			return err
		}
		for _, h := range v.Headers {
			var hv []byte
			if h.Value != nil {
				if hv, err = base64.StdEncoding.DecodeString(*h.Value); err != nil {
					return errorf(http.StatusBadRequest, "invalid_base64", "record %d: header %q: %v", i, h.Name, err)
				}
			}
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Name, Value: hv})
		}
		if v.PartitionID != nil {
			if p := *v.PartitionID; p < 0 || partitions > 0 && p >= partitions {
				return kafkaErrorf(http.StatusNotFound, "partition_not_found", "UNKNOWN_TOPIC_OR_PARTITION",
					"record %d: topic %q has no partition %d", i, topic, p)
			}
			rec.Partition = *v.PartitionID
		}
		if v.Timestamp != nil {
			rec.Timestamp = *v.Timestamp
		}
		recs[i] = rec
	}
	errs := a.produce(ctx, topic, partitions, recs, func(i int) bool { return in[i].PartitionID != nil })
	if len(recs) > 1 {
		w.Header().Set("Content-Type", "application/x-ndjson")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	status := http.StatusOK
	results := make([]v3Result, len(recs))
	for i, rec := range recs {
		if errs[i] != nil {
			e := fromErr(errs[i])
			results[i] = v3Result{ErrorCode: e.Status, Message: e.Message}
			if status == http.StatusOK {
				status = e.Status
			}
			continue
		}
		ts := rec.Timestamp.UTC()
		results[i] = v3Result{ErrorCode: http.StatusOK, ClusterID: cluster, TopicName: topic, PartitionID: &rec.Partition,
			Offset: &rec.Offset, Timestamp: &ts}
		if in[i].Key != nil {
			results[i].Key = &v3Size{Type: typeOr(in[i].Key.Type), Size: len(rec.Key)}
		}
		if in[i].Value != nil {
			results[i].Value = &v3Size{Type: typeOr(in[i].Value.Type), Size: len(rec.Value)}
		}
	}
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	for _, res := range results {
		_ = enc.Encode(res)
	}
	return nil
}

// typeOr is a v3 data type, JSON when it was not given.
func typeOr(t string) string {
	if t == "" {
		return "JSON"
	}
	return t
}

// listClustersV3 serves GET /v3/clusters, which v3 tools ask first for the cluster id.
func (a *API) listClustersV3(w http.ResponseWriter, _ *http.Request) error {
	id := a.opts.Metadata.ClusterID()
	writeJSON(w, http.StatusOK, map[string]any{
		"kind": "KafkaClusterList",
		"data": []map[string]any{{"kind": "KafkaCluster", "cluster_id": id}},
	})
	return nil
}
