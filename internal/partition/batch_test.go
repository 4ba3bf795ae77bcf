package partition

import (
	"encoding/binary"
	"fmt"

	"github.com/weir-mq/weir/internal/record"
)

// batchSpec describes a test batch.
type batchSpec struct {
	producerID int64
	epoch      int16
	seq        int32
	records    int
	timestamp  int64
	// valueBytes is the size of each record's value; 0 gives short distinct values.
	valueBytes int
	// txn makes the batch transactional.
	txn bool
}

// plain is a batch of n records without a producer.
func plain(n int, ts int64) batchSpec {
	return batchSpec{producerID: -1, epoch: -1, seq: -1, records: n, timestamp: ts}
}

// idem is a batch of n records of an idempotent producer.
func idem(pid int64, epoch int16, seq int32, n int) batchSpec {
	return batchSpec{producerID: pid, epoch: epoch, seq: seq, records: n, timestamp: 1000}
}

// encode builds a valid, uncompressed v2 batch.
func (s batchSpec) encode() []byte {
	var recs []byte
	for i := 0; i < s.records; i++ {
		value := []byte(fmt.Sprintf("value-%d", i))
		if s.valueBytes > 0 {
			value = make([]byte, s.valueBytes)
		}
		var body []byte
		body = append(body, 0) // attributes
		body = binary.AppendVarint(body, 0)
		body = binary.AppendVarint(body, int64(i))
		body = binary.AppendVarint(body, -1) // no key
		body = binary.AppendVarint(body, int64(len(value)))
		body = append(body, value...)
		body = binary.AppendVarint(body, 0) // no headers
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	b := make([]byte, record.HeaderSize, record.HeaderSize+len(recs))
	be := binary.BigEndian
	be.PutUint32(b[8:], uint32(record.HeaderSize-12+len(recs)))
	be.PutUint32(b[12:], 0xffffffff)
	b[16] = record.Magic
	if s.txn {
		be.PutUint16(b[21:], 0x10)
	}
	be.PutUint32(b[23:], uint32(s.records-1))
	be.PutUint64(b[27:], uint64(s.timestamp))
	be.PutUint64(b[35:], uint64(s.timestamp))
	be.PutUint64(b[43:], uint64(s.producerID))
	be.PutUint16(b[51:], uint16(s.epoch))
	be.PutUint32(b[53:], uint32(s.seq))
	be.PutUint32(b[57:], uint32(s.records))
	b = append(b, recs...)
	be.PutUint32(b[17:], record.Checksum(b))
	return b
}

// checked is encode validated, as the API layer hands batches to AppendAcks.
func (s batchSpec) checked() record.Checked {
	c, err := record.Check(s.encode())
	if err != nil {
		panic(err)
	}
	return c
}
