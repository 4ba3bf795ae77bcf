package txn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/record"
)

// The record format of __transaction_state, Kafka's: the key is int16 version 0 and a
// TransactionLogKey (the transactional id); the value is int16 version 1 and a flexible
// TransactionLogValue (producer id and epoch, timeout, state, partitions, last update and start times;
// tagged: the previous and next producer ids and the client's transaction version). Version 0 values, which Kafka writes below transaction.version 1,
// are read too. A null value is a tombstone: the id expired. Compaction keeps the latest record per key.
const (
	keyVersion   = 0
	valueVersion = 1
	// IDBytesMax is the longest transactional id a key holds: a Kafka string's int16 length.
	IDBytesMax = 1<<15 - 1
)

// errRecord is the error of a record that does not decode.
var errRecord = errors.New("txn: invalid __transaction_state record")

func encodeKey(id string) []byte {
	k := kmsg.NewTxnMetadataKey()
	k.Version, k.TransactionalID = keyVersion, id
	return k.AppendTo(nil)
}

// encodeValue is m's TransactionLogValue; nil (a tombstone) when m is Dead.
func encodeValue(m Metadata) []byte {
	if m.State == Dead {
		return nil
	}
	v := kmsg.NewTxnMetadataValue()
	v.Version = valueVersion
	v.ProducerID, v.ProducerEpoch = m.ProducerID, m.ProducerEpoch
	v.TimeoutMillis = int32(m.Timeout.Milliseconds())
	v.State = kmsg.TransactionState(m.State)
	v.LastUpdateTimestamp = m.LastUpdate.UnixMilli()
	v.StartTimestamp = -1
	if !m.Start.IsZero() {
		v.StartTimestamp = m.Start.UnixMilli()
	}
	v.PreviousProducerID = m.PreviousProducerID
	v.NextProducerID = m.NextProducerID
	v.ClientTransactionVersion = m.ClientTransactionVersion
	if m.State != Empty {
		v.Topics = []kmsg.TxnMetadataValueTopic{}
	}
	for _, tp := range m.Partitions {
		if n := len(v.Topics); n > 0 && v.Topics[n-1].Topic == tp.Topic {
			v.Topics[n-1].Partitions = append(v.Topics[n-1].Partitions, tp.Partition)
			continue
		}
		t := kmsg.NewTxnMetadataValueTopic()
		t.Topic, t.Partitions = tp.Topic, []int32{tp.Partition}
		v.Topics = append(v.Topics, t)
	}
	return v.AppendTo(nil)
}

// decodeRecord decodes one record of __transaction_state: the id and, unless the value is a
// tombstone (ok false), its Metadata. It never panics on bad bytes.
func decodeRecord(key, value []byte) (id string, m Metadata, ok bool, err error) {
	if len(key) < 2 || binary.BigEndian.Uint16(key) != keyVersion {
		return "", Metadata{}, false, fmt.Errorf("%w: key version", errRecord)
	}
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(key); err != nil {
		return "", Metadata{}, false, fmt.Errorf("%w: key: %w", errRecord, err)
	}
	if value == nil {
		return k.TransactionalID, Metadata{}, false, nil
	}
	if len(value) < 2 || binary.BigEndian.Uint16(value) > valueVersion {
		return "", Metadata{}, false, fmt.Errorf("%w: value version", errRecord)
	}
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(value); err != nil {
		return "", Metadata{}, false, fmt.Errorf("%w: value: %w", errRecord, err)
	}
	st := State(v.State)
	switch st {
	case Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort:
	case Dead, PrepareEpochFence:
		return "", Metadata{}, false, fmt.Errorf("%w: state %v is never stored", errRecord, st)
	default:
		return "", Metadata{}, false, fmt.Errorf("%w: state %d", errRecord, v.State)
	}
	if v.ProducerID < 0 || v.ProducerEpoch < 0 || v.TimeoutMillis < 0 {
		return "", Metadata{}, false, fmt.Errorf("%w: producer id %d, epoch %d, timeout %d", errRecord, v.ProducerID, v.ProducerEpoch, v.TimeoutMillis)
	}
	m = Metadata{
		ID: k.TransactionalID, ProducerID: v.ProducerID, ProducerEpoch: v.ProducerEpoch, PreviousProducerID: NoProducerID,
		NextProducerID: NoProducerID, Timeout: time.Duration(v.TimeoutMillis) * time.Millisecond, State: st,
		LastUpdate: time.UnixMilli(v.LastUpdateTimestamp),
	}
	if v.Version >= 1 {
		if v.PreviousProducerID >= 0 {
			m.PreviousProducerID = v.PreviousProducerID
		}
		if v.NextProducerID >= 0 && (st == PrepareCommit || st == PrepareAbort) {
			m.NextProducerID = v.NextProducerID
		}
		m.ClientTransactionVersion = max(v.ClientTransactionVersion, 0)
	}
	if v.StartTimestamp >= 0 {
		m.Start = time.UnixMilli(v.StartTimestamp)
	}
	if st.inTransaction() {
		for _, t := range v.Topics {
			for _, p := range t.Partitions {
				m.Partitions = union(m.Partitions, []TopicPartition{{Topic: t.Topic, Partition: p}})
			}
		}
	}
	return k.TransactionalID, m, true, nil
}

// encodeBatch builds one uncompressed v2 batch holding the record of m, as a non-idempotent producer
// would.
func encodeBatch(m Metadata, now time.Time) []byte {
	body := record.AppendRecord(nil, record.Record{Key: encodeKey(m.ID), Value: encodeValue(m)})
	ts := now.UnixMilli()
	return record.AppendBatch(nil, record.PlainHeader(1, ts, ts), body)
}

// loaded is what reading a __transaction_state partition rebuilds: the latest record per id.
type loaded struct {
	txns    map[string]Metadata
	skipped int
}

func newLoaded() *loaded { return &loaded{txns: map[string]Metadata{}} }

// applyBatches applies every record of the batches in b (whole batches, as read from the log) and
// returns the offset after the last one. Control batches and compressed batches (Kafka never
// compresses this topic) are skipped; a record that does not decode is counted in skipped, since a
// record of a future format must not stop the load.
func (l *loaded) applyBatches(b []byte) (int64, error) {
	next := int64(-1)
	for batch, err := range record.Batches(b) {
		if err != nil {
			return next, err
		}
		h, err := record.ParseHeader(batch)
		if err != nil {
			return next, err
		}
		next = h.NextOffset()
		if h.Control() {
			continue
		}
		if h.Compression() != 0 {
			l.skipped += int(h.NumRecords)
			continue
		}
		recs, err := record.DecodeRecords(record.Body(batch), int(h.NumRecords))
		if err != nil {
			return next, fmt.Errorf("txn: batch at %d: %w", h.BaseOffset, err)
		}
		for _, r := range recs {
			id, m, ok, err := decodeRecord(r.Key, r.Value)
			switch {
			case err != nil:
				l.skipped++
			case ok:
				l.txns[id] = m
			default:
				delete(l.txns, id)
			}
		}
	}
	return next, nil
}
