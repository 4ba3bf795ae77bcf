package controller

import (
	"errors"
	"reflect"
	"testing"
)

// moveImage is four brokers and topic "a" with one partition on [1 2 3], led by 1, ISR [1 2 3], and
// min.insync.replicas 2.
func moveImage(t *testing.T) *Image {
	t.Helper()
	img := clusterImage(t, 4)
	return mustApply(t, img, CreateTopic{Name: "a", ID: idA, Partitions: 1, Replicas: [][]int32{{1, 2, 3}},
		Configs: map[string]string{"min.insync.replicas": "2"}})
}

// alterISR is the leader's AlterPartition of isr at the partition's current epochs.
func alterISR(t *testing.T, img *Image, isr ...int32) AlterPartition {
	st := state(t, img, "a", 0)
	return AlterPartition{Topic: "a", Partition: 0, Leader: st.Leader, LeaderEpoch: st.LeaderEpoch,
		PartitionEpoch: st.PartitionEpoch, ISR: isr}
}

func wantState(t *testing.T, st *PartitionState, replicas, adding, removing, isr []int32, leader int32) {
	t.Helper()
	if !reflect.DeepEqual(st.Replicas, replicas) || !reflect.DeepEqual(st.AddingReplicas, adding) ||
		!reflect.DeepEqual(st.RemovingReplicas, removing) || !reflect.DeepEqual(st.ISR, isr) || st.Leader != leader {
		t.Fatalf("state %+v, want replicas %v adding %v removing %v ISR %v leader %d", st, replicas, adding, removing, isr, leader)
	}
}

func TestReassignMoveCompletesWhenTargetsInISR(t *testing.T) {
	img := moveImage(t)
	img = mustApply(t, img, ReassignPartition{Topic: "a", Partition: 0, Replicas: []int32{2, 3, 4}})
	st := state(t, img, "a", 0)
	wantState(t, st, []int32{2, 3, 4, 1}, []int32{4}, []int32{1}, []int32{1, 2, 3}, 1)
	if st.LeaderEpoch != 0 || st.PartitionEpoch != 1 {
		t.Fatalf("epochs %d/%d, want the leader epoch kept and the partition epoch bumped", st.LeaderEpoch, st.PartitionEpoch)
	}
	// the leader adds 4 to the ISR: every target is in, so the move completes and leader 1 gives way
	img = mustApply(t, img, alterISR(t, img, 1, 2, 3, 4))
	st = state(t, img, "a", 0)
	wantState(t, st, []int32{2, 3, 4}, nil, nil, []int32{2, 3, 4}, 2)
	if st.LeaderEpoch != 1 {
		t.Fatalf("leader epoch %d, want 1 after the removed leader gave way", st.LeaderEpoch)
	}
}

func TestReassignReorderCompletesAtOnce(t *testing.T) {
	img := mustApply(t, moveImage(t), ReassignPartition{Topic: "a", Partition: 0, Replicas: []int32{3, 2, 1}})
	wantState(t, state(t, img, "a", 0), []int32{3, 2, 1}, nil, nil, []int32{1, 2, 3}, 1)
}

func TestReassignCancel(t *testing.T) {
	img := moveImage(t)
	if _, err := Apply(img, ReassignPartition{Topic: "a", Partition: 0, Cancel: true}); !errors.Is(err, ErrNoReassignment) {
		t.Fatalf("cancel without a move: %v, want ErrNoReassignment", err)
	}
	img = mustApply(t, img, ReassignPartition{Topic: "a", Partition: 0, Replicas: []int32{4, 2, 3}})
	wantState(t, state(t, img, "a", 0), []int32{4, 2, 3, 1}, []int32{4}, []int32{1}, []int32{1, 2, 3}, 1)
	img = mustApply(t, img, ReassignPartition{Topic: "a", Partition: 0, Cancel: true})
	wantState(t, state(t, img, "a", 0), []int32{2, 3, 1}, nil, nil, []int32{1, 2, 3}, 1)
}

func TestReassignReplacesMoveAgainstOriginal(t *testing.T) {
	img := mustApply(t, moveImage(t), ReassignPartition{Topic: "a", Partition: 0, Replicas: []int32{4, 2, 3}})
	// a second target: 4 is no longer wanted, 1 stays, 3 goes
	img = mustApply(t, img, ReassignPartition{Topic: "a", Partition: 0, Replicas: []int32{1, 2}})
	wantState(t, state(t, img, "a", 0), []int32{1, 2}, nil, nil, []int32{1, 2}, 1)
}

func TestReassignBadInputChangesNothing(t *testing.T) {
	img := moveImage(t)
	img = mustApply(t, img, FenceBroker{NodeID: 4})
	for _, c := range []struct {
		name string
		cmd  ReassignPartition
		want error
	}{
		{"unknown broker", ReassignPartition{Topic: "a", Partition: 0, Replicas: []int32{1, 2, 9}}, ErrInvalidReplicaAssignment},
		{"fenced broker", ReassignPartition{Topic: "a", Partition: 0, Replicas: []int32{1, 2, 4}}, ErrInvalidReplicaAssignment},
		{"duplicate", ReassignPartition{Topic: "a", Partition: 0, Replicas: []int32{1, 2, 2}}, ErrInvalidReplicaAssignment},
		{"empty", ReassignPartition{Topic: "a", Partition: 0, Replicas: []int32{}}, ErrInvalidReplicaAssignment},
		{"below min.insync.replicas", ReassignPartition{Topic: "a", Partition: 0, Replicas: []int32{1}}, ErrInvalidReplicaAssignment},
		{"unknown topic", ReassignPartition{Topic: "b", Partition: 0, Replicas: []int32{1, 2}}, ErrUnknownTopic},
		{"unknown partition", ReassignPartition{Topic: "a", Partition: 1, Replicas: []int32{1, 2}}, ErrUnknownPartition},
	} {
		t.Run(c.name, func(t *testing.T) {
			next, err := Apply(img, c.cmd)
			if !errors.Is(err, c.want) || next != nil {
				t.Fatalf("Apply: %v, %v; want %v and no image", next, err, c.want)
			}
		})
	}
}

func TestReassignCancelRefusedWithoutInSyncOriginal(t *testing.T) {
	img := clusterImage(t, 4)
	img = mustApply(t, img, CreateTopic{Name: "a", ID: idA, Partitions: 1, Replicas: [][]int32{{1, 2}}},
		ReassignPartition{Topic: "a", Partition: 0, Replicas: []int32{3, 4, 1}})
	// 3 joins, then 1 and 2 fall out: only an adding replica still holds every record
	img = mustApply(t, img, alterISR(t, img, 1, 2, 3))
	img = mustApply(t, img, FenceBroker{NodeID: 2}, FenceBroker{NodeID: 1})
	st := state(t, img, "a", 0)
	if st.Leader != 3 || !st.Moving() {
		t.Fatalf("state %+v, want leader 3 mid-move", st)
	}
	if _, err := Apply(img, ReassignPartition{Topic: "a", Partition: 0, Cancel: true}); !errors.Is(err, ErrInvalidReplicaAssignment) {
		t.Fatalf("cancel: %v, want ErrInvalidReplicaAssignment", err)
	}
}

func TestReassignSurvivesSnapshot(t *testing.T) {
	img := mustApply(t, moveImage(t), ReassignPartition{Topic: "a", Partition: 0, Replicas: []int32{2, 3, 4}})
	data, err := encodeImage(img)
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeMetadata(data)
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, state(t, back, "a", 0), []int32{2, 3, 4, 1}, []int32{4}, []int32{1}, []int32{1, 2, 3}, 1)
	cmd := ReassignPartition{Topic: "a", Partition: 0, Replicas: []int32{2, 3, 4}}
	enc, err := EncodeCommand(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if dec, err := DecodeCommand(enc); err != nil || !reflect.DeepEqual(dec, cmd) {
		t.Fatalf("round trip: %+v, %v", dec, err)
	}
}

func TestElectLeader(t *testing.T) {
	img := moveImage(t)
	if _, err := Apply(img, ElectLeader{Topic: "a", Partition: 0}); !errors.Is(err, ErrElectionNotNeeded) {
		t.Fatalf("preferred election of the preferred leader: %v", err)
	}
	img = mustApply(t, img, FenceBroker{NodeID: 1})
	if _, err := Apply(img, ElectLeader{Topic: "a", Partition: 0}); !errors.Is(err, ErrPreferredLeaderNotAvailable) {
		t.Fatalf("preferred election of a fenced replica: %v", err)
	}
	img = mustApply(t, img, UnfenceBroker{NodeID: 1}, alterISR(t, img, 2, 3, 1))
	img = mustApply(t, img, ElectLeader{Topic: "a", Partition: 0})
	if st := state(t, img, "a", 0); st.Leader != 1 {
		t.Fatalf("leader %d after the preferred election, want 1", st.Leader)
	}
	if _, err := Apply(img, ElectLeader{Topic: "a", Partition: 0, Unclean: true}); !errors.Is(err, ErrElectionNotNeeded) {
		t.Fatalf("unclean election with a leader: %v", err)
	}
	img = mustApply(t, img, FenceBroker{NodeID: 1}, FenceBroker{NodeID: 2}, FenceBroker{NodeID: 3})
	if _, err := Apply(img, ElectLeader{Topic: "a", Partition: 0, Unclean: true}); !errors.Is(err, ErrEligibleLeadersNotAvailable) {
		t.Fatalf("unclean election with nothing live: %v", err)
	}
}

func TestReassignFollowerThrottled(t *testing.T) {
	img := mustApply(t, moveImage(t), ReassignPartition{Topic: "a", Partition: 0, Replicas: []int32{2, 3, 4}})
	if img.FollowerThrottleRate() != 0 {
		t.Fatalf("rate %d unset, want 0", img.FollowerThrottleRate())
	}
	img = mustApply(t, img, AlterBrokerConfigs{Set: map[string]string{BrokerConfigFollowerThrottleRate: "1048576"}},
		AlterTopicConfigs{Name: "a", Set: map[string]string{"follower.replication.throttled.replicas": "0:3"}})
	if img.FollowerThrottleRate() != 1<<20 {
		t.Fatalf("rate %d, want 1 MiB/s", img.FollowerThrottleRate())
	}
	tp, _ := img.Topic("a")
	for broker, want := range map[int32]bool{1: false, 2: false, 3: true, 4: true} {
		if got := img.FollowerThrottled(tp, 0, broker); got != want {
			t.Fatalf("broker %d throttled %v, want %v", broker, got, want)
		}
	}
}

// TestReassignLeaderThrottled: the leader sends a move's new replica its copy under the leader-side
// rate, and the followers leader.replication.throttled.replicas names by their leader ("p:leader"
// or "*") once they are out of the ISR; an in-sync follower never.
func TestReassignLeaderThrottled(t *testing.T) {
	img := moveImage(t)
	if img.LeaderThrottleRate() != 0 {
		t.Fatalf("rate %d unset, want 0", img.LeaderThrottleRate())
	}
	img = mustApply(t, img, AlterBrokerConfigs{Set: map[string]string{BrokerConfigLeaderThrottleRate: "1048576"}})
	if img.LeaderThrottleRate() != 1<<20 {
		t.Fatalf("rate %d, want 1 MiB/s", img.LeaderThrottleRate())
	}
	check := func(img *Image, leader int32, want map[int32]bool) {
		t.Helper()
		tp, _ := img.Topic("a")
		for follower, w := range want {
			if got := img.LeaderThrottled(tp, 0, leader, follower); got != w {
				t.Errorf("leader %d to follower %d: throttled %v, want %v", leader, follower, got, w)
			}
		}
	}
	check(img, 1, map[int32]bool{2: false, 3: false})
	img = mustApply(t, img, alterISR(t, img, 1, 2))
	check(img, 1, map[int32]bool{2: false, 3: false})
	img = mustApply(t, img, AlterTopicConfigs{Name: "a", Set: map[string]string{"leader.replication.throttled.replicas": "0:1"}})
	check(img, 1, map[int32]bool{2: false, 3: true})
	check(img, 2, map[int32]bool{3: false})
	img = mustApply(t, img, AlterTopicConfigs{Name: "a", Set: map[string]string{"leader.replication.throttled.replicas": "*"}})
	check(img, 2, map[int32]bool{3: true})

	img = mustApply(t, img, AlterTopicConfigs{Name: "a", Remove: []string{"leader.replication.throttled.replicas"}},
		ReassignPartition{Topic: "a", Partition: 0, Replicas: []int32{1, 2, 4}})
	check(img, 1, map[int32]bool{4: true, 2: false, 3: false})
}
