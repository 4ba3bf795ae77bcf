package api

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/txn"
)

func TestAPITxnErrorCode(t *testing.T) {
	for _, c := range []struct {
		err  error
		want *kerr.Error
	}{
		{txn.ErrNotCoordinator, kerr.NotCoordinator},
		{fmt.Errorf("%w: %w", txn.ErrNotCoordinator, partition.ErrNotLeader), kerr.NotCoordinator},
		{fmt.Errorf("%w: %w", txn.ErrCoordinatorNotAvailable, partition.ErrNotEnoughReplicas), kerr.CoordinatorNotAvailable},
		{txn.ErrLoadInProgress, kerr.CoordinatorLoadInProgress},
		{txn.ErrConcurrentTransactions, kerr.ConcurrentTransactions},
		{txn.ErrProducerFenced, kerr.ProducerFenced},
		{txn.ErrInvalidProducerIDMapping, kerr.InvalidProducerIDMapping},
		{txn.ErrInvalidTxnState, kerr.InvalidTxnState},
		{txn.ErrInvalidTransactionTimeout, kerr.InvalidTransactionTimeout},
		{txn.ErrInvalidTransactionalID, kerr.InvalidRequest},
		{txn.ErrTransactionalIDNotFound, kerr.TransactionalIDNotFound},
	} {
		if got := errorCode(c.err); got != c.want.Code {
			t.Errorf("%v: %s, want %s", c.err, ErrorName(got), c.want.Message)
		}
	}
	for _, c := range []struct {
		code  int16
		knows bool
		want  int16
	}{
		{kerr.ProducerFenced.Code, true, kerr.ProducerFenced.Code},
		{kerr.ProducerFenced.Code, false, kerr.InvalidProducerEpoch.Code},
		{kerr.InvalidTxnState.Code, false, kerr.InvalidTxnState.Code},
		{0, false, 0},
	} {
		if got := fencedCode(c.code, c.knows); got != c.want {
			t.Errorf("fencedCode(%s, %v) = %s, want %s", ErrorName(c.code), c.knows, ErrorName(got), ErrorName(c.want))
		}
	}
}

// TestAPITxnOffsetsMarkerWithoutGroups: without a GroupMarkers, a marker for __consumer_offsets fails
// with COORDINATOR_NOT_AVAILABLE (and the coordinator retries it), never reaching the replica.
func TestAPITxnOffsetsMarkerWithoutGroups(t *testing.T) {
	wait := localMarkers{}.write(txn.TopicPartition{Topic: group.OffsetsTopic, Partition: 0}, partition.Marker{ProducerID: 1})
	err := wait(context.Background())
	if !errors.Is(err, group.ErrCoordinatorNotAvailable) || errorCode(err) != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("err %v", err)
	}
}
