package txn

import (
	"encoding/hex"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestRecordsRoundTrip(t *testing.T) {
	for _, m := range []Metadata{
		{ID: "empty", ProducerID: 3, ProducerEpoch: 0, PreviousProducerID: NoProducerID, NextProducerID: NoProducerID, Timeout: time.Minute, State: Empty, LastUpdate: t0},
		{
			ID: "ongoing", ProducerID: 3, ProducerEpoch: 9, PreviousProducerID: 2, NextProducerID: NoProducerID, Timeout: time.Second, State: Ongoing,
			Partitions: []TopicPartition{{"a", 0}, {"a", 2}, {"b", 1}}, LastUpdate: t0.Add(time.Second), Start: t0,
		},
		{ID: "done", ProducerID: 3, ProducerEpoch: 9, PreviousProducerID: NoProducerID, NextProducerID: NoProducerID, Timeout: time.Second, State: CompleteCommit, LastUpdate: t0, Start: t0},
		{
			ID: "tv2", ProducerID: 3, ProducerEpoch: 32767, PreviousProducerID: NoProducerID, NextProducerID: 4, ClientTransactionVersion: TV2,
			Timeout: time.Second, State: PrepareCommit, Partitions: []TopicPartition{{"a", 0}}, LastUpdate: t0, Start: t0,
		},
	} {
		id, got, ok, err := decodeRecord(encodeKey(m.ID), encodeValue(m))
		if err != nil || !ok || id != m.ID || !reflect.DeepEqual(got, m) {
			t.Errorf("%s: decoded %+v ok %v err %v, want %+v", m.ID, got, ok, err, m)
		}
	}
	id, _, ok, err := decodeRecord(encodeKey("gone"), nil)
	if err != nil || ok || id != "gone" {
		t.Errorf("tombstone: id %q ok %v err %v", id, ok, err)
	}
}

// TestRecordsKafkaLayout pins the bytes to Kafka's: key version 0 and the id; value version 1 with a
// null partition array in Empty.
func TestRecordsKafkaLayout(t *testing.T) {
	if got, want := hex.EncodeToString(encodeKey("tx")), "000000027478"; got != want {
		t.Errorf("key %s, want %s", got, want)
	}
	v := encodeValue(Metadata{ID: "tx", ProducerID: 1, ProducerEpoch: 2, PreviousProducerID: NoProducerID, NextProducerID: NoProducerID, Timeout: time.Second, State: Empty, LastUpdate: time.UnixMilli(5)})
	var kv kmsg.TxnMetadataValue
	if err := kv.ReadFrom(v); err != nil {
		t.Fatal(err)
	}
	if kv.Version != 1 || kv.Topics != nil || kv.StartTimestamp != -1 || kv.TimeoutMillis != 1000 || kv.State != 0 {
		t.Errorf("value %+v", kv)
	}
}

func TestRecordsDecodeV0(t *testing.T) {
	v := kmsg.NewTxnMetadataValue()
	v.Version, v.ProducerID, v.ProducerEpoch, v.TimeoutMillis, v.State = 0, 4, 1, 60000, kmsg.TransactionState(PrepareAbort)
	v.LastUpdateTimestamp, v.StartTimestamp = 10, 5
	v.Topics = []kmsg.TxnMetadataValueTopic{{Topic: "t", Partitions: []int32{1, 0}}}
	_, m, ok, err := decodeRecord(encodeKey("old"), v.AppendTo(nil))
	if err != nil || !ok {
		t.Fatalf("v0: ok %v err %v", ok, err)
	}
	want := Metadata{
		ID: "old", ProducerID: 4, ProducerEpoch: 1, PreviousProducerID: NoProducerID, NextProducerID: NoProducerID, Timeout: time.Minute, State: PrepareAbort,
		Partitions: []TopicPartition{{"t", 0}, {"t", 1}}, LastUpdate: time.UnixMilli(10), Start: time.UnixMilli(5),
	}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("v0: %+v, want %+v", m, want)
	}
}

func TestRecordsDecodeRefuses(t *testing.T) {
	good := encodeValue(Metadata{ID: "x", ProducerID: 1, State: Empty, PreviousProducerID: NoProducerID, NextProducerID: NoProducerID})
	for name, kv := range map[string][2][]byte{
		"short key":      {{0}, good},
		"key version":    {{0, 1, 0, 1, 'x'}, good},
		"value version":  {encodeKey("x"), append([]byte{0, 2}, good[2:]...)},
		"truncated":      {encodeKey("x"), good[:len(good)-3]},
		"never stored":   {encodeKey("x"), encodeValue(Metadata{ID: "x", State: PrepareEpochFence})},
		"unknown state":  {encodeKey("x"), encodeValue(Metadata{ID: "x", State: 42})},
		"negative epoch": {encodeKey("x"), encodeValue(Metadata{ID: "x", ProducerID: 1, ProducerEpoch: -3})},
	} {
		if _, _, _, err := decodeRecord(kv[0], kv[1]); !errors.Is(err, errRecord) {
			t.Errorf("%s: err %v, want errRecord", name, err)
		}
	}
}

func TestRecordsLoadBatches(t *testing.T) {
	m := Metadata{ID: "tx", ProducerID: 3, PreviousProducerID: NoProducerID, NextProducerID: NoProducerID, Timeout: time.Minute, State: Empty, LastUpdate: t0}
	var log []byte
	log = append(log, encodeBatch(m, t0)...)
	m2 := m
	m2.ProducerEpoch = 1
	log = append(log, encodeBatch(m2, t0)...)
	dead := m
	dead.ID, dead.State = "gone", Dead
	log = append(log, encodeBatch(Metadata{ID: "gone", ProducerID: 1, PreviousProducerID: NoProducerID, NextProducerID: NoProducerID, State: Empty}, t0)...)
	log = append(log, encodeBatch(dead, t0)...)
	l := newLoaded()
	if _, err := l.applyBatches(log); err != nil {
		t.Fatal(err)
	}
	if len(l.txns) != 1 || !reflect.DeepEqual(l.txns["tx"], m2) {
		t.Fatalf("loaded %+v", l.txns)
	}
}

// FuzzRecordsDecode feeds arbitrary keys, values and batches to the loader's decoders: they must
// return an error or a record that encodes back to an equal one, never panic.
func FuzzRecordsDecode(f *testing.F) {
	m := Metadata{ID: "tx", ProducerID: 3, ProducerEpoch: 2, PreviousProducerID: NoProducerID, NextProducerID: NoProducerID, Timeout: time.Minute, State: Ongoing,
		Partitions: []TopicPartition{{"a", 1}}, LastUpdate: t0, Start: t0}
	f.Add(encodeKey(m.ID), encodeValue(m), encodeBatch(m, t0))
	f.Add([]byte{0, 0}, []byte{0, 1}, []byte{})
	f.Fuzz(func(t *testing.T, key, value, batch []byte) {
		if id, m, ok, err := decodeRecord(key, value); err == nil && ok {
			_, again, ok2, err2 := decodeRecord(encodeKey(id), encodeValue(m))
			if err2 != nil || !ok2 || !reflect.DeepEqual(again, m) {
				t.Fatalf("re-decoded %+v (%v), was %+v", again, err2, m)
			}
		}
		_, _ = newLoaded().applyBatches(batch)
	})
}
