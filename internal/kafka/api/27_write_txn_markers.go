package api

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/txn"
)

// markerRequestVersion is the WriteTxnMarkers version a MarkerWriter sends: v1, the flexible one,
// which Kafka 4.x still serves; v2 (KIP-1228) for the markers of TV2 transactions, which it carries.
const (
	markerRequestVersion   = 1
	markerRequestVersionV2 = 2
	markerRequestTimeout   = 30 * time.Second
)

// GroupMarkers takes the transaction markers of __consumer_offsets partitions: the group coordinator
// applies or drops the producer's staged offsets and appends the marker. It returns once the marker is
// committed (acks=all), or an error.
type GroupMarkers interface {
	WriteMarker(ctx context.Context, partition int32, m partition.Marker) error
}

// errMarkerRefused: the partition's leader answered a marker with an error code.
var errMarkerRefused = errors.New("api: marker refused by the partition's leader")

// localMarkers writes markers to the partitions this node leads.
type localMarkers struct {
	meta     *controller.Store
	replicas *partition.Manager
	groups   GroupMarkers
}

// write starts writing m to tp, led here, and returns the wait for its acks=all commit.
func (l localMarkers) write(tp txn.TopicPartition, m partition.Marker) func(context.Context) error {
	if tp.Topic == group.OffsetsTopic {
		if l.groups == nil {
			return failed(fmt.Errorf("%w: no group coordinator takes offsets markers", group.ErrCoordinatorNotAvailable))
		}
		return func(ctx context.Context) error { return l.groups.WriteMarker(ctx, tp.Partition, m) }
	}
	r, ok := l.replicas.Replica(tp.Topic, tp.Partition)
	if !ok {
		return failed(partition.ErrNotLeader)
	}
	_, wait, err := r.WriteMarker(m)
	if err != nil {
		return failed(err)
	}
	return wait
}

func failed(err error) func(context.Context) error {
	return func(context.Context) error { return err }
}

// MarkerWriter is weir's txn.MarkerWriter: it groups a transaction's partitions by their leader in the
// current image, writes those led here directly, and sends one WriteTxnMarkers v1 per other leader over
// the Kafka protocol, keeping one idle connection per broker for the next transaction.
type MarkerWriter struct {
	nodeID int32
	local  localMarkers
	conns  *brokerConns
}

var _ txn.MarkerWriter = (*MarkerWriter)(nil)

// MarkerWriterOptions are what a MarkerWriter is built from; Metadata and Replicas are required.
type MarkerWriterOptions struct {
	NodeID   int32
	Metadata *controller.Store
	Replicas *partition.Manager
	// Groups takes the markers of __consumer_offsets partitions; nil: they fail with
	// COORDINATOR_NOT_AVAILABLE and are retried.
	Groups GroupMarkers
	// InterBroker authenticates the writer to the other brokers' inter-broker listeners.
	InterBroker wire.Credentials
}

// NewMarkerWriter returns the marker writer of a node.
func NewMarkerWriter(opts MarkerWriterOptions) (*MarkerWriter, error) {
	switch {
	case opts.Metadata == nil:
		return nil, fmt.Errorf("%w: Metadata", ErrMissingOption)
	case opts.Replicas == nil:
		return nil, fmt.Errorf("%w: Replicas", ErrMissingOption)
	}
	return &MarkerWriter{
		nodeID: opts.NodeID,
		local:  localMarkers{meta: opts.Metadata, replicas: opts.Replicas, groups: opts.Groups},
		conns:  newBrokerConns("weir-txn-markers", markerRequestTimeout, opts.InterBroker),
	}, nil
}

// Close closes the idle connections.
func (w *MarkerWriter) Close() { w.conns.close() }

// WriteMarkers writes m to every partition of parts at its current leader and returns one error per
// partition (nil: committed there, or its topic no longer exists).
func (w *MarkerWriter) WriteMarkers(ctx context.Context, m partition.Marker, parts []txn.TopicPartition) []error {
	errs := make([]error, len(parts))
	img := w.local.meta.Image()
	waits := make([]func(context.Context) error, len(parts))
	remote := map[int32][]int{}
	for i, tp := range parts {
		t, ok := img.Topic(tp.Topic)
		if !ok || tp.Partition < 0 || tp.Partition >= t.Partitions {
			continue
		}
		st, ok := t.Partition(tp.Partition)
		switch {
		case !ok || st.Leader == controller.NoLeader:
			errs[i] = fmt.Errorf("%w: %s-%d has no leader", partition.ErrNotLeader, tp.Topic, tp.Partition)
		case st.Leader == w.nodeID:
			waits[i] = w.local.write(tp, m)
		default:
			remote[st.Leader] = append(remote[st.Leader], i)
		}
	}
	var wg sync.WaitGroup
	for node, idx := range remote {
		wg.Go(func() {
			rerrs := w.sendRemote(ctx, img, node, m, parts, idx)
			for j, i := range idx {
				errs[i] = rerrs[j]
			}
		})
	}
	for i, wait := range waits {
		if wait != nil {
			errs[i] = wait(ctx)
		}
	}
	wg.Wait()
	return errs
}

// sendRemote sends the marker for the partitions idx of parts to node, one error per partition.
func (w *MarkerWriter) sendRemote(ctx context.Context, img *controller.Image, node int32, m partition.Marker, parts []txn.TopicPartition, idx []int) []error {
	errs := make([]error, len(idx))
	fail := func(err error) []error {
		for j := range errs {
			errs[j] = err
		}
		return errs
	}
	addr, err := brokerAddr(img, node)
	if err != nil {
		return fail(err)
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = markerRequestVersion
	rm := kmsg.NewWriteTxnMarkersRequestMarker()
	rm.ProducerID, rm.ProducerEpoch, rm.Committed, rm.CoordinatorEpoch = m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch
	if m.TransactionVersion >= 2 {
		req.Version, rm.TransactionVersion = markerRequestVersionV2, m.TransactionVersion
	}
	byTopic := map[string]int{}
	for _, i := range idx {
		tp := parts[i]
		k, ok := byTopic[tp.Topic]
		if !ok {
			k = len(rm.Topics)
			byTopic[tp.Topic] = k
			t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			t.Topic = tp.Topic
			rm.Topics = append(rm.Topics, t)
		}
		rm.Topics[k].Partitions = append(rm.Topics[k].Partitions, tp.Partition)
	}
	req.Markers = append(req.Markers, rm)
	kresp, err := w.conns.roundTrip(ctx, addr, req)
	if err != nil {
		return fail(err)
	}
	resp := kresp.(*kmsg.WriteTxnMarkersResponse)
	codes := map[txn.TopicPartition]int16{}
	for _, rm := range resp.Markers {
		for _, t := range rm.Topics {
			for _, p := range t.Partitions {
				codes[txn.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.ErrorCode
			}
		}
	}
	for j, i := range idx {
		code, ok := codes[parts[i]]
		switch {
		case !ok:
			errs[j] = fmt.Errorf("%w: no answer for %s-%d", errMarkerRefused, parts[i].Topic, parts[i].Partition)
		case code != 0:
			errs[j] = fmt.Errorf("%w: %s", errMarkerRefused, ErrorName(code))
		}
	}
	return errs
}

// writeTxnMarkers answers WriteTxnMarkers (key 27), the coordinator's request to a partition's leader:
// each marker is appended to each partition this node leads (through the group coordinator for
// __consumer_offsets) and answered once committed. It is an inter-broker API that Kafka authorizes
// with CLUSTER_ACTION; weir has no authentication yet, so any connection may send it.
func (b *Broker) writeTxnMarkers(req *kmsg.WriteTxnMarkersRequest) wire.Reply {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	img := b.meta.Image()
	type slot struct {
		code *int16
		wait func(context.Context) error
	}
	var slots []slot
	for _, rm := range req.Markers {
		sm := kmsg.NewWriteTxnMarkersResponseMarker()
		sm.ProducerID = rm.ProducerID
		m := partition.Marker{ProducerID: rm.ProducerID, ProducerEpoch: rm.ProducerEpoch, CoordinatorEpoch: rm.CoordinatorEpoch, Commit: rm.Committed}
		if req.Version >= 2 {
			m.TransactionVersion = rm.TransactionVersion
		}
		sm.Topics = make([]kmsg.WriteTxnMarkersResponseMarkerTopic, len(rm.Topics))
		for i, rt := range rm.Topics {
			st := &sm.Topics[i]
			*st = kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			st.Topic = rt.Topic
			st.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(rt.Partitions))
			for j, p := range rt.Partitions {
				sp := &st.Partitions[j]
				*sp = kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				sp.Partition = p
				if rm.ProducerID < 0 || rm.ProducerEpoch < 0 {
					sp.ErrorCode = errorCode(fmt.Errorf("%w: producer id %d, epoch %d", errInvalidRequest, rm.ProducerID, rm.ProducerEpoch))
					continue
				}
				if !hasPartition(img, rt.Topic, p) {
					sp.ErrorCode = errorCode(errUnknownTopicOrPartition)
					continue
				}
				slots = append(slots, slot{code: &sp.ErrorCode, wait: b.markers.write(txn.TopicPartition{Topic: rt.Topic, Partition: p}, m)})
			}
		}
		resp.Markers = append(resp.Markers, sm)
	}
	return func(ctx context.Context) kmsg.Response {
		for _, s := range slots {
			*s.code = b.errorCode(s.wait(ctx))
		}
		return resp
	}
}
