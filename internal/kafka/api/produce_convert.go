package api

import (
	"fmt"
	"math"

	"github.com/weir-mq/weir/internal/compress"
	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/record"
)

// recompressRecordsBytesMax bounds the decompressed records of a batch the leader converts to another
// compressed codec, as the compactor bounds its own (storage's cleanerMaxBatchBytes); a larger batch is
// MESSAGE_TOO_LARGE. A batch converted to uncompressed is bounded by max.message.bytes instead.
const recompressRecordsBytesMax = 64 << 20

// topicCodec is the codec a topic's compression.type stores batches in; false for producer, which keeps
// each batch's own.
func topicCodec(compressionType string) (compress.Codec, bool) {
	switch compressionType {
	case "uncompressed":
		return compress.None, true
	case "gzip":
		return compress.Gzip, true
	case "snappy":
		return compress.Snappy, true
	case "lz4":
		return compress.LZ4, true
	case "zstd":
		return compress.Zstd, true
	}
	return 0, false
}

// conformBatch applies a topic's produce configs to a checked batch on the connection's goroutine,
// before the replica's owner sees it, so that no other append waits on the CPU it takes.
//
// On a CreateTime topic every record's timestamp must lie in [now - message.timestamp.before.max.ms,
// now + message.timestamp.after.max.ms] by the broker's clock (records without one, -1, are skipped, as
// Kafka skips them), else errTimestampOutOfRange. While the three timestamp limits are at their
// defaults (after 1 h, before unbounded), a batch stored as it came is checked by its header's maximum
// timestamp alone, so that it is neither decompressed nor walked; once one is set, its every record is.
//
// A batch whose codec is not the topic's compression.type (unless producer) is decompressed, its records
// walked and compressed anew at the topic's level into a new batch: the header keeps everything but the
// codec, the length and the CRC, so base sequence, producer id and epoch, the transactional bit and the
// timestamps are the producer's and idempotent retries deduplicate as before. A payload that does not
// decompress is CORRUPT_MESSAGE, records that do not match the header's count INVALID_RECORD, both with
// nothing written; the new batch meets max.message.bytes in the log's own check (MESSAGE_TOO_LARGE).
//
// A batch already in the topic's codec, or any batch under producer, is returned as it came: no copy.
func (b *Broker) conformBatch(c record.Checked, pc controller.ProduceConfig) (record.Checked, error) {
	h := c.Header
	target, convert := topicCodec(pc.Compression)
	convert = convert && target != compress.Codec(h.Compression())
	window := !pc.LogAppendTime && (pc.TimestampBeforeMaxMs != math.MaxInt64 || pc.TimestampAfterMaxMs != math.MaxInt64)
	var lo, hi int64
	if window {
		now := b.clock.Now().UnixMilli()
		lo, hi = addSaturating(now, -pc.TimestampBeforeMaxMs), addSaturating(now, pc.TimestampAfterMaxMs)
	}
	if !convert && (!window || !pc.TimestampWindowSet) {
		if window && h.MaxTimestamp > hi {
			return record.Checked{}, fmt.Errorf("%w: batch max timestamp %d after %d", errTimestampOutOfRange, h.MaxTimestamp, hi)
		}
		return c, nil
	}
	records := record.Body(c.Bytes)
	if h.Compression() != int8(compress.None) {
		limit := recompressRecordsBytesMax
		if target == compress.None && convert {
			limit = int(pc.MaxMessageBytes) - record.HeaderSize
		}
		var err error
		if records, err = compress.Decode(compress.Codec(h.Compression()), records, max(limit, 0)); err != nil {
			return record.Checked{}, err
		}
	}
	inWindow := func(ts int64) error {
		if window && ts != record.NoTimestamp && (ts < lo || ts > hi) {
			return fmt.Errorf("%w: record timestamp %d outside [%d, %d]", errTimestampOutOfRange, ts, lo, hi)
		}
		return nil
	}
	if err := record.RecordTimestamps(records, int(h.NumRecords), h.BaseTimestamp, inWindow); err != nil {
		return record.Checked{}, err
	}
	if !convert {
		return c, nil
	}
	body, err := compress.EncodeLevel(target, pc.CompressionLevel, records)
	if err != nil {
		return record.Checked{}, err
	}
	out := record.AppendBatch(make([]byte, 0, record.HeaderSize+len(body)), h.WithCompression(int8(target)), body)
	return record.Check(out)
}

// addSaturating is a+b clamped to the int64 range.
func addSaturating(a, b int64) int64 {
	s := a + b
	switch {
	case b > 0 && s < a:
		return math.MaxInt64
	case b < 0 && s > a:
		return math.MinInt64
	}
	return s
}
