// Package recordtest builds valid record batches v2 for tests, without a Kafka client library.
package recordtest

import (
	"encoding/binary"

	"github.com/weir-mq/weir/internal/record"
)

// Spec describes a batch to build. Zero values give an uncompressed, non-idempotent batch with timestamps 0.
type Spec struct {
	BaseOffset  int64
	LeaderEpoch int32
	Records     int
	ValueBytes  int
	// Timestamp is the first record's timestamp; record i gets Timestamp+i.
	Timestamp     int64
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	Attributes    int16
}

// Batch encodes spec as a whole batch with a correct CRC. Record i has key nil and a value of ValueBytes bytes,
// each byte equal to byte(i).
func Batch(spec Spec) []byte {
	n := max(spec.Records, 1)
	var recs []byte
	for i := range n {
		var body []byte
		body = append(body, 0)                                   // attributes
		body = binary.AppendVarint(body, int64(i))               // timestamp delta
		body = binary.AppendVarint(body, int64(i))               // offset delta
		body = binary.AppendVarint(body, -1)                     // null key
		body = binary.AppendVarint(body, int64(spec.ValueBytes)) // value length
		for range spec.ValueBytes {
			body = append(body, byte(i))
		}
		body = binary.AppendVarint(body, 0) // no headers
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	b := make([]byte, record.HeaderSize, record.HeaderSize+len(recs))
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(spec.BaseOffset))
	be.PutUint32(b[8:], uint32(record.HeaderSize-12+len(recs)))
	be.PutUint32(b[12:], uint32(spec.LeaderEpoch))
	b[16] = record.Magic
	be.PutUint16(b[21:], uint16(spec.Attributes))
	be.PutUint32(b[23:], uint32(n-1))
	be.PutUint64(b[27:], uint64(spec.Timestamp))
	be.PutUint64(b[35:], uint64(spec.Timestamp+int64(n-1)))
	pid, seq := spec.ProducerID, spec.BaseSequence
	if pid == 0 && seq == 0 {
		pid, seq = -1, -1
	}
	be.PutUint64(b[43:], uint64(pid))
	be.PutUint16(b[51:], uint16(spec.ProducerEpoch))
	be.PutUint32(b[53:], uint32(seq))
	be.PutUint32(b[57:], uint32(n))
	b = append(b, recs...)
	be.PutUint32(b[17:], record.Checksum(b))
	return b
}

// Batches concatenates one batch per spec.
func Batches(specs ...Spec) []byte {
	var out []byte
	for _, s := range specs {
		out = append(out, Batch(s)...)
	}
	return out
}
