package record

import (
	"encoding/binary"
	"fmt"
)

// NoTimestamp is the timestamp of a record that has none; Kafka's timestamp checks skip it.
const NoTimestamp = noTimestamp

// RecordTimestamps calls fn with the timestamp (baseTimestamp plus the record's delta) of each of the n
// records in body, the whole records section of a batch after decompression, and returns fn's first error.
// It reads only each record's length, attributes and timestamp delta, in place, without allocating, and fails
// with ErrInvalidRecord when a record's framing runs past body or body holds more or fewer than n records. It
// never panics on malformed input.
func RecordTimestamps(body []byte, n int, baseTimestamp int64, fn func(ts int64) error) error {
	if n < 0 || n > len(body)/minRecordSize {
		return fmt.Errorf("%w: %d records cannot fit in %d bytes", ErrInvalidRecord, n, len(body))
	}
	for i := range n {
		length, m := binary.Varint(body)
		if m <= 0 || length < 2 || length > int64(len(body)-m) {
			return fmt.Errorf("%w: record %d: bad length", ErrInvalidRecord, i)
		}
		rec := body[m : m+int(length)]
		delta, dm := binary.Varint(rec[1:])
		if dm <= 0 {
			return fmt.Errorf("%w: record %d: %w", ErrInvalidRecord, i, errBadVarint)
		}
		if err := fn(baseTimestamp + delta); err != nil {
			return err
		}
		body = body[m+int(length):]
	}
	if len(body) != 0 {
		return fmt.Errorf("%w: %d bytes after %d records", ErrInvalidRecord, len(body), n)
	}
	return nil
}

// WithCompression returns h with its codec (attribute bits 0–2) set to codec and its other attributes kept,
// for a batch rebuilt around a records section compressed anew (AppendBatch).
func (h Header) WithCompression(codec int8) Header {
	h.Attributes = h.Attributes&^codecMask | int16(codec)&codecMask
	return h
}
