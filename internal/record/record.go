// Package record reads and stamps Kafka record batches, format v2 (magic 2), without decoding their records.
//
// A batch is stored exactly as received. Its 61-byte header is:
//
//	offset  size  field
//	     0     8  baseOffset            stamped by the log
//	     8     4  batchLength           bytes after this field (total size − 12)
//	    12     4  partitionLeaderEpoch  stamped by the log
//	    16     1  magic                 must be 2
//	    17     4  crc                   CRC-32C (Castagnoli) of bytes 21..end
//	    21     2  attributes            bits 0–2 codec, 3 LogAppendTime, 4 transactional, 5 control
//	    23     4  lastOffsetDelta
//	    27     8  baseTimestamp
//	    35     8  maxTimestamp
//	    43     8  producerId
//	    51     2  producerEpoch
//	    53     4  baseSequence
//	    57     4  numRecords
//	    61     …  records (compressed as a whole when the codec is not 0)
//
// All integers are big-endian. baseOffset and partitionLeaderEpoch lie outside the CRC, so stamping them needs
// no recomputation. This package imports only the standard library and never panics on malformed input.
package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"iter"
)

// HeaderSize is the size of a v2 batch header; the records follow it.
const HeaderSize = 61

// lengthOverhead is the part of a batch not counted by batchLength: baseOffset and batchLength themselves.
const lengthOverhead = 12

// Magic is the only batch format version this package accepts.
const Magic = 2

// Attribute bits.
const (
	codecMask            = 0x07
	attrLogAppendTime    = 0x08
	attrTransactional    = 0x10
	attrControl          = 0x20
	maxCodec             = 4
	offsetCRCStart       = 21
	offsetMagic          = 16
	offsetLeaderEpoch    = 12
	offsetCRC            = 17
	offsetBatchLength    = 8
	offsetAttributes     = 21
	offsetLastDelta      = 23
	offsetBaseTimestamp  = 27
	offsetMaxTimestamp   = 35
	offsetProducerID     = 43
	offsetProducerEpoch  = 51
	offsetBaseSequence   = 53
	offsetNumRecords     = 57
	minBatchLengthField  = HeaderSize - lengthOverhead
	noTimestamp          = -1
	compressionNoneCodec = 0
)

// Errors returned by ParseHeader, Validate and Split. The protocol layer maps them to Kafka error codes.
var (
	// ErrCorrupt says the bytes are not a whole batch: too short, a length that disagrees with the bytes
	// present, or a CRC mismatch (CORRUPT_MESSAGE).
	ErrCorrupt = errors.New("record: corrupt batch")
	// ErrInvalidRecord says the batch is well framed but its contents are inconsistent: record count versus
	// lastOffsetDelta, timestamps or an unknown codec (INVALID_RECORD).
	ErrInvalidRecord = errors.New("record: invalid batch")
	// ErrUnsupportedMagic says the batch is not format v2 (UNSUPPORTED_VERSION at the protocol layer).
	ErrUnsupportedMagic = errors.New("record: unsupported magic")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is the decoded 61-byte header of a v2 batch.
type Header struct {
	BaseOffset           int64
	Length               int32
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// LastOffset is the offset of the batch's last record.
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset after the batch's last record.
func (h Header) NextOffset() int64 { return h.LastOffset() + 1 }

// Size is the whole batch's size in bytes, header included.
func (h Header) Size() int { return int(h.Length) + lengthOverhead }

// Compression is the codec: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
func (h Header) Compression() int8 { return int8(h.Attributes & codecMask) }

// LogAppendTime reports whether the batch's timestamps are the broker's append time.
func (h Header) LogAppendTime() bool { return h.Attributes&attrLogAppendTime != 0 }

// Transactional reports whether the batch belongs to a transaction.
func (h Header) Transactional() bool { return h.Attributes&attrTransactional != 0 }

// Control reports whether the batch holds a control record (a transaction marker).
func (h Header) Control() bool { return h.Attributes&attrControl != 0 }

// ParseHeader decodes the header at the start of b. It checks only what the header alone can tell: that b holds
// HeaderSize bytes, that magic is 2 and that batchLength covers at least the header. It does not check the CRC.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		if len(b) > offsetMagic && int8(b[offsetMagic]) != Magic {
			return Header{}, fmt.Errorf("%w: %d", ErrUnsupportedMagic, int8(b[offsetMagic]))
		}
		return Header{}, fmt.Errorf("%w: %d bytes, shorter than a header", ErrCorrupt, len(b))
	}
	h := Header{
		BaseOffset:           int64(binary.BigEndian.Uint64(b[0:])),
		Length:               int32(binary.BigEndian.Uint32(b[offsetBatchLength:])),
		PartitionLeaderEpoch: int32(binary.BigEndian.Uint32(b[offsetLeaderEpoch:])),
		Magic:                int8(b[offsetMagic]),
		CRC:                  binary.BigEndian.Uint32(b[offsetCRC:]),
		Attributes:           int16(binary.BigEndian.Uint16(b[offsetAttributes:])),
		LastOffsetDelta:      int32(binary.BigEndian.Uint32(b[offsetLastDelta:])),
		BaseTimestamp:        int64(binary.BigEndian.Uint64(b[offsetBaseTimestamp:])),
		MaxTimestamp:         int64(binary.BigEndian.Uint64(b[offsetMaxTimestamp:])),
		ProducerID:           int64(binary.BigEndian.Uint64(b[offsetProducerID:])),
		ProducerEpoch:        int16(binary.BigEndian.Uint16(b[offsetProducerEpoch:])),
		BaseSequence:         int32(binary.BigEndian.Uint32(b[offsetBaseSequence:])),
		NumRecords:           int32(binary.BigEndian.Uint32(b[offsetNumRecords:])),
	}
	if h.Magic != Magic {
		return Header{}, fmt.Errorf("%w: %d", ErrUnsupportedMagic, h.Magic)
	}
	if h.Length < minBatchLengthField {
		return Header{}, fmt.Errorf("%w: batch length %d shorter than a header", ErrCorrupt, h.Length)
	}
	return h, nil
}

// Validate checks that b is exactly one whole v2 batch: its length matches len(b), magic is 2, the CRC-32C
// matches, the record count is positive and equals lastOffsetDelta+1, maxTimestamp is not below baseTimestamp
// and the codec is known. It never decompresses.
func Validate(b []byte) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return Header{}, err
	}
	if h.Size() != len(b) {
		return Header{}, fmt.Errorf("%w: batch length says %d bytes, have %d", ErrCorrupt, h.Size(), len(b))
	}
	if sum := crc32.Checksum(b[offsetCRCStart:], castagnoli); sum != h.CRC {
		return Header{}, fmt.Errorf("%w: crc %08x, computed %08x", ErrCorrupt, h.CRC, sum)
	}
	if err := checkContents(h); err != nil {
		return Header{}, err
	}
	return h, nil
}

// Checked is one record batch that passed Validate: its parsed header and its bytes.
type Checked struct {
	Header Header
	Bytes  []byte
}

// Check validates b as exactly one whole batch (Validate, and len(b) == the header's size) and returns it as
// Checked, so that a caller can validate a batch once, outside its locks, and hand on the result.
func Check(b []byte) (Checked, error) {
	h, err := Validate(b)
	if err != nil {
		return Checked{}, err
	}
	return Checked{Header: h, Bytes: b}, nil
}

func checkContents(h Header) error {
	switch {
	case h.NumRecords <= 0:
		return fmt.Errorf("%w: record count %d", ErrInvalidRecord, h.NumRecords)
	case h.LastOffsetDelta < 0 || int64(h.LastOffsetDelta)+1 != int64(h.NumRecords):
		return fmt.Errorf("%w: record count %d but last offset delta %d", ErrInvalidRecord, h.NumRecords, h.LastOffsetDelta)
	case h.MaxTimestamp < h.BaseTimestamp:
		return fmt.Errorf("%w: max timestamp %d below base timestamp %d", ErrInvalidRecord, h.MaxTimestamp, h.BaseTimestamp)
	case h.BaseTimestamp < noTimestamp:
		return fmt.Errorf("%w: base timestamp %d", ErrInvalidRecord, h.BaseTimestamp)
	case h.Compression() > maxCodec:
		return fmt.Errorf("%w: compression codec %d", ErrInvalidRecord, h.Compression())
	case h.Compression() == compressionNoneCodec && h.Size()-HeaderSize < int(h.NumRecords)*minRecordSize:
		return fmt.Errorf("%w: %d records cannot fit in %d bytes", ErrInvalidRecord, h.NumRecords, h.Size()-HeaderSize)
	}
	return nil
}

// minRecordSize is the smallest encoding of one record: length, attributes, timestamp delta, offset delta, key
// length, value length and header count, one byte each.
const minRecordSize = 7

// Split splits the first whole batch off b after ParseHeader's checks and a length check (not the CRC).
// It returns ErrCorrupt if b does not start with a whole batch.
func Split(b []byte) (batch, rest []byte, err error) {
	h, err := ParseHeader(b)
	if err != nil {
		return nil, nil, err
	}
	n := h.Size()
	if n > len(b) {
		return nil, nil, fmt.Errorf("%w: batch of %d bytes, have %d", ErrCorrupt, n, len(b))
	}
	return b[:n:n], b[n:], nil
}

// Batches walks concatenated batches, yielding each whole batch (framing checked as by Split, CRC not checked).
// On malformed input it yields (nil, err) once and stops.
func Batches(b []byte) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		for len(b) > 0 {
			batch, rest, err := Split(b)
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(batch, nil) {
				return
			}
			b = rest
		}
	}
}

// SetBaseOffset stamps the batch's base offset. b must hold at least a header.
func SetBaseOffset(b []byte, offset int64) { binary.BigEndian.PutUint64(b[0:], uint64(offset)) }

// SetPartitionLeaderEpoch stamps the batch's partition leader epoch. b must hold at least a header.
func SetPartitionLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[offsetLeaderEpoch:], uint32(epoch))
}

// SetLogAppendTime marks the batch's timestamps as the broker's (attribute bit 3), sets its max timestamp to
// ts, and recomputes its CRC, which covers both. Consumers then take ts as every record's timestamp. b must
// hold one whole batch.
func SetLogAppendTime(b []byte, ts int64) {
	attrs := binary.BigEndian.Uint16(b[offsetAttributes:])
	binary.BigEndian.PutUint16(b[offsetAttributes:], attrs|attrLogAppendTime)
	binary.BigEndian.PutUint64(b[offsetMaxTimestamp:], uint64(ts))
	binary.BigEndian.PutUint32(b[offsetCRC:], Checksum(b))
}

// Checksum computes the CRC-32C a batch's header must carry, over b[21:]. b must hold at least a header.
func Checksum(b []byte) uint32 { return crc32.Checksum(b[offsetCRCStart:], castagnoli) }
