package group

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/compress"
	"github.com/weir-mq/weir/internal/record"
)

// The record formats of __consumer_offsets, as Kafka 2.8 writes them: an offset commit has key version 1
// (group, topic, partition) and value version 3 (offset, leader epoch, metadata, commit time); group
// metadata has key version 2 (group) and value version 3. A null value is a tombstone. Compaction keeps the
// latest record per key.
const (
	offsetKeyVersion   = 1
	offsetValueVersion = 3
	groupKeyVersion    = 2
	groupValueVersion  = 3
	// loadBatchBytesMax bounds one decompressed batch read back while loading.
	loadBatchBytesMax = 64 << 20
)

// A share group's record (docs/queues.md, "A share group in __consumer_offsets"): weir's own encoding
// under the record type Kafka gives ShareGroupMetadata. The key is the type as an int16 and the group id
// as an int16 length and its bytes; the value is a version int16 and the group epoch as an int32. A
// null value is a tombstone.
const (
	shareGroupKeyType      = 11
	shareGroupValueVersion = 0
	shareGroupValueLen     = 2 + 4
)

func shareGroupKey(group string) []byte {
	k := binary.BigEndian.AppendUint16(nil, shareGroupKeyType)
	k = binary.BigEndian.AppendUint16(k, uint16(len(group)))
	return append(k, group...)
}

func shareGroupEntry(group string, epoch int32) entry {
	v := binary.BigEndian.AppendUint16(nil, shareGroupValueVersion)
	v = binary.BigEndian.AppendUint32(v, uint32(epoch))
	return entry{key: shareGroupKey(group), value: v}
}

// parseShareGroupKey returns the group id of a share group's record key; false when key is not one.
func parseShareGroupKey(key []byte) (string, bool) {
	if len(key) < 4 || binary.BigEndian.Uint16(key) != shareGroupKeyType {
		return "", false
	}
	n := int(binary.BigEndian.Uint16(key[2:]))
	if len(key) != 4+n {
		return "", false
	}
	return string(key[4:]), true
}

// parseShareGroupValue returns the group epoch of a share group's record value; false when value is
// not one this version writes (another length or version, or a negative epoch).
func parseShareGroupValue(value []byte) (int32, bool) {
	if len(value) != shareGroupValueLen || binary.BigEndian.Uint16(value) != shareGroupValueVersion {
		return 0, false
	}
	epoch := int32(binary.BigEndian.Uint32(value[2:]))
	return epoch, epoch >= 0
}

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// committed is a durable offset commit.
type committed struct {
	offset      int64
	leaderEpoch int32
	metadata    string
	commitTime  time.Time
	// recordOffset is the offset of the commit's record in __consumer_offsets: when a transaction
	// commits, its staged offset replaces a committed one only if its record is the later (Kafka's rule).
	recordOffset int64
}

// completeTxn ends producerID's transaction in one group's offsets: on commit each offset it staged
// becomes the committed one, unless the partition's committed offset has the later record (a plain
// commit written after the transaction's); staged offsets are dropped either way.
func completeTxn(offsets map[TopicPartition]committed, staged map[int64]map[TopicPartition]committed, producerID int64, commit bool) {
	txn, ok := staged[producerID]
	if !ok {
		return
	}
	delete(staged, producerID)
	if !commit {
		return
	}
	for tp, c := range txn {
		if cur, ok := offsets[tp]; !ok || cur.recordOffset < c.recordOffset {
			offsets[tp] = c
		}
	}
}

// entry is one record to append to __consumer_offsets: a key and a value (nil: a tombstone).
type entry struct {
	key, value []byte
}

func offsetKey(group string, tp TopicPartition) []byte {
	k := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: group, Topic: tp.Topic, Partition: tp.Partition}
	return k.AppendTo(nil)
}

func offsetEntry(group string, tp TopicPartition, c committed) entry {
	v := kmsg.NewOffsetCommitValue()
	v.Version = offsetValueVersion
	v.Offset, v.LeaderEpoch, v.Metadata = c.offset, c.leaderEpoch, c.metadata
	v.CommitTimestamp = c.commitTime.UnixMilli()
	return entry{key: offsetKey(group, tp), value: v.AppendTo(nil)}
}

func groupKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: groupKeyVersion, Group: group}
	return k.AppendTo(nil)
}

func groupEntry(rec Record, now time.Time) entry {
	if rec.Tombstone {
		return entry{key: groupKey(rec.Metadata.Group)}
	}
	md := rec.Metadata
	v := kmsg.NewGroupMetadataValue()
	v.Version = groupValueVersion
	v.ProtocolType, v.Generation = md.ProtocolType, md.Generation
	if md.Protocol != "" {
		v.Protocol = kmsg.StringPtr(md.Protocol)
	}
	if md.Leader != "" {
		v.Leader = kmsg.StringPtr(md.Leader)
	}
	v.CurrentStateTimestamp = now.UnixMilli()
	for _, m := range md.Members {
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID, vm.ClientID, vm.ClientHost = m.MemberID, m.ClientID, m.ClientHost
		if m.InstanceID != "" {
			vm.InstanceID = kmsg.StringPtr(m.InstanceID)
		}
		vm.SessionTimeoutMillis = int32(m.SessionTimeout.Milliseconds())
		vm.RebalanceTimeoutMillis = int32(m.RebalanceTimeout.Milliseconds())
		vm.Subscription, vm.Assignment = m.Subscription, m.Assignment
		v.Members = append(v.Members, vm)
	}
	return entry{key: groupKey(md.Group), value: v.AppendTo(nil)}
}

// transactionalAttribute is the attributes bit of a v2 batch header that marks a transactional batch.
const transactionalAttribute = 0x10

// encodeBatch builds one uncompressed v2 batch of entries, as a non-idempotent producer would.
func encodeBatch(entries []entry, now time.Time) []byte {
	return encodeProducerBatch(entries, now, 0, -1, -1)
}

// encodeTxnBatch builds one uncompressed v2 batch of entries as a transaction's offsets: transactional,
// of the producer's id and epoch, and with no sequence, as Kafka's group coordinator writes them.
func encodeTxnBatch(entries []entry, now time.Time, producerID int64, producerEpoch int16) []byte {
	return encodeProducerBatch(entries, now, transactionalAttribute, producerID, producerEpoch)
}

func encodeProducerBatch(entries []entry, now time.Time, attributes int16, producerID int64, producerEpoch int16) []byte {
	var body []byte
	for i, e := range entries {
		body = record.AppendRecord(body, record.Record{OffsetDelta: int32(i), Key: e.key, Value: e.value})
	}
	ts := now.UnixMilli()
	h := record.PlainHeader(len(entries), ts, ts)
	h.Attributes, h.ProducerID, h.ProducerEpoch = attributes, producerID, producerEpoch
	return record.AppendBatch(nil, h, body)
}

// loaded is what reading an offsets partition rebuilds: the latest group metadata and offsets per group,
// and the offsets of transactions still open at the end of the read.
type loaded struct {
	groups map[string]*loadedGroup
	// shares holds each share group's recorded group epoch.
	shares map[string]int32
	// open indexes the groups in which each producer staged offsets.
	open    openTxns
	skipped int
}

type loadedGroup struct {
	// metadata is nil when the group has only offsets or its metadata was deleted.
	metadata   *Metadata
	stateSince time.Time
	offsets    map[TopicPartition]committed
	// staged holds the offsets of open transactions, by producer id.
	staged map[int64]map[TopicPartition]committed
}

func newLoaded() *loaded {
	return &loaded{groups: map[string]*loadedGroup{}, shares: map[string]int32{}, open: openTxns{}}
}

func (l *loaded) group(id string) *loadedGroup {
	g := l.groups[id]
	if g == nil {
		g = &loadedGroup{offsets: map[TopicPartition]committed{}, staged: map[int64]map[TopicPartition]committed{}}
		l.groups[id] = g
	}
	return g
}

// applyBatches applies the batches in b (whole batches, as read from the log) in log order: the records
// of a transactional batch are staged under its producer id, a transaction marker (a control batch)
// commits or drops what its producer staged, and other control batches are skipped. A record that does
// not decode is counted in skipped and ignored, since a record of a future format must not stop the
// load. It returns the offset after the last batch.
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
			l.applyControl(h, batch)
			continue
		}
		body := record.Body(batch)
		if c := h.Compression(); c != 0 {
			if body, err = compress.Decode(compress.Codec(c), body, loadBatchBytesMax); err != nil {
				return next, fmt.Errorf("group: offsets batch at %d: %w", h.BaseOffset, err)
			}
		}
		recs, err := record.DecodeRecords(body, int(h.NumRecords))
		if err != nil {
			return next, fmt.Errorf("group: offsets batch at %d: %w", h.BaseOffset, err)
		}
		producerID := int64(-1)
		if h.Transactional() {
			producerID = h.ProducerID
		}
		for _, r := range recs {
			if !l.apply(r.Key, r.Value, h.BaseOffset+int64(r.OffsetDelta), producerID) {
				l.skipped++
			}
		}
	}
	return next, nil
}

// applyControl applies a control batch: a transaction marker ends its producer's transaction in every
// group; any other control record (none is written to __consumer_offsets) is counted in skipped.
func (l *loaded) applyControl(h record.Header, batch []byte) {
	m, err := record.ParseMarker(batch)
	if err != nil {
		l.skipped++
		return
	}
	for group := range l.open[h.ProducerID] {
		if g := l.groups[group]; g != nil {
			completeTxn(g.offsets, g.staged, h.ProducerID, m.Commit)
		}
	}
	delete(l.open, h.ProducerID)
}

// apply applies one record, found at offset in the log, and reports whether it was understood. An
// offset commit of a transaction (producerID >= 0) is staged under the producer; a tombstone outside a
// transaction never touches staged offsets.
func (l *loaded) apply(key, value []byte, offset, producerID int64) bool {
	if len(key) < 2 {
		return false
	}
	switch binary.BigEndian.Uint16(key) {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if k.ReadFrom(key) != nil {
			return false
		}
		tp := TopicPartition{Topic: k.Topic, Partition: k.Partition}
		if value == nil {
			if g := l.groups[k.Group]; g != nil && producerID < 0 {
				delete(g.offsets, tp)
			} else if g != nil {
				delete(g.staged[producerID], tp)
			}
			return true
		}
		var v kmsg.OffsetCommitValue
		if v.ReadFrom(value) != nil {
			return false
		}
		epoch := v.LeaderEpoch
		if v.Version < 3 {
			epoch = -1
		}
		c := committed{
			offset: v.Offset, leaderEpoch: epoch, metadata: v.Metadata, commitTime: time.UnixMilli(v.CommitTimestamp),
			recordOffset: offset,
		}
		g := l.group(k.Group)
		if producerID < 0 {
			g.offsets[tp] = c
			return true
		}
		if g.staged[producerID] == nil {
			g.staged[producerID] = map[TopicPartition]committed{}
		}
		g.staged[producerID][tp] = c
		l.open.add(producerID, k.Group)
		return true
	case 2:
		var k kmsg.GroupMetadataKey
		if k.ReadFrom(key) != nil {
			return false
		}
		if value == nil {
			delete(l.groups, k.Group)
			return true
		}
		var v kmsg.GroupMetadataValue
		if v.ReadFrom(value) != nil {
			return false
		}
		g := l.group(k.Group)
		g.metadata = metadataFrom(k.Group, &v)
		g.stateSince = time.Time{}
		if v.CurrentStateTimestamp >= 0 && v.Version >= 2 {
			g.stateSince = time.UnixMilli(v.CurrentStateTimestamp)
		}
		return true
	case shareGroupKeyType:
		id, ok := parseShareGroupKey(key)
		if !ok {
			return false
		}
		if value == nil {
			delete(l.shares, id)
			return true
		}
		epoch, ok := parseShareGroupValue(value)
		if ok {
			l.shares[id] = epoch
		}
		return ok
	default:
		return false
	}
}

func metadataFrom(group string, v *kmsg.GroupMetadataValue) *Metadata {
	md := &Metadata{Group: group, ProtocolType: v.ProtocolType, Generation: v.Generation}
	if v.Protocol != nil {
		md.Protocol = *v.Protocol
	}
	if v.Leader != nil {
		md.Leader = *v.Leader
	}
	for _, m := range v.Members {
		mm := MemberMetadata{
			MemberID:         m.MemberID,
			ClientID:         m.ClientID,
			ClientHost:       m.ClientHost,
			SessionTimeout:   time.Duration(m.SessionTimeoutMillis) * time.Millisecond,
			RebalanceTimeout: time.Duration(m.RebalanceTimeoutMillis) * time.Millisecond,
			Subscription:     m.Subscription,
			Assignment:       m.Assignment,
		}
		if m.InstanceID != nil {
			mm.InstanceID = *m.InstanceID
		}
		md.Members = append(md.Members, mm)
	}
	return md
}
