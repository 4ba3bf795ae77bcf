package share

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"
)

// WindowMax bounds the in-flight window of any share-partition: Config.RecordLocksMax may not exceed
// it, and a record whose window is longer is corrupt (so that decoding never allocates more).
const WindowMax = 1 << 16

// recordVersion is the first byte of every value and key this package encodes.
const recordVersion = 0

// Record kinds, the value's second byte.
const (
	kindSnapshot = 0
	kindUpdate   = 1
)

// valueHeaderLen is a value's fixed part: version, kind, seq, slot, leader epoch, start offset, end.
const valueHeaderLen = 1 + 1 + 4 + 4 + 4 + 8 + 8

// batchLenMin is the smallest encoding of a Batch: three one-byte varints and the state.
const batchLenMin = 4

// Encode returns the record's value as it is written to __share_group_state:
//
//	version       int8   0
//	kind          int8   0 snapshot, 1 update
//	seq           int32  big endian, as every fixed field
//	slot          int32
//	leader epoch  int32
//	start offset  int64
//	end           int64
//	batch count   uvarint
//	per batch:    uvarint first - (start, or the previous batch's last + 1)
//	              uvarint last - first
//	              int8    state (0 Available, 2 Acknowledged, 3 Archived)
//	              uvarint delivery count
func (r Record) Encode() []byte {
	b := make([]byte, valueHeaderLen, valueHeaderLen+binary.MaxVarintLen64+len(r.Batches)*8)
	b[0] = recordVersion
	b[1] = kindUpdate
	if r.Snapshot {
		b[1] = kindSnapshot
	}
	binary.BigEndian.PutUint32(b[2:], uint32(r.Seq))
	binary.BigEndian.PutUint32(b[6:], uint32(r.Slot))
	binary.BigEndian.PutUint32(b[10:], uint32(r.LeaderEpoch))
	binary.BigEndian.PutUint64(b[14:], uint64(r.StartOffset))
	binary.BigEndian.PutUint64(b[22:], uint64(r.End))
	b = binary.AppendUvarint(b, uint64(len(r.Batches)))
	next := r.StartOffset
	for _, bt := range r.Batches {
		b = binary.AppendUvarint(b, uint64(bt.First-next))
		b = binary.AppendUvarint(b, uint64(bt.Last-bt.First))
		b = append(b, byte(bt.State))
		b = binary.AppendUvarint(b, uint64(bt.DeliveryCount))
		next = bt.Last + 1
	}
	return b
}

// DecodeRecord decodes a value written by Record.Encode. Bytes that are not one (truncated, trailing,
// an unknown version or kind, a window longer than WindowMax, batches out of order or outside the
// window, an Acquired or unknown state) are ErrCorruptRecord; it never panics.
func DecodeRecord(b []byte) (Record, error) {
	if len(b) < valueHeaderLen {
		return Record{}, fmt.Errorf("%w: %d bytes", ErrCorruptRecord, len(b))
	}
	if b[0] != recordVersion || b[1] > kindUpdate {
		return Record{}, fmt.Errorf("%w: version %d, kind %d", ErrCorruptRecord, b[0], b[1])
	}
	r := Record{
		Snapshot:    b[1] == kindSnapshot,
		Seq:         int32(binary.BigEndian.Uint32(b[2:])),
		Slot:        int32(binary.BigEndian.Uint32(b[6:])),
		LeaderEpoch: int32(binary.BigEndian.Uint32(b[10:])),
		StartOffset: int64(binary.BigEndian.Uint64(b[14:])),
		End:         int64(binary.BigEndian.Uint64(b[22:])),
	}
	rest := b[valueHeaderLen:]
	n, rest, err := uvarint(rest)
	if err != nil {
		return Record{}, err
	}
	if n > uint64(len(rest)/batchLenMin) {
		return Record{}, fmt.Errorf("%w: %d batches in %d bytes", ErrCorruptRecord, n, len(rest))
	}
	if n > 0 {
		r.Batches = make([]Batch, n)
	}
	next := uint64(r.StartOffset)
	for i := range r.Batches {
		var gap, span, count uint64
		if gap, rest, err = uvarint(rest); err != nil {
			return Record{}, err
		}
		if span, rest, err = uvarint(rest); err != nil {
			return Record{}, err
		}
		if len(rest) == 0 {
			return Record{}, fmt.Errorf("%w: batch %d has no state", ErrCorruptRecord, i)
		}
		state := RecordState(rest[0])
		if count, rest, err = uvarint(rest[1:]); err != nil {
			return Record{}, err
		}
		if gap > WindowMax || span > WindowMax || count > math.MaxInt16 {
			return Record{}, fmt.Errorf("%w: batch %d out of range", ErrCorruptRecord, i)
		}
		first := next + gap
		r.Batches[i] = Batch{First: int64(first), Last: int64(first + span), State: state, DeliveryCount: int16(count)}
		next = first + span + 1
	}
	if len(rest) > 0 {
		return Record{}, fmt.Errorf("%w: %d bytes after the batches", ErrCorruptRecord, len(rest))
	}
	if err := r.check(); err != nil {
		return Record{}, err
	}
	return r, nil
}

// uvarint reads one uvarint in its shortest form: a value has one encoding only.
func uvarint(b []byte) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 || n > 1 && b[n-1] == 0 {
		return 0, nil, fmt.Errorf("%w: bad varint", ErrCorruptRecord)
	}
	return v, b[n:], nil
}

// check reports whether the record can describe a share-partition: the assertions DecodeRecord and
// Durable.Apply make of every record.
func (r Record) check() error {
	switch {
	case r.Snapshot != (r.Slot == 0) || r.Slot < 0 || r.Seq < 0:
		return fmt.Errorf("%w: round %d, slot %d, snapshot %t", ErrCorruptRecord, r.Seq, r.Slot, r.Snapshot)
	case r.StartOffset < 0 || r.End < r.StartOffset || r.End-r.StartOffset > WindowMax:
		return fmt.Errorf("%w: window [%d, %d)", ErrCorruptRecord, r.StartOffset, r.End)
	}
	next := r.StartOffset
	for _, b := range r.Batches {
		switch {
		case b.First < next || b.Last < b.First || b.Last >= r.End:
			return fmt.Errorf("%w: batch [%d, %d] in window [%d, %d)", ErrCorruptRecord, b.First, b.Last, r.StartOffset, r.End)
		case b.State != Available && b.State != Acknowledged && b.State != Archived:
			return fmt.Errorf("%w: batch [%d, %d] in state %s", ErrCorruptRecord, b.First, b.Last, b.State)
		case b.DeliveryCount < 0:
			return fmt.Errorf("%w: delivery count %d", ErrCorruptRecord, b.DeliveryCount)
		}
		next = b.Last + 1
	}
	return nil
}

// Key names a record in __share_group_state: the share-partition (group, topic id, partition), and the
// update's slot (0 for the snapshot). Compaction keeps the latest record of each key.
type Key struct {
	Group     string
	TopicID   [16]byte
	Partition int32
	Slot      int32
}

// Encode returns the key as it is written: version int8 0, the group as uvarint length and bytes, the
// 16 bytes of the topic id, then partition and slot as big-endian int32.
func (k Key) Encode() []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(k.Group)+16+8)
	b = append(b, recordVersion)
	b = binary.AppendUvarint(b, uint64(len(k.Group)))
	b = append(b, k.Group...)
	b = append(b, k.TopicID[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(k.Partition))
	return binary.BigEndian.AppendUint32(b, uint32(k.Slot))
}

// DecodeKey decodes a key written by Key.Encode; anything else (an empty or invalid UTF-8 group, a
// negative partition or slot, bytes missing or left over) is ErrCorruptRecord.
func DecodeKey(b []byte) (Key, error) {
	if len(b) == 0 || b[0] != recordVersion {
		return Key{}, fmt.Errorf("%w: key version", ErrCorruptRecord)
	}
	n, rest, err := uvarint(b[1:])
	if err != nil {
		return Key{}, err
	}
	if n == 0 || n > uint64(len(rest)) || len(rest)-int(n) != 16+8 {
		return Key{}, fmt.Errorf("%w: key of %d bytes with a group of %d", ErrCorruptRecord, len(b), n)
	}
	k := Key{Group: string(rest[:n])}
	rest = rest[n:]
	copy(k.TopicID[:], rest)
	k.Partition = int32(binary.BigEndian.Uint32(rest[16:]))
	k.Slot = int32(binary.BigEndian.Uint32(rest[20:]))
	if !utf8.ValidString(k.Group) || k.Partition < 0 || k.Slot < 0 {
		return Key{}, fmt.Errorf("%w: key %q partition %d slot %d", ErrCorruptRecord, k.Group, k.Partition, k.Slot)
	}
	return k, nil
}
