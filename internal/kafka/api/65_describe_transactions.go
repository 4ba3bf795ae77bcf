package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/txn"
)

// describeTransactions answers DescribeTransactions (key 65): each id's state, producer, timeout,
// start and partitions, or its error (NOT_COORDINATOR for an id coordinated elsewhere,
// TRANSACTIONAL_ID_NOT_FOUND for one unknown).
func (b *Broker) describeTransactions(req *kmsg.DescribeTransactionsRequest) wire.Reply {
	return func(ctx context.Context) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
		for _, id := range req.TransactionalIDs {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID = id
			st.ProducerID, st.ProducerEpoch, st.StartTimestamp = -1, -1, -1
			d, err := b.txn.Describe(ctx, id)
			if err != nil {
				st.ErrorCode = b.errorCode(err)
				resp.TransactionStates = append(resp.TransactionStates, st)
				continue
			}
			st.State = d.State.String()
			st.TimeoutMillis = int32(d.Timeout.Milliseconds())
			if !d.Start.IsZero() {
				st.StartTimestamp = d.Start.UnixMilli()
			}
			st.ProducerID, st.ProducerEpoch = d.ProducerID, d.ProducerEpoch
			st.Topics = describedTopics(d.Partitions)
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
		return resp
	}
}

// describedTopics groups sorted partitions by topic.
func describedTopics(parts []txn.TopicPartition) []kmsg.DescribeTransactionsResponseTransactionStateTopic {
	var out []kmsg.DescribeTransactionsResponseTransactionStateTopic
	for _, tp := range parts {
		if n := len(out); n > 0 && out[n-1].Topic == tp.Topic {
			out[n-1].Partitions = append(out[n-1].Partitions, tp.Partition)
			continue
		}
		t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
		t.Topic, t.Partitions = tp.Topic, []int32{tp.Partition}
		out = append(out, t)
	}
	return out
}
