package record

import (
	"encoding/binary"
	"fmt"
)

// The control record types of a transaction marker (the key's second int16).
const (
	ControlAbort  int16 = 0
	ControlCommit int16 = 1
)

// controlKeySize and controlValueSize are the sizes of a marker's key (version, type) and value
// (version, coordinator epoch), both at version 0.
const (
	controlKeySize   = 4
	controlValueSize = 6
)

// Marker is the decoded control record of a transaction marker batch.
type Marker struct {
	Commit           bool
	CoordinatorEpoch int32
}

// AppendMarker appends a transaction marker batch: one control record (COMMIT when commit, else ABORT)
// of producer id/epoch, transactional and control, with no sequence, stamped at ts (Unix milliseconds).
// Its base offset and leader epoch are left for the log to stamp.
func AppendMarker(dst []byte, producerID int64, producerEpoch int16, coordinatorEpoch int32, commit bool, ts int64) []byte {
	typ := ControlAbort
	if commit {
		typ = ControlCommit
	}
	key := binary.BigEndian.AppendUint16(make([]byte, 0, controlKeySize), 0)
	key = binary.BigEndian.AppendUint16(key, uint16(typ))
	value := binary.BigEndian.AppendUint16(make([]byte, 0, controlValueSize), 0)
	value = binary.BigEndian.AppendUint32(value, uint32(coordinatorEpoch))
	body := AppendRecord(nil, Record{Key: key, Value: value})
	h := Header{
		PartitionLeaderEpoch: -1,
		Attributes:           attrTransactional | attrControl,
		BaseTimestamp:        ts,
		MaxTimestamp:         ts,
		ProducerID:           producerID,
		ProducerEpoch:        producerEpoch,
		BaseSequence:         -1,
		NumRecords:           1,
	}
	return AppendBatch(dst, h, body)
}

// ParseMarker decodes the marker of a control batch b (a whole, uncompressed batch, as Validate returns
// it). It fails with ErrInvalidRecord for a batch that is not a control batch or whose record is not a
// transaction marker.
func ParseMarker(b []byte) (Marker, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return Marker{}, err
	}
	if !h.Control() || h.Compression() != compressionNoneCodec || h.NumRecords != 1 || h.Size() > len(b) {
		return Marker{}, fmt.Errorf("%w: not a transaction marker batch", ErrInvalidRecord)
	}
	recs, err := DecodeRecords(b[HeaderSize:h.Size()], 1)
	if err != nil {
		return Marker{}, err
	}
	k, v := recs[0].Key, recs[0].Value
	if len(k) < controlKeySize || len(v) < controlValueSize {
		return Marker{}, fmt.Errorf("%w: control record key %d bytes, value %d bytes", ErrInvalidRecord, len(k), len(v))
	}
	typ := int16(binary.BigEndian.Uint16(k[2:]))
	if typ != ControlAbort && typ != ControlCommit {
		return Marker{}, fmt.Errorf("%w: control record type %d", ErrInvalidRecord, typ)
	}
	return Marker{Commit: typ == ControlCommit, CoordinatorEpoch: int32(binary.BigEndian.Uint32(v[2:]))}, nil
}
