package api

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"math"
	"sync"

	"github.com/weir-mq/weir/internal/compress"
	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/delay"
	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/share"
)

// The record headers of priority and delayed delivery for share groups (docs/queues.md, "Priority and
// delayed delivery"), their values decimal ASCII.
const (
	headerPriority  = "weir.priority"
	headerDeliverAt = "weir.deliver-at"
	headerDelayMs   = "weir.delay-ms"
)

// weirPrefix starts the key of every header weir acts on: a records section that does not hold it
// has none of them, and is not decoded for them.
var weirPrefix = []byte("weir.")

// delivery is what one record's weir.* headers ask for, -1 for a header it does not carry; progress
// is set when it carries delay.ProgressHeader, which only a delay topic's releaser writes.
type delivery struct {
	priority  int8
	deliverAt int64
	delayMs   int64
	progress  bool
}

// parseDelivery reads the delivery headers of one record: weir.priority one digit 0 to 9,
// weir.deliver-at and weir.delay-ms non-negative decimal integers. A header carried twice counts
// by its last value. Another value is record.ErrInvalidRecord.
func parseDelivery(hs []record.RecordHeader) (delivery, error) {
	d := delivery{priority: -1, deliverAt: -1, delayMs: -1}
	for _, h := range hs {
		if !bytes.HasPrefix(h.Key, weirPrefix) {
			continue
		}
		var ok bool
		switch string(h.Key) {
		case headerPriority:
			ok = len(h.Value) == 1 && h.Value[0] >= '0' && h.Value[0] <= '0'+share.PriorityMax
			if ok {
				d.priority = int8(h.Value[0] - '0')
			}
		case headerDeliverAt:
			d.deliverAt, ok = decimal(h.Value)
		case headerDelayMs:
			d.delayMs, ok = decimal(h.Value)
		case delay.ProgressHeader:
			d.progress, ok = true, true
		default:
			ok = true
		}
		if !ok {
			return delivery{}, fmt.Errorf("%w: header %s = %q", record.ErrInvalidRecord, h.Key, h.Value)
		}
	}
	return d, nil
}

// decimal parses b as a non-negative decimal integer of 1 to 19 digits that fits an int64.
func decimal(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' || n > (math.MaxInt64-int64(c-'0'))/10 {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// keySeed hashes record keys for key-ordered share groups: equal keys hash equally within the
// process, which is all the owner needs, since it reads the keys again after a restart.
var keySeed = maphash.MakeSeed()

// recordsBufs holds the buffers the weir.* headers are looked for in, decompressed: the batches are
// let go once their headers are read.
var recordsBufs = sync.Pool{New: func() any { return new([]byte) }}

// recordsBufMax is the largest buffer put back in recordsBufs.
const recordsBufMax = 4 << 20

// withRecords calls fn with the records section of a checked batch, decompressed into a pooled
// buffer that fn must not keep.
func withRecords(c record.Checked, fn func(body []byte) error) error {
	body := record.Body(c.Bytes)
	codec := compress.Codec(c.Header.Compression())
	if codec == compress.None {
		return fn(body)
	}
	buf := recordsBufs.Get().(*[]byte)
	body, err := compress.DecodeInto(*buf, codec, body, recompressRecordsBytesMax)
	if err != nil {
		recordsBufs.Put(buf)
		return err
	}
	err = fn(body)
	if cap(body) <= recordsBufMax {
		*buf = body[:0]
	}
	recordsBufs.Put(buf)
	return err
}

// checkDelivery refuses, with record.ErrInvalidRecord, a produced batch one of whose records carries a
// malformed weir.priority, weir.deliver-at or weir.delay-ms, asks for a delay beyond
// weir.delivery.delay.max.ms from the clock's now, or carries weir.delay.progress (a delay topic's
// releaser would take such a record for its own progress and skip records it never released). A
// deliver-at in the past is accepted: it is due now.
// A records section that does not hold "weir." is not decoded, and the clock not read; nothing is
// checked on a topic without weir.delivery.headers.enable, where the headers are ordinary ones.
func checkDelivery(c record.Checked, pc controller.ProduceConfig, clock Clock) error {
	if !pc.DeliveryHeaders || c.Header.Compression() == int8(compress.None) && !bytes.Contains(record.Body(c.Bytes), weirPrefix) {
		return nil
	}
	return withRecords(c, func(body []byte) error {
		if !bytes.Contains(body, weirPrefix) {
			return nil
		}
		recs, err := record.DecodeRecords(body, int(c.Header.NumRecords))
		if err != nil {
			return err
		}
		now := clock.Now().UnixMilli()
		for i, r := range recs {
			d, err := parseDelivery(r.Headers)
			switch {
			case err != nil:
				return fmt.Errorf("record %d: %w", i, err)
			case d.progress:
				return fmt.Errorf("%w: record %d: the header %s is written by the broker only", record.ErrInvalidRecord, i, delay.ProgressHeader)
			case d.deliverAt > now && d.deliverAt-now > pc.DeliveryDelayMaxMs:
				return fmt.Errorf("%w: record %d: %s %d is more than weir.delivery.delay.max.ms %d after now", record.ErrInvalidRecord, i, headerDeliverAt, d.deliverAt, pc.DeliveryDelayMaxMs)
			case d.delayMs > pc.DeliveryDelayMaxMs:
				return fmt.Errorf("%w: record %d: %s %d is above weir.delivery.delay.max.ms %d", record.ErrInvalidRecord, i, headerDelayMs, d.delayMs, pc.DeliveryDelayMaxMs)
			}
		}
		return nil
	})
}

// batchAttrs appends to out the share attributes of the offsets from from through the batch's last:
// its priority (weir.priority, else the topic's default) and its due time (weir.deliver-at, else its
// timestamp plus weir.delay-ms, else plus the topic's weir.delivery.delay.ms; a record without a
// timestamp counts its delay from 0, so is due). The offsets of a control batch and those compaction
// left without a record get the topic's priority and are due. A header that does not parse (written
// before it was checked) counts as absent: the log is never refused at read. On a topic without
// weir.delivery.headers.enable the headers are not looked at and the batch is not decoded: its
// records get the topic's priority and are due weir.delivery.delay.ms after the batch's largest
// timestamp, which is never before any of theirs.
//
// With keys (a key-ordered group, weir.share.key.ordered) every record's key is read too, as a hash:
// the batch is decoded whatever its headers.
func batchAttrs(out []share.Attr, c record.Checked, from int64, dc controller.DeliveryConfig, keys bool) ([]share.Attr, error) {
	h := c.Header
	first := len(out)
	var due int64
	if !dc.Headers && dc.DelayMs > 0 && h.MaxTimestamp > 0 && !h.Control() {
		due = min(h.MaxTimestamp, math.MaxInt64-dc.DelayMs) + dc.DelayMs
	}
	for range h.LastOffset() - from + 1 {
		out = append(out, share.Attr{Priority: dc.PriorityDefault, Due: due})
	}
	if h.Control() || !dc.Headers && !keys {
		return out, nil
	}
	if !keys && dc.DelayMs == 0 && h.Compression() == int8(compress.None) && !bytes.Contains(record.Body(c.Bytes), weirPrefix) {
		return out, nil
	}
	err := withRecords(c, func(body []byte) error {
		if !keys && dc.DelayMs == 0 && !bytes.Contains(body, weirPrefix) {
			return nil
		}
		recs, err := record.DecodeRecords(body, int(h.NumRecords))
		if err != nil {
			return err
		}
		for _, r := range recs {
			off := h.BaseOffset + int64(r.OffsetDelta)
			if off < from || off > h.LastOffset() {
				continue
			}
			a := &out[first+int(off-from)]
			if dc.Headers {
				recordAttr(a, h, r, dc)
			}
			if keys && r.Key != nil {
				a.Key, a.Keyed = maphash.Bytes(keySeed, r.Key), true
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// recordAttr sets a's priority and due time from record r of the batch with header h.
func recordAttr(a *share.Attr, h record.Header, r record.Record, dc controller.DeliveryConfig) {
	d, err := parseDelivery(r.Headers)
	if err != nil {
		d = delivery{priority: -1, deliverAt: -1, delayMs: -1}
	}
	if d.priority >= 0 {
		a.Priority = d.priority
	}
	ts := h.BaseTimestamp + r.TimestampDelta
	if h.LogAppendTime() {
		ts = h.MaxTimestamp
	}
	delay := dc.DelayMs
	if d.delayMs >= 0 {
		delay = d.delayMs
	}
	switch {
	case d.deliverAt >= 0:
		a.Due = d.deliverAt
	case delay > 0 && ts > 0:
		a.Due = min(ts, math.MaxInt64-delay) + delay
	}
}
