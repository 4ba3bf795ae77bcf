package api_test

import (
	"errors"
	"testing"

	"github.com/weir-mq/weir/internal/kafka/api"
	"github.com/weir-mq/weir/internal/partition"
)

// TestReplicaTransportAgainstLeader drives ReplicaTransport against a real node: a fetch from a
// broker that is no follower is refused with NOT_LEADER_OR_FOLLOWER, OffsetForLeaderEpoch answers,
// stale and future epochs are told apart, and a dead address is ErrLeaderUnreachable.
func TestReplicaTransportAgainstLeader(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	createTopic(t, adm, "rt", 1, nil)
	rc := dialRaw(t, n)
	resp := produceRaw(t, rc, 9, "rt", 0, testBatch(batchSpec{values: []string{"a", "b", "c"}}))
	if resp.ErrorCode != 0 {
		t.Fatalf("produce: %d", resp.ErrorCode)
	}
	ctx := testCtx(t)
	conn, err := api.ReplicaTransport{}.Dial(ctx, n.KafkaAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got, err := conn.Fetch(ctx, partition.FetchRequest{ReplicaID: 7, Partitions: []partition.FetchPartition{
		{Topic: "rt", Partition: 0, FetchOffset: 0, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1},
	}})
	if err != nil || len(got) != 1 || !errors.Is(got[0].Err, partition.ErrNotLeader) {
		t.Fatalf("fetch from a non-follower: %+v %v", got, err)
	}
	end, err := conn.OffsetForLeaderEpoch(ctx, partition.EpochRequest{ReplicaID: -1, Topic: "rt", Partition: 0, CurrentLeaderEpoch: -1, LeaderEpoch: 0})
	if err != nil || end.EndOffset != 3 {
		t.Fatalf("offset for leader epoch 0: %+v %v", end, err)
	}
	if _, err := conn.OffsetForLeaderEpoch(ctx, partition.EpochRequest{ReplicaID: -1, Topic: "rt", CurrentLeaderEpoch: 99}); !errors.Is(err, partition.ErrUnknownLeaderEpoch) {
		t.Fatalf("future epoch: %v", err)
	}
	got, err = conn.Fetch(ctx, partition.FetchRequest{ReplicaID: 7, Partitions: []partition.FetchPartition{
		{Topic: "rt", Partition: 0, FetchOffset: 0, CurrentLeaderEpoch: 99, LastFetchedEpoch: -1},
	}})
	if err != nil || !errors.Is(got[0].Err, partition.ErrUnknownLeaderEpoch) {
		t.Fatalf("fetch with a future epoch: %+v %v", got, err)
	}
	if _, err := conn.OffsetForLeaderEpoch(ctx, partition.EpochRequest{ReplicaID: -1, Topic: "rt", LeaderEpoch: 0, CurrentLeaderEpoch: -1}); err != nil {
		t.Fatalf("connection unusable after partition errors: %v", err)
	}
	if _, err := (api.ReplicaTransport{}).Dial(ctx, "127.0.0.1:1"); !errors.Is(err, partition.ErrLeaderUnreachable) {
		t.Fatalf("dial a closed port: %v", err)
	}
}
