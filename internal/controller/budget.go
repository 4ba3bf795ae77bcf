package controller

import "fmt"

// CheckPartitionBudget refuses, with ErrPolicyViolation, a change from cur to next that grows the cluster
// past weir.max.partitions partitions or a broker past weir.max.partitions.per.broker replicas. A count
// that was already over its budget in cur (the budget was lowered) may stay, but not grow.
//
// The Store checks a creation against the image it is proposed on, before it is committed, rather than in
// Apply: a command committed under one budget must apply the same way when the log is replayed under
// another, so Apply never looks at the budget.
func CheckPartitionBudget(cur, next *Image) error {
	curTotal, curPer := cur.partitionCounts()
	nextTotal, nextPer := next.partitionCounts()
	if limit := next.brokerInt(BrokerConfigMaxPartitions); nextTotal > limit && nextTotal > curTotal {
		return fmt.Errorf("%w: the cluster would hold %d partitions, above %s=%d", ErrPolicyViolation,
			nextTotal, BrokerConfigMaxPartitions, limit)
	}
	limit := next.brokerInt(BrokerConfigMaxPartitionsPerBroker)
	for _, b := range next.Brokers {
		if n := nextPer[b.NodeID]; n > limit && n > curPer[b.NodeID] {
			return fmt.Errorf("%w: broker %d would host %d partition replicas, above %s=%d", ErrPolicyViolation,
				b.NodeID, n, BrokerConfigMaxPartitionsPerBroker, limit)
		}
	}
	return nil
}

// partitionCounts returns the number of partitions in img and of replicas on each broker.
func (img *Image) partitionCounts() (int64, map[int32]int64) {
	var total int64
	per := make(map[int32]int64, len(img.Brokers))
	for _, t := range img.Topics {
		total += int64(t.Partitions)
		for _, st := range t.States {
			for _, id := range st.Replicas {
				per[id]++
			}
		}
	}
	return total, per
}

func (img *Image) brokerInt(key string) int64 {
	v, _ := img.BrokerConfig(key)
	return parseLong(v, 0)
}
