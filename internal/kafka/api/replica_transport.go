package api

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/storage"
)

// Versions the follower fetcher speaks: Fetch v12 is the last with topic names and the first with
// LastFetchedEpoch and DivergingEpoch; OffsetForLeaderEpoch v4 carries the replica id and the
// current leader epoch.
const (
	replicaFetchVersion       = 12
	replicaEpochVersion       = 4
	replicaFetchBytesMax      = 16 << 20
	replicaPartitionBytesMax  = 1 << 20
	replicaResponseBytesMax   = 64 << 20
	replicaRequestTimeoutPlus = 10 * time.Second
)

// ReplicaTransport is partition.Transport over the Kafka protocol: a plain TCP connection per leader
// broker carrying Fetch v12 and OffsetForLeaderEpoch v4 with the follower's replica id, the requests
// this package serves for followers. It maps the answers' Kafka error codes back to partition's and
// storage's errors, so no other package needs to know them.
type ReplicaTransport struct {
	// ClientID is sent in every request header; empty means "weir-replica".
	ClientID string
}

var _ partition.Transport = ReplicaTransport{}

// Dial connects to the broker at addr.
func (t ReplicaTransport) Dial(ctx context.Context, addr string) (partition.LeaderConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: dial %s: %w", partition.ErrLeaderUnreachable, addr, err)
	}
	id := t.ClientID
	if id == "" {
		id = "weir-replica"
	}
	return &replicaConn{c: c, addr: addr, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID(id))}, nil
}

// replicaConn is one connection to a leader broker; one request at a time.
type replicaConn struct {
	c    net.Conn
	addr string
	f    *kmsg.RequestFormatter
	corr int32
}

func (c *replicaConn) Close() error { return c.c.Close() }

// roundTrip sends req and reads its response, giving up when ctx ends or after timeout.
func (c *replicaConn) roundTrip(ctx context.Context, req kmsg.Request, timeout time.Duration) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// A blocked read or write ends when ctx does: the deadline in the past wakes it.
	stop := context.AfterFunc(ctx, func() { _ = c.c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	c.corr++
	if _, err := c.c.Write(c.f.AppendRequest(nil, req, c.corr)); err != nil {
		return nil, c.fail("write", err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c.c, size[:]); err != nil {
		return nil, c.fail("read", err)
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > replicaResponseBytesMax {
		return nil, c.fail("read", fmt.Errorf("response of %d bytes", n))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.c, body); err != nil {
		return nil, c.fail("read", err)
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != c.corr {
		return nil, c.fail("read", fmt.Errorf("correlation id %d, want %d", corr, c.corr))
	}
	body = body[4:]
	if req.IsFlexible() {
		rest, ok := skipTags(body)
		if !ok {
			return nil, c.fail("read", errors.New("malformed response header"))
		}
		body = rest
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		return nil, c.fail("decode", err)
	}
	return resp, nil
}

func (c *replicaConn) fail(op string, err error) error {
	return fmt.Errorf("%w: %s %s: %w", partition.ErrLeaderUnreachable, op, c.addr, err)
}

// skipTags skips a flexible header's tagged fields.
func skipTags(b []byte) ([]byte, bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, false
	}
	b = b[k:]
	for range n {
		_, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, false
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < size {
			return nil, false
		}
		b = b[k+int(size):]
	}
	return b, true
}

// Fetch sends one follower fetch.
func (c *replicaConn) Fetch(ctx context.Context, in partition.FetchRequest) ([]partition.FetchedPartition, error) {
	req := kmsg.NewPtrFetchRequest()
	req.Version = replicaFetchVersion
	req.ReplicaID = in.ReplicaID
	req.MaxWaitMillis = int32(in.MaxWait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = replicaFetchBytesMax
	byTopic := map[string]int{}
	for _, p := range in.Partitions {
		i, ok := byTopic[p.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[p.Topic] = i
			t := kmsg.NewFetchRequestTopic()
			t.Topic = p.Topic
			req.Topics = append(req.Topics, t)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p.Partition
		rp.FetchOffset = p.FetchOffset
		rp.CurrentLeaderEpoch = p.CurrentLeaderEpoch
		rp.LastFetchedEpoch = p.LastFetchedEpoch
		rp.PartitionMaxBytes = replicaPartitionBytesMax
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	kresp, err := c.roundTrip(ctx, req, in.MaxWait+replicaRequestTimeoutPlus)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 {
		return nil, c.fail("fetch", replicaError(resp.ErrorCode))
	}
	var out []partition.FetchedPartition
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			fp := partition.FetchedPartition{
				Topic: t.Topic, Partition: p.Partition, Err: replicaError(p.ErrorCode),
				HighWatermark: p.HighWatermark, LogStartOffset: p.LogStartOffset, Records: p.RecordBatches,
			}
			if p.DivergingEpoch.EndOffset >= 0 {
				fp.Diverging = &partition.EpochEnd{Epoch: p.DivergingEpoch.Epoch, EndOffset: p.DivergingEpoch.EndOffset}
			}
			out = append(out, fp)
		}
	}
	return out, nil
}

// OffsetForLeaderEpoch asks the leader where an epoch ends.
func (c *replicaConn) OffsetForLeaderEpoch(ctx context.Context, in partition.EpochRequest) (partition.EpochEnd, error) {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version = replicaEpochVersion
	req.ReplicaID = in.ReplicaID
	t := kmsg.NewOffsetForLeaderEpochRequestTopic()
	t.Topic = in.Topic
	p := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	p.Partition = in.Partition
	p.CurrentLeaderEpoch = in.CurrentLeaderEpoch
	p.LeaderEpoch = in.LeaderEpoch
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	kresp, err := c.roundTrip(ctx, req, replicaRequestTimeoutPlus)
	if err != nil {
		return partition.EpochEnd{}, err
	}
	resp := kresp.(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rt.Topic != in.Topic || rp.Partition != in.Partition {
				continue
			}
			if err := replicaError(rp.ErrorCode); err != nil {
				return partition.EpochEnd{}, err
			}
			return partition.EpochEnd{Epoch: rp.LeaderEpoch, EndOffset: rp.EndOffset}, nil
		}
	}
	return partition.EpochEnd{}, c.fail("offset for leader epoch", errors.New("partition missing from the response"))
}

// replicaError maps a leader's error code for a follower to the errors the partition package acts on.
func replicaError(code int16) error {
	switch code {
	case 0:
		return nil
	case kerr.NotLeaderForPartition.Code, kerr.ReplicaNotAvailable.Code, kerr.UnknownTopicOrPartition.Code:
		return fmt.Errorf("%w: %s", partition.ErrNotLeader, kerr.ErrorForCode(code))
	case kerr.FencedLeaderEpoch.Code:
		return fmt.Errorf("%w: from the leader", partition.ErrFencedLeaderEpoch)
	case kerr.UnknownLeaderEpoch.Code:
		return fmt.Errorf("%w: from the leader", partition.ErrUnknownLeaderEpoch)
	case kerr.OffsetOutOfRange.Code:
		return fmt.Errorf("%w: from the leader", storage.ErrOffsetOutOfRange)
	}
	return fmt.Errorf("%w: %s", partition.ErrLeaderUnreachable, kerr.ErrorForCode(code))
}
