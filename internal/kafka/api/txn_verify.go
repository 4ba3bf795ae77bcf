package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/txn"
)

// Errors of a partition leader's questions to a transaction coordinator (KIP-890), as a Produce
// answers them.
var (
	// errNotInTransaction: the coordinator says the partition is not in the producer's transaction;
	// INVALID_TXN_STATE, or TRANSACTION_ABORTABLE for the Produce versions that know it (v11+).
	errNotInTransaction = errors.New("api: the partition is not in the producer's transaction")
	// errTransactionalIDRequired: a transactional batch in a Produce without a transactional id, which
	// Kafka answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
	errTransactionalIDRequired = errors.New("api: a transactional batch needs the request's transactional id")
	// errCoordinatorBusy: the coordinator cannot answer for now (moving, loading, writing the
	// transaction's record, unreachable); the produce is answered NOT_ENOUGH_REPLICAS, which
	// producers retry, as Kafka answers it.
	errCoordinatorBusy = errors.New("api: the transaction coordinator cannot answer yet")
)

// verifyRequestTimeout bounds one leader-to-coordinator request.
const verifyRequestTimeout = 10 * time.Second

// Bounds of an implicit add's retries while the coordinator answers CONCURRENT_TRANSACTIONS (the
// previous transaction's markers are being written): the back-off doubles from addBackoffMin to
// addBackoffMax, for at most addWaitMax or the request's timeout.
const (
	addBackoffMin = 5 * time.Millisecond
	addBackoffMax = 100 * time.Millisecond
	addWaitMax    = 10 * time.Second
)

// txnOf asks the coordinator of transactional id about producer p's transaction on behalf of this
// node's partitions: locally when this node coordinates id, else with AddPartitionsToTxn v4+ to the
// leader of id's __transaction_state partition.
type txnOf struct {
	b  *Broker
	id string
	p  txn.ProducerIDEpoch
}

// verify asks whether tp is in the transaction (KIP-890 part 1): nil when it is, else an error that
// produceError turns into the produce's code.
func (q txnOf) verify(ctx context.Context, tp txn.TopicPartition) error {
	return coordinatorAnswer(q.ask(ctx, tp, true))
}

// add adds tp to the transaction (KIP-890 part 2's implicit add, as AddPartitionsToTxn v5 from a
// leader), retrying with a short back-off while the coordinator answers CONCURRENT_TRANSACTIONS, for
// at most wait: nil once tp is in the transaction, else an error that produceError turns into the
// produce's code.
func (q txnOf) add(ctx context.Context, tp txn.TopicPartition, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, min(wait, addWaitMax))
	defer cancel()
	backoff := addBackoffMin
	for {
		err := q.ask(ctx, tp, false)
		if !errors.Is(err, txn.ErrConcurrentTransactions) {
			return coordinatorAnswer(err)
		}
		select {
		case <-q.b.clock.After(backoff):
		case <-ctx.Done():
			return coordinatorAnswer(err)
		}
		backoff = min(2*backoff, addBackoffMax)
	}
}

// ask is verify (verifyOnly) or one try of add, with the coordinator's own error.
func (q txnOf) ask(ctx context.Context, tp txn.TopicPartition, verifyOnly bool) error {
	img := q.b.meta.Image()
	node, err := q.coordinator(img)
	if err != nil {
		return err
	}
	var errs []error
	switch {
	case node == q.b.nodeID && q.b.txn != nil && verifyOnly:
		errs, err = q.b.txn.VerifyPartitions(ctx, q.id, q.p, []txn.TopicPartition{tp})
	case node == q.b.nodeID && q.b.txn != nil:
		err = q.b.txn.AddPartitionsImplicit(ctx, q.id, q.p, []txn.TopicPartition{tp})
	default:
		errs, err = q.remote(ctx, img, node, tp, verifyOnly)
	}
	if err == nil && len(errs) == 1 {
		err = errs[0]
	}
	return err
}

// coordinator is the node that leads id's __transaction_state partition in img.
func (q txnOf) coordinator(img *controller.Image) (int32, error) {
	t, ok := img.Topic(txn.StateTopic)
	if !ok {
		return 0, fmt.Errorf("%w: no %s topic", errCoordinatorBusy, txn.StateTopic)
	}
	st, ok := t.Partition(group.PartitionFor(q.id, t.Partitions))
	if !ok || st.Leader == controller.NoLeader {
		return 0, fmt.Errorf("%w: the coordinator's partition has no leader", errCoordinatorBusy)
	}
	return st.Leader, nil
}

// remote sends AddPartitionsToTxn v4 (v5 for an add) for tp to node.
func (q txnOf) remote(ctx context.Context, img *controller.Image, node int32, tp txn.TopicPartition, verifyOnly bool) ([]error, error) {
	addr, err := brokerAddr(img, node)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 5
	rt := kmsg.NewAddPartitionsToTxnRequestTransaction()
	rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, rt.VerifyOnly = q.id, q.p.ProducerID, q.p.ProducerEpoch, verifyOnly
	tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	tt.Topic, tt.Partitions = tp.Topic, []int32{tp.Partition}
	rt.Topics = append(rt.Topics, tt)
	req.Transactions = append(req.Transactions, rt)
	kresp, err := q.b.coordConns.roundTrip(ctx, addr, req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errCoordinatorBusy, err)
	}
	resp := kresp.(*kmsg.AddPartitionsToTxnResponse)
	if resp.ErrorCode != 0 {
		return nil, codeError(resp.ErrorCode)
	}
	for _, t := range resp.Transactions {
		for _, rt := range t.Topics {
			for _, p := range rt.Partitions {
				if rt.Topic == tp.Topic && p.Partition == tp.Partition {
					return []error{codeError(p.ErrorCode)}, nil
				}
			}
		}
	}
	return nil, fmt.Errorf("%w: no answer for %s-%d", errCoordinatorBusy, tp.Topic, tp.Partition)
}

// codeError is the coordinator error a remote coordinator's code stands for.
func codeError(code int16) error {
	switch code {
	case 0:
		return nil
	case kerr.InvalidTxnState.Code, kerr.TransactionAbortable.Code:
		return txn.ErrInvalidTxnState
	case kerr.InvalidProducerIDMapping.Code:
		return txn.ErrInvalidProducerIDMapping
	case kerr.ProducerFenced.Code, kerr.InvalidProducerEpoch.Code:
		return txn.ErrProducerFenced
	case kerr.UnknownTopicOrPartition.Code:
		return errUnknownTopicOrPartition
	case kerr.ConcurrentTransactions.Code:
		return txn.ErrConcurrentTransactions
	}
	return fmt.Errorf("%w: %s", errCoordinatorBusy, ErrorName(code))
}

// coordinatorAnswer is the error a produce gets for the coordinator's answer err.
func coordinatorAnswer(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, txn.ErrInvalidTxnState):
		return fmt.Errorf("%w: %v", errNotInTransaction, err)
	case errors.Is(err, txn.ErrProducerFenced):
		return fmt.Errorf("%w: the coordinator: %v", partition.ErrInvalidProducerEpoch, err)
	case errors.Is(err, txn.ErrInvalidProducerIDMapping), errors.Is(err, errUnknownTopicOrPartition), errors.Is(err, errCoordinatorBusy):
		return err
	}
	return fmt.Errorf("%w: %v", errCoordinatorBusy, err)
}

// addPartitionsToTxnBrokers answers AddPartitionsToTxn v4+, the batched form partition leaders send
// (KIP-890): a transaction with VerifyOnly asks whether its partitions are in it, and nothing is
// written; one without adds them as a TV2 client's implicit add (AddPartitionsImplicit: only leaders
// send these versions, ApiVersions tells clients 3). Errors for a whole transaction go to each of its
// partitions.
func (b *Broker) addPartitionsToTxnBrokers(ctx context.Context, req *kmsg.AddPartitionsToTxnRequest, resp *kmsg.AddPartitionsToTxnResponse) {
	img := b.meta.Image()
	for _, rt := range req.Transactions {
		res := kmsg.NewAddPartitionsToTxnResponseTransaction()
		res.TransactionalID = rt.TransactionalID
		var parts []txn.TopicPartition
		var slots []*int16
		unknown := false
		for _, t := range rt.Topics {
			st := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			st.Topic = t.Topic
			st.Partitions = make([]kmsg.AddPartitionsToTxnResponseTransactionTopicPartition, len(t.Partitions))
			for j, p := range t.Partitions {
				sp := &st.Partitions[j]
				*sp = kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				sp.Partition = p
				if !hasPartition(img, t.Topic, p) {
					sp.ErrorCode = errorCode(errUnknownTopicOrPartition)
					unknown = true
					continue
				}
				parts = append(parts, txn.TopicPartition{Topic: t.Topic, Partition: p})
			}
			res.Topics = append(res.Topics, st)
		}
		for i := range res.Topics {
			for j := range res.Topics[i].Partitions {
				if res.Topics[i].Partitions[j].ErrorCode == 0 {
					slots = append(slots, &res.Topics[i].Partitions[j].ErrorCode)
				}
			}
		}
		p := txn.ProducerIDEpoch{ProducerID: rt.ProducerID, ProducerEpoch: rt.ProducerEpoch}
		switch {
		case len(parts) == 0:
		case rt.VerifyOnly:
			errs, err := b.txn.VerifyPartitions(ctx, rt.TransactionalID, p, parts)
			for i, c := range slots {
				if err == nil {
					*c = b.errorCode(errs[i])
				} else {
					*c = b.errorCode(err)
				}
			}
		case unknown:
			for _, c := range slots {
				*c = kerr.OperationNotAttempted.Code
			}
		default:
			code := b.errorCode(b.txn.AddPartitionsImplicit(ctx, rt.TransactionalID, p, parts))
			for _, c := range slots {
				*c = code
			}
		}
		resp.Transactions = append(resp.Transactions, res)
	}
}
