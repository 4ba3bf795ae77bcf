package controller

import (
	"errors"
	"reflect"
	"testing"
)

// clusterImage returns an image with brokers 1..n registered (no racks).
func clusterImage(t *testing.T, n int32) *Image {
	t.Helper()
	img := NewImage("cluster", 1)
	for id := int32(1); id <= n; id++ {
		var err error
		if img, err = Apply(img, RegisterBroker{Broker: Broker{NodeID: id, Host: "h", Port: 9000 + id, Incarnation: "i1"}}); err != nil {
			t.Fatal(err)
		}
	}
	return img
}

func mustApply(t *testing.T, img *Image, cmds ...Command) *Image {
	t.Helper()
	for _, c := range cmds {
		next, err := Apply(img, c)
		if err != nil {
			t.Fatalf("Apply(%T %+v): %v", c, c, err)
		}
		img = next
	}
	return img
}

func state(t *testing.T, img *Image, topic string, p int32) *PartitionState {
	t.Helper()
	tp, ok := img.Topic(topic)
	if !ok {
		t.Fatalf("no topic %q", topic)
	}
	st, ok := tp.Partition(p)
	if !ok {
		t.Fatalf("no partition %s-%d", topic, p)
	}
	return st
}

func TestControllerPlace(t *testing.T) {
	b := func(id int32, rack string, fenced bool) Broker {
		return Broker{NodeID: id, Host: "h", Port: 1, Rack: rack, Fenced: fenced}
	}
	tests := []struct {
		name       string
		brokers    []Broker
		leaders    map[int32]int
		partitions int32
		rf         int16
		start      int32
		want       [][]int32
		wantErr    error
	}{
		{name: "single node", brokers: []Broker{b(1, "", false)}, partitions: 2, rf: 1, want: [][]int32{{1}, {1}}},
		{name: "three nodes rf3", brokers: []Broker{b(1, "", false), b(2, "", false), b(3, "", false)}, partitions: 3, rf: 3,
			want: [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}},
		{name: "start offset", brokers: []Broker{b(1, "", false), b(2, "", false), b(3, "", false)}, partitions: 2, rf: 2, start: 1,
			want: [][]int32{{2, 3}, {3, 1}}},
		{name: "least loaded leads first", brokers: []Broker{b(1, "", false), b(2, "", false), b(3, "", false)},
			leaders: map[int32]int{1: 5, 2: 1}, partitions: 3, rf: 1, want: [][]int32{{3}, {2}, {1}}},
		{name: "fenced skipped", brokers: []Broker{b(1, "", false), b(2, "", true), b(3, "", false)}, partitions: 2, rf: 2,
			want: [][]int32{{1, 3}, {3, 1}}},
		{name: "racks interleaved", brokers: []Broker{b(1, "a", false), b(2, "a", false), b(3, "b", false), b(4, "b", false)},
			partitions: 4, rf: 2, want: [][]int32{{1, 3}, {3, 2}, {2, 4}, {4, 1}}},
		{name: "rf above live", brokers: []Broker{b(1, "", false), b(2, "", true)}, partitions: 1, rf: 2, wantErr: ErrInvalidReplication},
		{name: "rf zero", brokers: []Broker{b(1, "", false)}, partitions: 1, rf: 0, wantErr: ErrInvalidReplication},
		{name: "no partitions", brokers: []Broker{b(1, "", false)}, partitions: 0, rf: 1, wantErr: ErrInvalidPartitions},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Place(tt.brokers, tt.leaders, tt.partitions, tt.rf, tt.start)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Place = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestControllerPlaceSpreadsLeadersAndRacks(t *testing.T) {
	var brokers []Broker
	racks := []string{"a", "b", "c"}
	for id := int32(1); id <= 6; id++ {
		brokers = append(brokers, Broker{NodeID: id, Host: "h", Port: 1, Rack: racks[id%3]})
	}
	got, err := Place(brokers, nil, 60, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]int{}
	for p, replicas := range got {
		leaders[replicas[0]]++
		seen := map[string]bool{}
		for _, r := range replicas {
			seen[brokers[r-1].Rack] = true
		}
		if len(seen) != 3 {
			t.Fatalf("partition %d replicas %v span racks %v", p, replicas, seen)
		}
	}
	for id := int32(1); id <= 6; id++ {
		if leaders[id] != 10 {
			t.Fatalf("leader counts %v, want 10 each", leaders)
		}
	}
}

func TestControllerCreateTopicPlacement(t *testing.T) {
	img := clusterImage(t, 3)
	img = mustApply(t, img, CreateTopic{Name: "a", ID: idA, Partitions: 3, ReplicationFactor: 3})
	for p := int32(0); p < 3; p++ {
		st := state(t, img, "a", p)
		if len(st.Replicas) != 3 || st.Leader != st.Replicas[0] || !reflect.DeepEqual(st.ISR, st.Replicas) || st.LeaderEpoch != 0 {
			t.Fatalf("partition %d: %+v", p, st)
		}
	}
	if c := img.LeaderCounts(); c[1] != 1 || c[2] != 1 || c[3] != 1 {
		t.Fatalf("leader counts %v", c)
	}
	img = mustApply(t, img, CreatePartitions{Name: "a", Total: 5})
	if tp := img.Topics["a"]; len(tp.States) != 5 || tp.ReplicationFactor() != 3 {
		t.Fatalf("grown topic %+v", tp)
	}
	for _, bad := range []Command{
		CreateTopic{Name: "b", ID: idB, Partitions: 1, Replicas: [][]int32{{1, 1}}},
		CreateTopic{Name: "b", ID: idB, Partitions: 1, Replicas: [][]int32{{9}}},
		CreateTopic{Name: "b", ID: idB, Partitions: 2, Replicas: [][]int32{{1}}},
		CreateTopic{Name: "b", ID: idB, Partitions: 1, Replicas: [][]int32{{}}},
		CreateTopic{Name: "b", ID: idB, Partitions: 1, ReplicationFactor: 4},
		CreatePartitions{Name: "a", Total: 6, Replicas: [][]int32{{1}, {2}}},
	} {
		if _, err := Apply(img, bad); !errors.Is(err, ErrInvalidReplication) {
			t.Errorf("Apply(%+v) = %v, want ErrInvalidReplication", bad, err)
		}
	}
	fenced := mustApply(t, img, FenceBroker{NodeID: 2}, FenceBroker{NodeID: 3})
	if _, err := Apply(fenced, CreateTopic{Name: "b", ID: idB, Partitions: 1, Replicas: [][]int32{{2, 3}}}); !errors.Is(err, ErrInvalidReplication) {
		t.Fatalf("placement on fenced brokers only: %v", err)
	}
}

func TestControllerFenceElectsFromISR(t *testing.T) {
	tests := []struct {
		name    string
		configs map[string]string
		isr     []int32 // shrink to this ISR first (leader 1 stays)
		fence   []int32
		want    PartitionState
	}{
		{name: "follower fenced", fence: []int32{2},
			want: PartitionState{Replicas: []int32{1, 2, 3}, Leader: 1, ISR: []int32{1, 3}, PartitionEpoch: 1}},
		{name: "leader fenced", fence: []int32{1},
			want: PartitionState{Replicas: []int32{1, 2, 3}, Leader: 2, LeaderEpoch: 1, ISR: []int32{2, 3}, PartitionEpoch: 1}},
		{name: "leader fenced, next in ISR order", isr: []int32{1, 3}, fence: []int32{1},
			want: PartitionState{Replicas: []int32{1, 2, 3}, Leader: 3, LeaderEpoch: 1, ISR: []int32{3}, PartitionEpoch: 2}},
		{name: "last ISR member stays, no leader", isr: []int32{1}, fence: []int32{1},
			want: PartitionState{Replicas: []int32{1, 2, 3}, Leader: NoLeader, LeaderEpoch: 0, ISR: []int32{1}, PartitionEpoch: 2}},
		{name: "unclean election when enabled", configs: map[string]string{ConfigUncleanLeaderElection: "true"}, isr: []int32{1}, fence: []int32{1},
			want: PartitionState{Replicas: []int32{1, 2, 3}, Leader: 2, LeaderEpoch: 1, ISR: []int32{2}, PartitionEpoch: 2}},
		{name: "below min ISR goes to ELR", configs: map[string]string{ConfigMinInsyncReplicas: "2"}, fence: []int32{3, 2},
			want: PartitionState{Replicas: []int32{1, 2, 3}, Leader: 1, ISR: []int32{1}, ELR: []int32{2}, PartitionEpoch: 2}},
		{name: "everyone fenced", configs: map[string]string{ConfigMinInsyncReplicas: "2"}, fence: []int32{3, 2, 1},
			want: PartitionState{Replicas: []int32{1, 2, 3}, Leader: NoLeader, ISR: []int32{1}, ELR: []int32{2}, PartitionEpoch: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img := clusterImage(t, 3)
			img = mustApply(t, img, CreateTopic{Name: "a", ID: idA, Partitions: 1, Configs: tt.configs, Replicas: [][]int32{{1, 2, 3}}})
			if tt.isr != nil {
				img = mustApply(t, img, AlterPartition{Topic: "a", Leader: 1, ISR: tt.isr})
			}
			for _, id := range tt.fence {
				img = mustApply(t, img, FenceBroker{NodeID: id})
			}
			if got := state(t, img, "a", 0); !reflect.DeepEqual(*got, tt.want) {
				t.Fatalf("state\n got %+v\nwant %+v", *got, tt.want)
			}
			for _, id := range tt.fence {
				if b, _ := img.Broker(id); !b.Fenced {
					t.Fatalf("broker %d not fenced", id)
				}
			}
		})
	}
}

func TestControllerUnfenceElectsLeaderless(t *testing.T) {
	img := clusterImage(t, 3)
	img = mustApply(t, img,
		CreateTopic{Name: "a", ID: idA, Partitions: 1, Configs: map[string]string{ConfigMinInsyncReplicas: "2"}, Replicas: [][]int32{{1, 2, 3}}},
		FenceBroker{NodeID: 3}, FenceBroker{NodeID: 2}, FenceBroker{NodeID: 1})
	// ISR [1], ELR [2], no leader. Broker 3 returning changes nothing: it is in neither.
	img = mustApply(t, img, UnfenceBroker{NodeID: 3})
	if st := state(t, img, "a", 0); st.Leader != NoLeader {
		t.Fatalf("elected %d from outside ISR and ELR", st.Leader)
	}
	// Broker 2 is in the ELR: it has every acknowledged record and leads again.
	img = mustApply(t, img, UnfenceBroker{NodeID: 2})
	want := PartitionState{Replicas: []int32{1, 2, 3}, Leader: 2, LeaderEpoch: 1, ISR: []int32{2}, ELR: []int32{1}, PartitionEpoch: 4}
	if st := state(t, img, "a", 0); !reflect.DeepEqual(*st, want) {
		t.Fatalf("after unfence\n got %+v\nwant %+v", *st, want)
	}
	if _, err := Apply(img, UnfenceBroker{NodeID: 2}); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("unfence of a live broker: %v", err)
	}
	if _, err := Apply(img, FenceBroker{NodeID: 9}); !errors.Is(err, ErrUnknownBroker) {
		t.Fatalf("fence of an unknown broker: %v", err)
	}
	// The ISR growing back to min.insync.replicas empties the ELR.
	img = mustApply(t, img, AlterPartition{Topic: "a", Leader: 2, LeaderEpoch: 1, PartitionEpoch: 4, ISR: []int32{2, 3}})
	if st := state(t, img, "a", 0); st.ELR != nil || st.PartitionEpoch != 5 {
		t.Fatalf("after ISR expand %+v", st)
	}
}

func TestControllerAlterPartition(t *testing.T) {
	base := mustApply(t, clusterImage(t, 3), CreateTopic{Name: "a", ID: idA, Partitions: 1, Replicas: [][]int32{{1, 2, 3}}})
	shrunk := mustApply(t, base, AlterPartition{Topic: "a", Leader: 1, ISR: []int32{1, 2}})
	if st := state(t, shrunk, "a", 0); !reflect.DeepEqual(st.ISR, []int32{1, 2}) || st.PartitionEpoch != 1 || st.LeaderEpoch != 0 {
		t.Fatalf("shrunk %+v", st)
	}
	fenced := mustApply(t, shrunk, FenceBroker{NodeID: 3})
	tests := []struct {
		name string
		img  *Image
		cmd  AlterPartition
		want error
	}{
		{"stale partition epoch", shrunk, AlterPartition{Topic: "a", Leader: 1, ISR: []int32{1}}, ErrStaleEpoch},
		{"stale leader epoch", shrunk, AlterPartition{Topic: "a", Leader: 1, LeaderEpoch: 3, PartitionEpoch: 1, ISR: []int32{1}}, ErrStaleEpoch},
		{"not the leader", shrunk, AlterPartition{Topic: "a", Leader: 2, PartitionEpoch: 1, ISR: []int32{2}}, ErrStaleEpoch},
		{"leader left out", shrunk, AlterPartition{Topic: "a", Leader: 1, PartitionEpoch: 1, ISR: []int32{2}}, ErrInvalidCommand},
		{"not a replica", shrunk, AlterPartition{Topic: "a", Leader: 1, PartitionEpoch: 1, ISR: []int32{1, 4}}, ErrInvalidCommand},
		{"duplicate", shrunk, AlterPartition{Topic: "a", Leader: 1, PartitionEpoch: 1, ISR: []int32{1, 1}}, ErrInvalidCommand},
		{"adds fenced", fenced, AlterPartition{Topic: "a", Leader: 1, PartitionEpoch: 1, ISR: []int32{1, 2, 3}}, ErrInvalidCommand},
		{"unknown partition", shrunk, AlterPartition{Topic: "a", Partition: 1, Leader: 1, ISR: []int32{1}}, ErrUnknownPartition},
		{"unknown topic", shrunk, AlterPartition{Topic: "b", Leader: 1, ISR: []int32{1}}, ErrUnknownTopic},
		{"expand", shrunk, AlterPartition{Topic: "a", Leader: 1, PartitionEpoch: 1, ISR: []int32{1, 2, 3}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Apply(tt.img, tt.cmd); !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("err %v, want %v", err, tt.want)
			}
		})
	}
}

func TestControllerElectPreferredLeaders(t *testing.T) {
	img := mustApply(t, clusterImage(t, 3),
		CreateTopic{Name: "a", ID: idA, Partitions: 3, ReplicationFactor: 3},
		FenceBroker{NodeID: 1})
	if c := img.LeaderCounts(); c[1] != 0 {
		t.Fatalf("fenced broker still leads: %v", c)
	}
	// Back, but not in the ISR yet: no preferred election.
	img = mustApply(t, img, UnfenceBroker{NodeID: 1}, ElectPreferredLeaders{})
	if c := img.LeaderCounts(); c[1] != 0 {
		t.Fatalf("broker outside the ISR elected: %v", c)
	}
	st := state(t, img, "a", 0)
	img = mustApply(t, img, AlterPartition{Topic: "a", Leader: st.Leader, LeaderEpoch: st.LeaderEpoch, PartitionEpoch: st.PartitionEpoch, ISR: []int32{1, 2, 3}})
	img = mustApply(t, img, ElectPreferredLeaders{Partitions: []TopicPartition{{Topic: "a", Partition: 0}}})
	if st := state(t, img, "a", 0); st.Leader != 1 || st.LeaderEpoch != 2 {
		t.Fatalf("preferred election %+v", st)
	}
	if _, err := Apply(img, ElectPreferredLeaders{Partitions: []TopicPartition{{Topic: "a", Partition: 7}}}); !errors.Is(err, ErrUnknownPartition) {
		t.Fatalf("unknown partition: %v", err)
	}
}

func TestControllerRegisterIncarnation(t *testing.T) {
	img := mustApply(t, clusterImage(t, 2), CreateTopic{Name: "a", ID: idA, Partitions: 1, Replicas: [][]int32{{1, 2}}})
	b1, _ := img.Broker(1)
	same := mustApply(t, img, RegisterBroker{Broker: Broker{NodeID: 1, Host: "h2", Port: 9001, Incarnation: "i1"}})
	if b, _ := same.Broker(1); b.Epoch != b1.Epoch || b.Host != "h2" || state(t, same, "a", 0).LeaderEpoch != 0 {
		t.Fatalf("same incarnation: broker %+v state %+v", b, state(t, same, "a", 0))
	}
	restarted := mustApply(t, img, RegisterBroker{Broker: Broker{NodeID: 1, Host: "h", Port: 9001, Incarnation: "i2"}})
	if b, _ := restarted.Broker(1); b.Epoch != restarted.Version || state(t, restarted, "a", 0).LeaderEpoch != 1 {
		t.Fatalf("new incarnation: broker %+v state %+v", b, state(t, restarted, "a", 0))
	}
	// Registering after a fence unfences and elects where the broker is the last ISR member.
	img = mustApply(t, img, AlterPartition{Topic: "a", Leader: 1, ISR: []int32{1}}, FenceBroker{NodeID: 1})
	img = mustApply(t, img, RegisterBroker{Broker: Broker{NodeID: 1, Host: "h", Port: 9001, Incarnation: "i3"}})
	if b, _ := img.Broker(1); b.Fenced || state(t, img, "a", 0).Leader != 1 {
		t.Fatalf("re-registered: broker %+v state %+v", b, state(t, img, "a", 0))
	}
}

func TestControllerBecomeController(t *testing.T) {
	img := NewImage("", NoLeader)
	if _, err := Apply(img, BecomeController{NodeID: 1, Epoch: 1}); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("first controller without cluster id: %v", err)
	}
	img = mustApply(t, img, BecomeController{NodeID: 1, Epoch: 2, ClusterID: "c1"}, BecomeController{NodeID: 2, Epoch: 3, ClusterID: "c2"})
	if img.ClusterID != "c1" || img.ControllerID != 2 || img.ControllerEpoch != 3 {
		t.Fatalf("image %+v", img)
	}
	if _, err := Apply(img, BecomeController{NodeID: 1, Epoch: 2}); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("older term: %v", err)
	}
}

func TestControllerCommandCodec(t *testing.T) {
	cmds := []Command{
		CreateTopic{Name: "a", ID: idA, Partitions: 2, Configs: map[string]string{"retention.ms": "1"}, Internal: true, CreatedMs: 7, ReplicationFactor: 2, Replicas: [][]int32{{1, 2}, {2, 1}}},
		DeleteTopic{Name: "a", AllowInternal: true},
		CreatePartitions{Name: "a", Total: 3, Replicas: [][]int32{{1}}},
		AlterTopicConfigs{Name: "a", Set: map[string]string{"x": "y"}, Remove: []string{"z"}},
		AlterBrokerConfigs{Set: map[string]string{"x": "y"}},
		AllocateProducerIDs{N: 5},
		RegisterBroker{Broker: Broker{NodeID: 1, Host: "h", Port: 1, Rack: "r", Incarnation: "i"}},
		BecomeController{NodeID: 1, Epoch: 4, ClusterID: "c"},
		FenceBroker{NodeID: 2},
		UnfenceBroker{NodeID: 2},
		AlterPartition{Topic: "a", Partition: 1, Leader: 2, LeaderEpoch: 3, PartitionEpoch: 4, ISR: []int32{2}},
		ElectPreferredLeaders{Partitions: []TopicPartition{{Topic: "a", Partition: 1}}},
	}
	for _, c := range cmds {
		data, err := EncodeCommand(c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeCommand(data)
		if err != nil || !reflect.DeepEqual(got, c) {
			t.Fatalf("round trip of %T: %+v, %v", c, got, err)
		}
	}
	for _, bad := range []string{"", "{", `{"f":2,"t":"fence_broker","c":{}}`, `{"f":1,"t":"nope","c":{}}`, `{"f":1,"t":"fence_broker","c":[]}`} {
		if _, err := DecodeCommand([]byte(bad)); !errors.Is(err, ErrInvalidCommand) {
			t.Errorf("DecodeCommand(%q) = %v", bad, err)
		}
	}
}

func FuzzDecodeCommand(f *testing.F) {
	f.Add([]byte(`{"f":1,"t":"fence_broker","c":{"NodeID":1}}`))
	f.Add([]byte(`{"f":1,"t":"create_topic","c":{"Name":"a","Partitions":1,"Replicas":[[1]]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cmd, err := DecodeCommand(data)
		if err != nil {
			return
		}
		img := clusterImage(t, 2)
		_, _ = Apply(img, cmd)
	})
}
