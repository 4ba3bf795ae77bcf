package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// Record is one record of a batch, as laid out in the (decompressed) records section:
//
//	length          varint  bytes after this field
//	attributes      int8    unused, 0
//	timestampDelta  varlong from the batch's baseTimestamp
//	offsetDelta     varint  from the batch's baseOffset
//	keyLength       varint  -1 for a null key
//	key             bytes
//	valueLength     varint  -1 for a null value (a tombstone)
//	value           bytes
//	headerCount     varint
//	headers         headerKeyLength varint, headerKey, headerValueLength varint (-1 null), headerValue
//
// Varints are zigzag encoded, as encoding/binary's Varint. Decoded slices alias the decoded input.
type Record struct {
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	// Key is nil for a null key; an empty non-nil slice is an empty key.
	Key []byte
	// Value is nil for a null value (a tombstone).
	Value   []byte
	Headers []RecordHeader
}

// RecordHeader is one header of a record. Kafka does not allow a null header key.
type RecordHeader struct {
	Key   []byte
	Value []byte
}

// DecodeRecords decodes exactly n records from body, the whole records section of a batch after
// decompression. It fails with ErrInvalidRecord if a record is malformed, if a length runs past its record, or
// if body holds more or fewer than n records. It never panics on malformed input.
func DecodeRecords(body []byte, n int) ([]Record, error) {
	if n < 0 || n > len(body)/minRecordSize {
		return nil, fmt.Errorf("%w: %d records cannot fit in %d bytes", ErrInvalidRecord, n, len(body))
	}
	out := make([]Record, 0, n)
	for i := range n {
		length, m := binary.Varint(body)
		if m <= 0 || length < 0 || length > int64(len(body)-m) {
			return nil, fmt.Errorf("%w: record %d: bad length", ErrInvalidRecord, i)
		}
		r, err := decodeRecord(body[m : m+int(length)])
		if err != nil {
			return nil, fmt.Errorf("%w: record %d: %w", ErrInvalidRecord, i, err)
		}
		out = append(out, r)
		body = body[m+int(length):]
	}
	if len(body) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after %d records", ErrInvalidRecord, len(body), n)
	}
	return out, nil
}

// recordReader consumes one record's fields; the first error sticks.
type recordReader struct {
	b   []byte
	err error
}

func (r *recordReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, m := binary.Varint(r.b)
	if m <= 0 {
		r.err = errBadVarint
		return 0
	}
	r.b = r.b[m:]
	return v
}

// bytes reads a length-prefixed field; a length of -1 gives nil when nullable.
func (r *recordReader) bytes(nullable bool) []byte {
	n := r.varint()
	if r.err != nil {
		return nil
	}
	if n == -1 && nullable {
		return nil
	}
	if n < 0 || n > int64(len(r.b)) {
		r.err = errBadFieldLength
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

var (
	errBadVarint      = errors.New("truncated or overlong varint")
	errBadFieldLength = errors.New("field length out of range")
)

func decodeRecord(b []byte) (Record, error) {
	if len(b) < 1 {
		return Record{}, errBadFieldLength
	}
	r := recordReader{b: b[1:]}
	rec := Record{Attributes: int8(b[0])}
	rec.TimestampDelta = r.varint()
	off := r.varint()
	if off < math.MinInt32 || off > math.MaxInt32 {
		return Record{}, fmt.Errorf("offset delta %d out of range", off)
	}
	rec.OffsetDelta = int32(off)
	rec.Key = r.bytes(true)
	rec.Value = r.bytes(true)
	count := r.varint()
	if r.err == nil && (count < 0 || count > int64(len(r.b))/2) {
		return Record{}, fmt.Errorf("header count %d out of range", count)
	}
	if r.err == nil && count > 0 {
		rec.Headers = make([]RecordHeader, 0, count)
	}
	for i := int64(0); i < count && r.err == nil; i++ {
		k := r.bytes(false)
		v := r.bytes(true)
		rec.Headers = append(rec.Headers, RecordHeader{Key: k, Value: v})
	}
	if r.err != nil {
		return Record{}, r.err
	}
	if len(r.b) != 0 {
		return Record{}, fmt.Errorf("%d bytes after the headers", len(r.b))
	}
	return rec, nil
}

// AppendRecord appends r in the records-section layout, length prefix included. It sizes the record
// first and writes it in place, so that it allocates nothing when dst has room.
func AppendRecord(dst []byte, r Record) []byte {
	n := 1 + varintLen(r.TimestampDelta) + varintLen(int64(r.OffsetDelta)) + fieldLen(r.Key) + fieldLen(r.Value) +
		varintLen(int64(len(r.Headers)))
	for _, h := range r.Headers {
		n += varintLen(int64(len(h.Key))) + len(h.Key) + fieldLen(h.Value)
	}
	dst = slices.Grow(dst, varintLen(int64(n))+n)
	dst = binary.AppendVarint(dst, int64(n))
	dst = append(dst, byte(r.Attributes))
	dst = binary.AppendVarint(dst, r.TimestampDelta)
	dst = binary.AppendVarint(dst, int64(r.OffsetDelta))
	dst = appendField(dst, r.Key)
	dst = appendField(dst, r.Value)
	dst = binary.AppendVarint(dst, int64(len(r.Headers)))
	for _, h := range r.Headers {
		dst = binary.AppendVarint(dst, int64(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendField(dst, h.Value)
	}
	return dst
}

// varintLen is the length of v as a zigzag varint.
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	return (bits.Len64(u|1) + 6) / 7
}

// fieldLen is the length of v as appendField writes it.
func fieldLen(v []byte) int {
	if v == nil {
		return varintLen(-1)
	}
	return varintLen(int64(len(v))) + len(v)
}

func appendField(dst, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(v)))
	return append(dst, v...)
}

// PlainHeader is the header of an uncompressed batch of n records whose timestamps run from minTS to
// maxTS, as a non-idempotent producer writes it: no producer id, epoch or sequence, and no leader
// epoch, which the leader stamps.
func PlainHeader(n int, minTS, maxTS int64) Header {
	return Header{
		PartitionLeaderEpoch: -1, LastOffsetDelta: int32(n - 1), BaseTimestamp: minTS, MaxTimestamp: maxTS,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, NumRecords: int32(n),
	}
}

// AppendBatch appends a whole v2 batch built from h and body, the (possibly compressed) records section. It
// takes baseOffset, partitionLeaderEpoch, attributes, lastOffsetDelta, the timestamps, the producer fields and
// numRecords from h, and computes batchLength, magic and the CRC itself. The caller keeps h consistent with
// body; Validate checks the result.
func AppendBatch(dst []byte, h Header, body []byte) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, HeaderSize)...)
	b := dst[start:]
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(h.BaseOffset))
	be.PutUint32(b[offsetBatchLength:], uint32(HeaderSize-lengthOverhead+len(body)))
	be.PutUint32(b[offsetLeaderEpoch:], uint32(h.PartitionLeaderEpoch))
	b[offsetMagic] = Magic
	be.PutUint16(b[offsetAttributes:], uint16(h.Attributes))
	be.PutUint32(b[offsetLastDelta:], uint32(h.LastOffsetDelta))
	be.PutUint64(b[offsetBaseTimestamp:], uint64(h.BaseTimestamp))
	be.PutUint64(b[offsetMaxTimestamp:], uint64(h.MaxTimestamp))
	be.PutUint64(b[offsetProducerID:], uint64(h.ProducerID))
	be.PutUint16(b[offsetProducerEpoch:], uint16(h.ProducerEpoch))
	be.PutUint32(b[offsetBaseSequence:], uint32(h.BaseSequence))
	be.PutUint32(b[offsetNumRecords:], uint32(h.NumRecords))
	dst = append(dst, body...)
	b = dst[start:]
	be.PutUint32(b[offsetCRC:], Checksum(b))
	return dst
}

// Body returns the records section of a batch (compressed as a whole when the codec is not 0). b must hold a
// whole batch, as Split or Validate return it.
func Body(b []byte) []byte {
	if len(b) < HeaderSize {
		return nil
	}
	return b[HeaderSize:]
}
