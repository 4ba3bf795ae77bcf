package api

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/compress"
	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/share"
	"github.com/weir-mq/weir/internal/sharestate"
)

// The headers a dead-letter copy carries besides the record's own (docs/queues.md, "Dead letters").
const (
	dlqHeaderGroup         = "weir.dlq.group"
	dlqHeaderTopic         = "weir.dlq.topic"
	dlqHeaderPartition     = "weir.dlq.partition"
	dlqHeaderOffset        = "weir.dlq.offset"
	dlqHeaderDeliveryCount = "weir.dlq.delivery-count"
	dlqHeaderReason        = "weir.dlq.reason"
)

// dlqProduceVersion is the Produce version of a dead-letter copy: the last that names topics.
const dlqProduceVersion = 12

// dlqProduceTimeoutMs bounds the leader's wait for acks=all of a dead-letter copy.
const dlqProduceTimeoutMs = 5000

// dlqMaxBatchBytes bounds a source batch once decompressed.
const dlqMaxBatchBytes = 64 << 20

// deadLetterFunc copies the records of sp's replica r that archived names to the dead-letter topic of
// sp's group, if it has one, and returns once the copies are committed (acks=all).
type deadLetterFunc func(ctx context.Context, sp sharestate.SharePartition, r *partition.Replica, archived []share.Archive) error

// copyArchived copies what the owner's last operation archived to the dead-letter topic, before the
// write that archives it: a crash between the two copies a record twice, never zero times. A failed
// copy is COORDINATOR_NOT_AVAILABLE (retriable): the caller undoes the operation.
func (p *sharePart) copyArchived(ctx context.Context) error {
	if len(p.archived) == 0 || p.dlq == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, shareOpWait)
	defer cancel()
	if err := p.dlq(ctx, p.sp, p.replica, p.archived); err != nil {
		return fmt.Errorf("%w: dead-letter copy of %s: %v", sharestate.ErrCoordinatorNotAvailable, p.sp, err)
	}
	return nil
}

// Why dead letters were not written: the reason label of weir_share_dead_letters_dropped_total.
const (
	// dlqDropPrefix: the topic's name does not start with errors.deadletterqueue.topic.name.prefix
	// (the cluster's, else this node's: it changed after the group named the topic, or the group was
	// configured through a node with another one).
	dlqDropPrefix = "prefix"
	// dlqDropNotEnabled: the topic exists without errors.deadletterqueue.group.enable=true (its
	// operator turned the flag off, or deleted the topic and created it again without the flag).
	dlqDropNotEnabled = "not-enabled"
	// dlqDropMissing: the topic does not exist and errors.deadletterqueue.auto.create.topics.enable is false.
	dlqDropMissing = "missing"
)

// deadLettersDropped counts the records archived with no dead letter written, by reason.
type deadLettersDropped struct {
	prefix, notEnabled, missing atomic.Uint64
}

// DeadLettersDropped returns how many archived records this node wrote no dead letter for, by reason
// (prefix, not-enabled, missing), for the node's metrics.
func (b *Broker) DeadLettersDropped() map[string]uint64 {
	return map[string]uint64{dlqDropPrefix: b.dlqDropped.prefix.Load(), dlqDropNotEnabled: b.dlqDropped.notEnabled.Load(),
		dlqDropMissing: b.dlqDropped.missing.Load()}
}

// checkDeadLetterPrefix refuses, with INVALID_CONFIG, a group config change that names a dead-letter
// topic whose name does not start with errors.deadletterqueue.topic.name.prefix in img.
func (b *Broker) checkDeadLetterPrefix(img *controller.Image, group string, set map[string]string) error {
	v, ok := set[controller.GroupConfigDeadLetterTopic]
	topic := strings.TrimSpace(v)
	prefix := img.DeadLetterPrefix(b.dlqPrefix)
	if !ok || topic == "" || strings.HasPrefix(topic, prefix) {
		return nil
	}
	return fmt.Errorf("%w: %s of group %s: %q does not start with %q, the broker's %s",
		controller.ErrInvalidConfig, controller.GroupConfigDeadLetterTopic, group, topic, prefix, controller.BrokerConfigDeadLetterPrefix)
}

// deadLetterRefusal returns why img's topic may not take dead letters now (KIP-1191's rules, checked
// at each write since the topic's flag and the prefix may change after the group named it), or
// "" when it may: it exists with errors.deadletterqueue.group.enable=true, or it does not exist and
// errors.deadletterqueue.auto.create.topics.enable is on.
func (b *Broker) deadLetterRefusal(img *controller.Image, topic string) string {
	_, exists := img.Topic(topic)
	switch {
	case !strings.HasPrefix(topic, img.DeadLetterPrefix(b.dlqPrefix)):
		return dlqDropPrefix
	case exists && !img.DeadLetterEnabled(topic):
		return dlqDropNotEnabled
	case !exists && !img.DeadLetterAutoCreate():
		return dlqDropMissing
	}
	return ""
}

// dropDeadLetters archives n records of sp without their dead letters, for reason: logged, and
// counted in weir_share_dead_letters_dropped_total.
func (b *Broker) dropDeadLetters(sp sharestate.SharePartition, source, topic, reason string, n int) {
	prefix := b.meta.Image().DeadLetterPrefix(b.dlqPrefix)
	switch reason {
	case dlqDropPrefix:
		b.dlqDropped.prefix.Add(uint64(n))
	case dlqDropNotEnabled:
		b.dlqDropped.notEnabled.Add(uint64(n))
	default:
		b.dlqDropped.missing.Add(uint64(n))
	}
	b.log.Warn("share: records archived without their dead letters: the dead-letter topic may not take them",
		"reason", reason, "group", sp.Group, "topic", topic, "prefix", prefix, "source", source, "partition", sp.Partition, "records", n)
}

// copyDeadLetters is the broker's deadLetterFunc. All the copies of one call go in one batch to one
// partition of the dead-letter topic, the source partition modulo its partition count, so that the
// copies of a partition keep their order. The batch is produced at acks=all to that partition's leader:
// through this broker's own produce path when it leads it, else with a Produce request over the
// inter-broker connections. A dead-letter topic that does not exist is created, with the broker's
// default partitions and replication factor and errors.deadletterqueue.group.enable=true, when the
// cluster's errors.deadletterqueue.auto.create.topics.enable is on (Kafka's rule). A topic that
// may not take them (deadLetterRefusal) gets no copies: the records are archived all the same, and the
// broker logs and counts them.
func (b *Broker) copyDeadLetters(ctx context.Context, sp sharestate.SharePartition, r *partition.Replica, archived []share.Archive) error {
	img := b.meta.Image()
	topic, _ := img.GroupConfig(sp.Group, controller.GroupConfigDeadLetterTopic)
	if topic == "" {
		return nil
	}
	src, ok := img.TopicByID(sp.TopicID)
	if !ok {
		return fmt.Errorf("%w: %s", errUnknownTopicID, sp)
	}
	copyRecord, _ := img.GroupConfig(sp.Group, controller.GroupConfigDeadLetterCopyRecord)
	batch, n, err := deadLetterBatch(r, sp, src.Name, archived, copyRecord != "false")
	if err != nil || n == 0 {
		return err
	}
	if reason := b.deadLetterRefusal(img, topic); reason != "" {
		b.dropDeadLetters(sp, src.Name, topic, reason, n)
		return nil
	}
	t, ok := img.Topic(topic)
	if !ok {
		if t, err = b.autoCreate(ctx, topic, map[string]string{controller.ConfigDeadLetterGroupEnable: "true"}); err != nil {
			return err
		}
		if t.Configs[controller.ConfigDeadLetterGroupEnable] != "true" {
			// Created meanwhile by someone else, without the flag.
			b.dropDeadLetters(sp, src.Name, topic, dlqDropNotEnabled, n)
			return nil
		}
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = dlqProduceVersion, -1, dlqProduceTimeoutMs
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = sp.Partition%t.Partitions, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := b.produceAtLeader(ctx, b.meta.Image(), req)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("dead-letter topic %s-%d: %w", topic, p.Partition, err)
			}
			return nil
		}
	}
	return fmt.Errorf("%w: no answer for the dead-letter topic %s", errInvalidRequest, topic)
}

// produceAtLeader runs req, one partition, at that partition's leader: here, or over the inter-broker
// connections.
func (b *Broker) produceAtLeader(ctx context.Context, img *controller.Image, req *kmsg.ProduceRequest) (*kmsg.ProduceResponse, error) {
	rt := req.Topics[0]
	t, ok := img.Topic(rt.Topic)
	if !ok {
		return nil, fmt.Errorf("%w: %s", errTopicNotReady, rt.Topic)
	}
	st, ok := t.Partition(rt.Partitions[0].Partition)
	if !ok || st.Leader == controller.NoLeader {
		return nil, fmt.Errorf("%w: %s-%d", partition.ErrNotLeader, rt.Topic, rt.Partitions[0].Partition)
	}
	if st.Leader == b.nodeID {
		return b.ProduceHere(ctx, req), nil
	}
	addr, err := brokerAddr(img, st.Leader)
	if err != nil {
		return nil, err
	}
	resp, err := b.coordConns.roundTrip(ctx, addr, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.ProduceResponse), nil
}

// deadLetterBatch reads the records archived names from r and returns them as one uncompressed batch
// of copies, each with its timestamp and the dead-letter headers, and with its key, value and headers
// when copyRecord is set, and how many it holds. Archived offsets with no record (a control batch, a
// record compacted away, one below the log start) get no copy.
func deadLetterBatch(r *partition.Replica, sp sharestate.SharePartition, topic string, archived []share.Archive, copyRecord bool) ([]byte, int, error) {
	want := make(map[int64]share.Archive, len(archived))
	lo, hi := int64(math.MaxInt64), int64(-1)
	for _, a := range archived {
		want[a.Offset] = a
		lo, hi = min(lo, a.Offset), max(hi, a.Offset)
	}
	if lo = max(lo, r.LogStartOffset()); lo > hi {
		return nil, 0, nil
	}
	data, _, err := readShareBatches(r, lo, hi)
	if err != nil {
		return nil, 0, err
	}
	var body []byte
	n := 0
	minTS, maxTS := int64(math.MaxInt64), int64(math.MinInt64)
	type copied struct {
		rec record.Record
		ts  int64
	}
	var out []copied
	for b, err := range record.Batches(data) {
		if err != nil {
			return nil, 0, fmt.Errorf("%w: %w", record.ErrCorrupt, err)
		}
		h, err := record.ParseHeader(b)
		if err != nil {
			return nil, 0, err
		}
		if h.Control() || h.LastOffset() < lo || h.BaseOffset > hi {
			continue
		}
		raw, err := compress.Decode(compress.Codec(h.Compression()), record.Body(b), dlqMaxBatchBytes)
		if err != nil {
			return nil, 0, err
		}
		recs, err := record.DecodeRecords(raw, int(h.NumRecords))
		if err != nil {
			return nil, 0, err
		}
		for _, rec := range recs {
			off := h.BaseOffset + int64(rec.OffsetDelta)
			a, ok := want[off]
			if !ok {
				continue
			}
			ts := h.BaseTimestamp + rec.TimestampDelta
			if h.LogAppendTime() {
				ts = h.MaxTimestamp
			}
			minTS, maxTS = min(minTS, ts), max(maxTS, ts)
			if !copyRecord {
				rec.Key, rec.Value, rec.Headers = nil, nil, nil
			}
			rec.Headers = append(rec.Headers[:len(rec.Headers):len(rec.Headers)],
				dlqHeader(dlqHeaderGroup, sp.Group),
				dlqHeader(dlqHeaderTopic, topic),
				dlqHeader(dlqHeaderPartition, strconv.Itoa(int(sp.Partition))),
				dlqHeader(dlqHeaderOffset, strconv.FormatInt(off, 10)),
				dlqHeader(dlqHeaderDeliveryCount, strconv.Itoa(int(a.DeliveryCount))),
				dlqHeader(dlqHeaderReason, a.Reason.String()))
			out = append(out, copied{rec: rec, ts: ts})
		}
	}
	for _, c := range out {
		c.rec.Attributes, c.rec.OffsetDelta, c.rec.TimestampDelta = 0, int32(n), c.ts-minTS
		body = record.AppendRecord(body, c.rec)
		n++
	}
	if n == 0 {
		return nil, 0, nil
	}
	return record.AppendBatch(nil, record.PlainHeader(n, minTS, maxTS), body), n, nil
}

// dlqHeader is one dead-letter header.
func dlqHeader(k, v string) record.RecordHeader {
	return record.RecordHeader{Key: []byte(k), Value: []byte(v)}
}
