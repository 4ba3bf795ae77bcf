package controller

import (
	"fmt"
	"sort"
)

// maxReplicationFactor bounds the replicas of one partition in a command, whoever sent it.
const maxReplicationFactor = 64

// Place chooses the replicas of partitions new partitions with replication factor rf, numbered from
// start (the topic's current partition count, 0 for a new topic). It is a pure function.
//
// Only unfenced brokers are used, and a partition's replicas are distinct. Brokers are ordered by
// rack (racks interleaved round-robin, so consecutive brokers sit in different racks whenever
// racks are named), and within a rack by how many partitions they already lead (leaders, which
// may be nil), then by node id. Partition start+i takes its replicas from that list starting at
// position (start+i) mod n, so leaders spread evenly over brokers and a partition's replicas span
// as many racks as it can. It returns ErrInvalidReplication when rf is not between 1 and the number
// of unfenced brokers.
func Place(brokers []Broker, leaders map[int32]int, partitions int32, rf int16, start int32) ([][]int32, error) {
	order := placementOrder(brokers, leaders)
	if rf < 1 || int(rf) > len(order) || rf > maxReplicationFactor {
		return nil, fmt.Errorf("%w: %d with %d live brokers", ErrInvalidReplication, rf, len(order))
	}
	if err := checkPartitions(partitions); err != nil {
		return nil, err
	}
	n := len(order)
	out := make([][]int32, partitions)
	for i := range out {
		first := (int(start) + i) % n
		replicas := make([]int32, rf)
		for j := range replicas {
			replicas[j] = order[(first+j)%n]
		}
		out[i] = replicas
	}
	return out, nil
}

// placementOrder lists the unfenced brokers rack by rack, as Place describes.
func placementOrder(brokers []Broker, leaders map[int32]int) []int32 {
	byRack := map[string][]Broker{}
	var racks []string
	for _, b := range brokers {
		if b.Fenced {
			continue
		}
		if _, ok := byRack[b.Rack]; !ok {
			racks = append(racks, b.Rack)
		}
		byRack[b.Rack] = append(byRack[b.Rack], b)
	}
	sort.Strings(racks)
	for _, r := range racks {
		bs := byRack[r]
		sort.Slice(bs, func(i, j int) bool {
			li, lj := leaders[bs[i].NodeID], leaders[bs[j].NodeID]
			if li != lj {
				return li < lj
			}
			return bs[i].NodeID < bs[j].NodeID
		})
	}
	var order []int32
	for i := 0; ; i++ {
		added := false
		for _, r := range racks {
			if bs := byRack[r]; i < len(bs) {
				order = append(order, bs[i].NodeID)
				added = true
			}
		}
		if !added {
			return order
		}
	}
}

// newPartitionStates builds the initial states of partitions from their replica lists: every
// unfenced replica is in the ISR and the first of them leads. A replica list must name distinct
// registered brokers, at least one of them unfenced.
func (img *Image) newPartitionStates(assignment [][]int32) ([]*PartitionState, error) {
	out := make([]*PartitionState, len(assignment))
	for i, replicas := range assignment {
		if len(replicas) == 0 || len(replicas) > maxReplicationFactor {
			return nil, fmt.Errorf("%w: partition %d has %d replicas", ErrInvalidReplication, i, len(replicas))
		}
		st := &PartitionState{Replicas: append([]int32(nil), replicas...), Leader: NoLeader}
		for j, id := range replicas {
			if _, ok := img.Broker(id); !ok {
				return nil, fmt.Errorf("%w: partition %d names unknown broker %d", ErrInvalidReplication, i, id)
			}
			if contains(replicas[:j], id) {
				return nil, fmt.Errorf("%w: partition %d names broker %d twice", ErrInvalidReplication, i, id)
			}
			if img.live(id) {
				st.ISR = append(st.ISR, id)
			}
		}
		if len(st.ISR) == 0 {
			return nil, fmt.Errorf("%w: partition %d has no live replica", ErrInvalidReplication, i)
		}
		st.Leader = st.ISR[0]
		out[i] = st
	}
	return out, nil
}

func contains(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func without(ids []int32, id int32) []int32 {
	out := make([]int32, 0, len(ids))
	for _, x := range ids {
		if x != id {
			out = append(out, x)
		}
	}
	return out
}
