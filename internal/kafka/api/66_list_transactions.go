package api

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/txn"
)

// txnStates are the state names ListTransactions filters by.
var txnStates = []txn.State{
	txn.Empty, txn.Ongoing, txn.PrepareCommit, txn.PrepareAbort, txn.CompleteCommit, txn.CompleteAbort, txn.Dead, txn.PrepareEpochFence,
}

// listTransactions answers ListTransactions (key 66) with the ids this node coordinates, filtered by
// state names (unknown names are listed back and match nothing), producer ids and (v1) a transaction
// running longer than a duration, as Kafka filters them.
func (b *Broker) listTransactions(req *kmsg.ListTransactionsRequest) wire.Reply {
	return func(ctx context.Context) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
		states := map[string]bool{}
		for _, name := range req.StateFilters {
			if !slices.ContainsFunc(txnStates, func(s txn.State) bool { return s.String() == name }) {
				resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
			}
			states[name] = true
		}
		all, err := b.txn.List(ctx)
		if err != nil {
			resp.ErrorCode = b.errorCode(err)
			return resp
		}
		now := b.clock.Now()
		for _, d := range all {
			switch {
			case len(states) > 0 && !states[d.State.String()]:
				continue
			case len(req.ProducerIDFilters) > 0 && !slices.Contains(req.ProducerIDFilters, d.ProducerID):
				continue
			case req.Version >= 1 && req.DurationFilterMillis >= 0 && !d.Start.IsZero() && now.Sub(d.Start).Milliseconds() <= req.DurationFilterMillis:
				continue
			}
			st := kmsg.NewListTransactionsResponseTransactionState()
			st.TransactionalID, st.ProducerID, st.TransactionState = d.ID, d.ProducerID, d.State.String()
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
		return resp
	}
}
