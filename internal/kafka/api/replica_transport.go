package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/partition"
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

// ReplicaTransport is partition.Transport over the Kafka protocol: a wire.Client per leader broker
// carrying Fetch v12 and OffsetForLeaderEpoch v4 with the follower's replica id, the requests this
// package serves for followers. It maps the answers' Kafka error codes back to partition's and
// storage's errors (followerError, beside the table that maps them the other way), so no other
// package needs to know them.
type ReplicaTransport struct {
	// ClientID is sent in every request header; empty means "weir-replica".
	ClientID string
	// Credentials authenticate the follower to the leaders' inter-broker listener.
	Credentials wire.Credentials
}

var _ partition.Transport = ReplicaTransport{}

// Dial connects to the broker at addr.
func (t ReplicaTransport) Dial(ctx context.Context, addr string) (partition.LeaderConn, error) {
	id := t.ClientID
	if id == "" {
		id = "weir-replica"
	}
	c, err := wire.Dialer{ClientID: id, MaxResponseBytes: replicaResponseBytesMax, Credentials: t.Credentials}.Dial(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", partition.ErrLeaderUnreachable, err)
	}
	return &replicaConn{c: c, addr: addr}, nil
}

// replicaConn is one connection to a leader broker; one request at a time.
type replicaConn struct {
	c    *wire.Client
	addr string
}

func (c *replicaConn) Close() error { return c.c.Close() }

// roundTrip sends req and reads its response, giving up when ctx ends or after timeout.
func (c *replicaConn) roundTrip(ctx context.Context, req kmsg.Request, timeout time.Duration) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := c.c.RoundTrip(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", partition.ErrLeaderUnreachable, err)
	}
	return resp, nil
}

// fail is a leader's answer that leaves the follower nothing to act on but another connection.
func (c *replicaConn) fail(op string, err error) error {
	return fmt.Errorf("%w: %s %s: %w", partition.ErrLeaderUnreachable, op, c.addr, err)
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
		if p.MaxBytes > 0 {
			rp.PartitionMaxBytes = min(p.MaxBytes, replicaPartitionBytesMax)
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	kresp, err := c.roundTrip(ctx, req, in.MaxWait+replicaRequestTimeoutPlus)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 {
		return nil, c.fail("fetch", followerError(resp.ErrorCode))
	}
	var out []partition.FetchedPartition
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			fp := partition.FetchedPartition{
				Topic: t.Topic, Partition: p.Partition, Err: followerError(p.ErrorCode),
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
			if err := followerError(rp.ErrorCode); err != nil {
				return partition.EpochEnd{}, err
			}
			return partition.EpochEnd{Epoch: rp.LeaderEpoch, EndOffset: rp.EndOffset}, nil
		}
	}
	return partition.EpochEnd{}, c.fail("offset for leader epoch", errors.New("partition missing from the response"))
}
