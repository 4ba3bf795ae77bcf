package api

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/compress"
	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/storage"
	"github.com/weir-mq/weir/internal/txn"
)

func TestAPIErrorCode(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("partition: t-0: %w", fmt.Errorf("storage: %w", err)) }
	cases := []struct {
		err  error
		want *kerr.Error
	}{
		{controller.ErrTopicExists, kerr.TopicAlreadyExists},
		{controller.ErrUnknownTopic, kerr.UnknownTopicOrPartition},
		{controller.ErrInvalidTopicName, kerr.InvalidTopicException},
		{controller.ErrInvalidPartitions, kerr.InvalidPartitions},
		{controller.ErrInvalidReplication, kerr.InvalidReplicationFactor},
		{fmt.Errorf("%w: retention.ms: not an integer", controller.ErrInvalidConfig), kerr.InvalidConfig},
		{controller.ErrInternalTopic, kerr.InvalidTopicException},
		{controller.ErrClosed, kerr.NotController},
		{controller.ErrNotController, kerr.NotController},
		{fmt.Errorf("forwarded: %w", controller.ErrNotController), kerr.NotController},
		{controller.ErrRPC, kerr.NotController},
		{controller.ErrTimeout, kerr.RequestTimedOut},
		{wrap(partition.ErrOutOfOrderSequence), kerr.OutOfOrderSequenceNumber},
		{wrap(partition.ErrInvalidProducerEpoch), kerr.InvalidProducerEpoch},
		{partition.ErrClosed, kerr.NotLeaderForPartition},
		{wrap(record.ErrCorrupt), kerr.CorruptMessage},
		{fmt.Errorf("%w: gzip: %w", compress.ErrCorrupt, errors.New("bad header")), kerr.CorruptMessage},
		{fmt.Errorf("%w: limit 10", compress.ErrTooLarge), kerr.MessageTooLarge},
		{fmt.Errorf("%w: record timestamp 5 outside [6, 7]", errTimestampOutOfRange), kerr.InvalidTimestamp},
		{wrap(record.ErrInvalidRecord), kerr.InvalidRecord},
		{wrap(record.ErrUnsupportedMagic), kerr.UnsupportedVersion},
		{wrap(storage.ErrBatchTooLarge), kerr.MessageTooLarge},
		{wrap(storage.ErrOffsetOutOfRange), kerr.OffsetOutOfRange},
		{wrap(storage.ErrLogOffline), kerr.KafkaStorageError},
		{wrap(fmt.Errorf("%w: segment 0", storage.ErrCorruption)), kerr.KafkaStorageError},
		{storage.ErrClosed, kerr.NotLeaderForPartition},
		{errUnknownTopicOrPartition, kerr.UnknownTopicOrPartition},
		{errUnknownTopicID, kerr.UnknownTopicID},
		{errReplicaNotAvailable, kerr.ReplicaNotAvailable},
		{errTransactionsUnsupported, kerr.InvalidTxnState},
		{errInvalidRequiredAcks, kerr.InvalidRequiredAcks},
		{errMultipleBatches, kerr.InvalidRecord},
		{errDuplicateResource, kerr.InvalidRequest},
		{errInvalidRequest, kerr.InvalidRequest},
		{errInvalidTimestamp, kerr.InvalidTimestamp},
		{errUnsupportedCompression, kerr.UnsupportedCompressionType},
		{errInvalidConfigOp, kerr.InvalidConfig},
		{errInvalidReplicaAssignment, kerr.InvalidReplicaAssignment},
		{errUnknownBroker, kerr.InvalidRequest},
		{errFencedLeaderEpoch, kerr.FencedLeaderEpoch},
		{errUnknownLeaderEpoch, kerr.UnknownLeaderEpoch},
		{errFetchSessionNotFound, kerr.FetchSessionIDNotFound},
		{errTopicNotReady, kerr.LeaderNotAvailable},
		{fmt.Errorf("wait: %w", context.Canceled), kerr.RequestTimedOut},
		{context.DeadlineExceeded, kerr.RequestTimedOut},
		{errors.New("something unexpected"), kerr.UnknownServerError},
	}
	for _, c := range cases {
		if got := errorCode(c.err); got != c.want.Code {
			t.Errorf("errorCode(%v) = %v, want %v", c.err, kerr.ErrorForCode(got), c.want)
		}
	}
	if got := errorCode(nil); got != 0 {
		t.Errorf("errorCode(nil) = %d", got)
	}
	// Every entry of the table is reachable: none is shadowed by an earlier, broader one.
	for i, c := range codes {
		if got := errorCode(c.err); got != c.code.Code {
			t.Errorf("codes[%d] (%v) maps to %v, shadowed", i, c.err, kerr.ErrorForCode(got))
		}
	}
}

// TestAPIFollowerError checks the way back, a leader's code to the error a follower acts on, and that
// both directions agree: an error followerError returns maps, through codes, to a code that
// followerError reads as the same error.
func TestAPIFollowerError(t *testing.T) {
	cases := []struct {
		code *kerr.Error
		want error
	}{
		{kerr.NotLeaderForPartition, partition.ErrNotLeader},
		{kerr.ReplicaNotAvailable, partition.ErrNotLeader},
		{kerr.UnknownTopicOrPartition, partition.ErrNotLeader},
		{kerr.FencedLeaderEpoch, partition.ErrFencedLeaderEpoch},
		{kerr.UnknownLeaderEpoch, partition.ErrUnknownLeaderEpoch},
		{kerr.OffsetOutOfRange, storage.ErrOffsetOutOfRange},
		{kerr.KafkaStorageError, partition.ErrLeaderUnreachable},
		{kerr.UnknownServerError, partition.ErrLeaderUnreachable},
	}
	for _, c := range cases {
		if got := followerError(c.code.Code); !errors.Is(got, c.want) {
			t.Errorf("followerError(%s) = %v, want %v", c.code.Message, got, c.want)
		}
	}
	if got := followerError(0); got != nil {
		t.Errorf("followerError(0) = %v", got)
	}
	if got := followerError(-2); !errors.Is(got, partition.ErrLeaderUnreachable) {
		t.Errorf("followerError(-2) = %v", got)
	}
	seen := map[int16]bool{}
	for _, c := range followerCodes {
		if seen[c.code.Code] {
			t.Errorf("followerCodes names %s twice", c.code.Message)
		}
		seen[c.code.Code] = true
		err := followerError(c.code.Code)
		if back := followerError(errorCode(err)); !errors.Is(back, c.err) {
			t.Errorf("%s: followerError gives %v, whose code through codes comes back as %v", c.code.Message, err, back)
		}
	}
}

func TestAPIVersionTable(t *testing.T) {
	for key, r := range versions {
		req := kmsg.RequestForKey(key)
		if req == nil {
			t.Fatalf("key %d unknown to kmsg", key)
		}
		if r.min < 0 || r.min > r.max || r.max > req.MaxVersion() {
			t.Errorf("key %d: range %d-%d (kmsg max %d)", key, r.min, r.max, req.MaxVersion())
		}
		if !supported(key, r.min, txn.TV2) || !supported(key, r.max, txn.TV2) || supported(key, r.max+1, txn.TV2) || supported(key, r.min-1, txn.TV2) {
			t.Errorf("key %d: supported disagrees with %d-%d", key, r.min, r.max)
		}
	}
	keys := advertisedKeys(txn.TV1)
	if len(keys) != len(versions) {
		t.Fatalf("advertised %d keys, table has %d", len(keys), len(versions))
	}
	for i := 1; i < len(keys); i++ {
		if keys[i].ApiKey <= keys[i-1].ApiKey {
			t.Fatalf("advertised keys out of order: %d after %d", keys[i].ApiKey, keys[i-1].ApiKey)
		}
	}
	for key, max := range map[int16]int16{24: 5, 25: 3, 26: 4, 27: 2, 28: 4, 65: 0, 66: 1} {
		if !supported(key, 0, txn.TV1) || !supported(key, max, txn.TV1) || supported(key, max+1, txn.TV1) {
			t.Errorf("transaction key %d: want versions 0-%d served (TV1), no more", key, max)
		}
	}
	for key, max := range map[int16]int16{0: 12, 26: 5, 28: 5} {
		if supported(key, max, txn.TV1) || !supported(key, max, txn.TV2) || supported(key, max+1, txn.TV2) {
			t.Errorf("key %d: want v%d served under TV2 alone", key, max)
		}
	}
	for key, max := range map[int16]int16{8: 8, 9: 7, 10: 3, 11: 7, 12: 4, 13: 4, 14: 5, 15: 5, 16: 4, 28: 3, 42: 2, 47: 0} {
		if !supported(key, 0, txn.TV1) || !supported(key, max, txn.TV1) {
			t.Errorf("group key %d: want versions 0-%d served", key, max)
		}
	}
}
