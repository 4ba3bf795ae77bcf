package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// balanceCluster is a cluster for the planner's tests: brokers 1..n (racks[i] the rack of broker
// i+1, none when racks is nil) and topics placed by place.
func balanceCluster(n int, racks []string) []balanceBroker {
	var brokers []balanceBroker
	for i := range n {
		b := balanceBroker{ID: int32(i + 1)}
		if racks != nil {
			b.Rack = racks[i]
		}
		brokers = append(brokers, b)
	}
	return brokers
}

// spread is the difference between the largest and the smallest count over brokers.
func spread(brokers []balanceBroker, parts []balancePartition, leadersOnly bool) int {
	count := map[int32]int{}
	for _, p := range parts {
		rs := p.Replicas
		if leadersOnly {
			rs = rs[:1]
		}
		for _, r := range rs {
			count[r]++
		}
	}
	lo, hi := count[brokers[0].ID], count[brokers[0].ID]
	for _, b := range brokers {
		lo, hi = min(lo, count[b.ID]), max(hi, count[b.ID])
	}
	return hi - lo
}

// fewestMoves is the least number of replicas any balanced placement must move from parts: brokers
// end with floor or ceil of the mean, the most loaded ones keeping the ceilings.
func fewestMoves(brokers []balanceBroker, parts []balancePartition) int {
	var counts []int
	total := 0
	for _, b := range brokers {
		n := 0
		for _, p := range parts {
			if slices.Contains(p.Replicas, b.ID) {
				n++
			}
		}
		counts = append(counts, n)
		total += n
	}
	slices.Sort(counts)
	slices.Reverse(counts)
	floor, extra := total/len(counts), total%len(counts)
	moves := 0
	for i, c := range counts {
		target := floor
		if i < extra {
			target++
		}
		moves += max(0, c-target)
	}
	return moves
}

// TestRebalancePlanNewBroker: twelve partitions at RF 3 on brokers 1-3 and a fourth broker: the
// plan moves exactly nine replicas to broker 4 (its share), three of its leaderships, and keeps every
// replication factor.
func TestRebalancePlanNewBroker(t *testing.T) {
	brokers := balanceCluster(4, nil)
	var parts []balancePartition
	for p := range int32(12) {
		parts = append(parts, balancePartition{Topic: "t", Partition: p, Replicas: []int32{p%3 + 1, (p+1)%3 + 1, (p+2)%3 + 1}, Bytes: int64(100 + p)})
	}
	plan := planBalance(brokers, parts, defaultBytesTolerance)
	after := applied(parts, plan)
	if plan.ReplicasMoved != 9 {
		t.Errorf("moved %d replicas, want 9: %+v", plan.ReplicasMoved, plan.Partitions)
	}
	if s := spread(brokers, after, false); s != 0 {
		t.Errorf("replica spread %d after %+v", s, after)
	}
	if s := spread(brokers, after, true); s != 0 {
		t.Errorf("leader spread %d after %+v", s, after)
	}
	for i, p := range after {
		if len(p.Replicas) != 3 {
			t.Errorf("%d: RF %d", i, len(p.Replicas))
		}
	}
	// the nine smallest partitions are the ones copied
	if plan.BytesMoved != int64(100*9+(0+1+2+3+4+5+6+7+8)) {
		t.Errorf("bytes moved %d, want the nine smallest partitions' %d", plan.BytesMoved, 100*9+36)
	}
	if again := planBalance(brokers, after, defaultBytesTolerance); len(again.Partitions) != 0 {
		t.Errorf("a balanced cluster gets a plan: %+v", again.Partitions)
	}
}

// TestRebalancePlanRacks: two racks of two brokers, every partition created with both replicas in
// rack a: the plan gives each partition one replica per rack.
func TestRebalancePlanRacks(t *testing.T) {
	brokers := balanceCluster(4, []string{"a", "a", "b", "b"})
	var parts []balancePartition
	for p := range int32(8) {
		parts = append(parts, balancePartition{Topic: "t", Partition: p, Replicas: []int32{1 + p%2, 2 - p%2}})
	}
	after := applied(parts, planBalance(brokers, parts, defaultBytesTolerance))
	for _, p := range after {
		if racksOf(brokers, p.Replicas)[0] == racksOf(brokers, p.Replicas)[1] {
			t.Errorf("%d: replicas %v in one rack", p.Partition, p.Replicas)
		}
	}
	if s := spread(brokers, after, false); s > 1 {
		t.Errorf("replica spread %d", s)
	}
}

func racksOf(brokers []balanceBroker, replicas []int32) []string {
	var racks []string
	for _, r := range replicas {
		for _, b := range brokers {
			if b.ID == r {
				racks = append(racks, b.Rack)
			}
		}
	}
	return racks
}

// TestRebalancePlanProperties plans random clusters (1-8 brokers, none or equal racks, topics of
// random sizes and replication factors, all one or all two and more, placed on a random subset of
// brokers) and checks: replication
// factors and brokers unchanged, no broker twice in a partition, replicas and preferred leaders even
// to within one, partitions in distinct racks where there are as many racks as replicas, and, without
// racks and with bytes left as the moves put them, exactly the fewest replica moves a balanced
// placement needs; with bytes evened, the gap between the brokers holding the most and the fewest
// bytes no wider than without, and a second plan empty either way.
func TestRebalancePlanProperties(t *testing.T) {
	for seed := range uint64(1000) {
		rng := rand.New(rand.NewPCG(seed, 14))
		nBrokers := 1 + rng.IntN(8)
		var racks []string
		nRacks := 0
		if nBrokers%2 == 0 && rng.IntN(2) == 0 {
			nRacks = 2
			if nBrokers%4 == 0 && rng.IntN(2) == 0 {
				nRacks = 4
			}
			for i := range nBrokers {
				racks = append(racks, fmt.Sprintf("r%d", i%nRacks))
			}
		}
		brokers := balanceCluster(nBrokers, racks)
		used := 1 + rng.IntN(nBrokers)
		single := rng.IntN(4) == 0
		var parts []balancePartition
		for ti := range 1 + rng.IntN(4) {
			// one replica per partition everywhere, or two or more everywhere (planBalance's leader guarantee)
			rf := 1
			if used > 1 && !single {
				rf = 2 + rng.IntN(min(2, used-1))
			}
			for p := range int32(1 + rng.IntN(30)) {
				perm := rng.Perm(used)
				var replicas []int32
				for _, r := range perm[:rf] {
					replicas = append(replicas, int32(r+1))
				}
				var in int64
				if rng.IntN(3) == 0 {
					in = rng.Int64N(4 << 20)
				}
				parts = append(parts, balancePartition{Topic: fmt.Sprintf("t%d", ti), Partition: p, Replicas: replicas,
					Bytes: rng.Int64N(1 << 20), BytesIn: in})
			}
		}
		countsOnly := planBalance(brokers, parts, 0)
		noRates := make([]balancePartition, len(parts))
		for i, p := range parts {
			p.BytesIn = 0
			noRates[i] = p
		}
		sizesOnly := planBalance(brokers, noRates, defaultBytesTolerance)
		for _, tolerance := range []float64{0, defaultBytesTolerance} {
			plan := planBalance(brokers, parts, tolerance)
			after := applied(parts, plan)
			for i, p := range after {
				if len(p.Replicas) != len(parts[i].Replicas) {
					t.Fatalf("seed %d: %s-%d RF %d -> %d", seed, p.Topic, p.Partition, len(parts[i].Replicas), len(p.Replicas))
				}
				for j, r := range p.Replicas {
					if r < 1 || int(r) > nBrokers || slices.Contains(p.Replicas[:j], r) {
						t.Fatalf("seed %d: %s-%d replicas %v", seed, p.Topic, p.Partition, p.Replicas)
					}
				}
				if nRacks >= len(p.Replicas) {
					rs := racksOf(brokers, p.Replicas)
					slices.Sort(rs)
					if len(slices.Compact(rs)) != len(p.Replicas) {
						t.Fatalf("seed %d: %s-%d replicas %v share a rack (%v)", seed, p.Topic, p.Partition, p.Replicas, racks)
					}
				}
			}
			if s := spread(brokers, after, false); s > 1 {
				t.Fatalf("seed %d: replica spread %d", seed, s)
			}
			if s := spread(brokers, after, true); s > 1 {
				t.Fatalf("seed %d: leader spread %d racks %v\nbefore %v\nafter %v", seed, s, racks, parts, after)
			}
			if racks == nil && tolerance == 0 {
				if want := fewestMoves(brokers, parts); plan.ReplicasMoved != want {
					t.Fatalf("seed %d: %d replicas moved, the fewest is %d", seed, plan.ReplicasMoved, want)
				}
			}
			if gap, without := bytesGap(brokers, after), bytesGap(brokers, applied(parts, countsOnly)); gap > without &&
				float64(gap) > tolerance*float64(heldTotal(parts))/float64(nBrokers) {
				t.Fatalf("seed %d: tolerance %v leaves a bytes gap of %d, wider than %d without and than the tolerance", seed, tolerance, gap, without)
			}
			if tolerance > 0 {
				if gap, without := rateGap(brokers, after), rateGap(brokers, applied(parts, sizesOnly)); gap > without {
					t.Fatalf("seed %d: a bytes-in gap of %d, wider than %d planned without bytes-in", seed, gap, without)
				}
			}
			if again := planBalance(brokers, after, tolerance); again.ReplicasMoved != 0 {
				t.Fatalf("seed %d: tolerance %v: the balanced placement gets %d more moves", seed, tolerance, again.ReplicasMoved)
			}
		}
	}
}

// TestRebalancePlanUnknownBrokers: replicas on a broker the planner is not given stay, and count
// for no one; a cluster without brokers gets no plan.
func TestRebalancePlanUnknownBrokers(t *testing.T) {
	parts := []balancePartition{{Topic: "t", Partition: 0, Replicas: []int32{9, 1}}, {Topic: "t", Partition: 1, Replicas: []int32{1, 9}}}
	plan := planBalance(balanceCluster(2, nil), parts, defaultBytesTolerance)
	for _, p := range applied(parts, plan) {
		if !slices.Contains(p.Replicas, 9) || len(p.Replicas) != 2 {
			t.Errorf("%d: replicas %v", p.Partition, p.Replicas)
		}
	}
	if plan := planBalance(nil, parts, defaultBytesTolerance); len(plan.Partitions) != 0 {
		t.Errorf("no brokers: %+v", plan)
	}
}

// BenchmarkRebalancePlan plans 1,000 partitions at RF 3 of sizes 0 to 999, all on brokers 1-3, over
// six brokers, bytes evened to the default tolerance (the target is well under a second per plan).
func BenchmarkRebalancePlan(b *testing.B) {
	brokers := balanceCluster(6, nil)
	var parts []balancePartition
	for p := range int32(1000) {
		parts = append(parts, balancePartition{Topic: fmt.Sprintf("t%d", p/50), Partition: p % 50,
			Replicas: []int32{p%3 + 1, (p+1)%3 + 1, (p+2)%3 + 1}, Bytes: int64(p)})
	}
	for b.Loop() {
		if plan := planBalance(brokers, parts, defaultBytesTolerance); plan.ReplicasMoved < 1500 {
			b.Fatalf("moved %d replicas, want at least 1500", plan.ReplicasMoved)
		}
	}
}

// TestRebalancePlanTopics: two topics of six partitions at RF 3 on brokers 1-3 and a fourth broker:
// the fourth takes its share of each topic, not of one, even though the second topic's partitions
// are the smaller.
func TestRebalancePlanTopics(t *testing.T) {
	brokers := balanceCluster(4, nil)
	var parts []balancePartition
	for ti, topic := range []string{"big", "small"} {
		for p := range int32(6) {
			parts = append(parts, balancePartition{Topic: topic, Partition: p, Replicas: []int32{p%3 + 1, (p+1)%3 + 1, (p+2)%3 + 1},
				Bytes: int64(1000 - 900*ti)})
		}
	}
	after := applied(parts, planBalance(brokers, parts, defaultBytesTolerance))
	for _, topic := range []string{"big", "small"} {
		var of []balancePartition
		for _, p := range after {
			if p.Topic == topic {
				of = append(of, p)
			}
		}
		if s := spread(brokers, of, false); s > 1 {
			t.Errorf("topic %s: replica spread %d: %v", topic, s, of)
		}
	}
}

// bytesGap is the difference between the most and the fewest bytes a broker holds.
func bytesGap(brokers []balanceBroker, parts []balancePartition) int64 {
	lo, hi := loadSpread(brokers, parts, sizeOf)
	return hi - lo
}

// rateGap is the difference between the most and the fewest bytes-in a broker takes.
func rateGap(brokers []balanceBroker, parts []balancePartition) int64 {
	lo, hi := loadSpread(brokers, parts, rateOf)
	return hi - lo
}

// heldTotal is the bytes of every replica of parts.
func heldTotal(parts []balancePartition) int64 {
	var n int64
	for _, p := range parts {
		n += p.Bytes * int64(len(p.Replicas))
	}
	return n
}

// TestRebalancePlanBytesIn: two brokers of two partitions each, their bytes even (1,010 each) and
// both partitions written to on broker 1. The plan exchanges the pair that evens bytes-in without
// unevening the bytes held, and of the two such pairs the one that copies less (10-byte partitions
// 1 and 2); with bytes-in under rateFloor, or a tolerance of 0, it plans nothing.
func TestRebalancePlanBytesIn(t *testing.T) {
	brokers := balanceCluster(2, nil)
	placed := func(in int64) []balancePartition {
		return []balancePartition{
			{Topic: "t", Partition: 0, Replicas: []int32{1}, Bytes: 1000, BytesIn: in},
			{Topic: "t", Partition: 1, Replicas: []int32{1}, Bytes: 10, BytesIn: in},
			{Topic: "t", Partition: 2, Replicas: []int32{2}, Bytes: 10},
			{Topic: "t", Partition: 3, Replicas: []int32{2}, Bytes: 1000},
		}
	}
	parts := placed(1 << 20)
	plan := planBalance(brokers, parts, defaultBytesTolerance)
	var moved []int32
	for _, p := range plan.Partitions {
		moved = append(moved, p.Partition)
	}
	after := applied(parts, plan)
	if !slices.Equal(moved, []int32{1, 2}) || plan.BytesMoved != 20 || rateGap(brokers, after) != 0 || bytesGap(brokers, after) != 0 {
		t.Errorf("moved partitions %v (%d bytes), bytes-in gap %d, bytes gap %d after %+v", moved, plan.BytesMoved,
			rateGap(brokers, after), bytesGap(brokers, after), after)
	}
	if plan := planBalance(brokers, parts, 0); len(plan.Partitions) != 0 {
		t.Errorf("tolerance 0: %+v", plan)
	}
	if plan := planBalance(brokers, placed(rateFloor/4), defaultBytesTolerance); len(plan.Partitions) != 0 {
		t.Errorf("bytes-in under the floor: %+v", plan)
	}
}

// TestRebalancePlanBytes: two brokers with two partitions each, broker 1's of 1,000 bytes and broker
// 2's of 10: the counts are even, and the plan exchanges one partition of each, leaving 1,010 bytes on
// both; with a tolerance of 0 it plans nothing.
func TestRebalancePlanBytes(t *testing.T) {
	brokers := balanceCluster(2, nil)
	parts := []balancePartition{
		{Topic: "t", Partition: 0, Replicas: []int32{1}, Bytes: 1000},
		{Topic: "t", Partition: 1, Replicas: []int32{1}, Bytes: 1000},
		{Topic: "t", Partition: 2, Replicas: []int32{2}, Bytes: 10},
		{Topic: "t", Partition: 3, Replicas: []int32{2}, Bytes: 10},
	}
	if plan := planBalance(brokers, parts, 0); len(plan.Partitions) != 0 {
		t.Errorf("tolerance 0: %+v", plan)
	}
	plan := planBalance(brokers, parts, defaultBytesTolerance)
	if plan.ReplicasMoved != 2 || plan.BytesMoved != 1010 {
		t.Errorf("moved %d replicas, %d bytes; want 2 and 1010: %+v", plan.ReplicasMoved, plan.BytesMoved, plan.Partitions)
	}
	after := applied(parts, plan)
	if gap := bytesGap(brokers, after); gap != 0 {
		t.Errorf("bytes gap %d after %+v", gap, after)
	}
	if s := spread(brokers, after, false); s != 0 {
		t.Errorf("replica spread %d after %+v", s, after)
	}
}

// randomPlacement is a random cluster of BenchmarkRebalanceBytesEffect's: 3-8 brokers, 20-219
// partitions at RF 3 of random sizes up to 1 GiB spread over three topics, a third of them written to
// at up to 8 MiB/s; and the bytes a broker holds and takes per second at the default tolerance.
func randomPlacement(seed uint64) (brokers []balanceBroker, parts []balancePartition, heldLimit, inLimit float64) {
	rng := rand.New(rand.NewPCG(seed, 3))
	nb := 3 + rng.IntN(6)
	brokers = balanceCluster(nb, nil)
	var held, in int64
	for p := range int32(20 + rng.IntN(200)) {
		perm := rng.Perm(nb)
		size := rng.Int64N(1 << 30)
		var rate int64
		if rng.IntN(3) == 0 {
			rate = rng.Int64N(8 << 20)
		}
		held, in = held+3*size, in+3*rate
		parts = append(parts, balancePartition{Topic: fmt.Sprintf("t%d", p%3), Partition: p,
			Replicas: []int32{int32(perm[0] + 1), int32(perm[1] + 1), int32(perm[2] + 1)}, Bytes: size, BytesIn: rate})
	}
	return brokers, parts, defaultBytesTolerance * float64(held) / float64(nb), max(defaultBytesTolerance*float64(in)/float64(nb), rateFloor)
}

// BenchmarkRebalanceBytesEffect plans 300 random clusters (randomPlacement) three ways: counts only,
// with the bytes pass but bytes-in unknown, and with both passes. It reports how many clusters end
// with every broker's bytes held, and bytes-in, within the default tolerance of the mean, and the
// replica moves each pass adds per cluster (docs/reassignment.md quotes it).
func BenchmarkRebalanceBytesEffect(b *testing.B) {
	for b.Loop() {
		var heldCounts, heldBytes, heldBoth, inBytes, inBoth, extraBytes, extraIn int
		const clusters = 300
		for seed := range uint64(clusters) {
			brokers, parts, heldLimit, inLimit := randomPlacement(seed)
			unknown := slices.Clone(parts)
			for i := range unknown {
				unknown[i].BytesIn = 0
			}
			counts, bytes, both := planBalance(brokers, parts, 0), planBalance(brokers, unknown, defaultBytesTolerance),
				planBalance(brokers, parts, defaultBytesTolerance)
			within := func(plan balancePlan, gap func([]balanceBroker, []balancePartition) int64, limit float64) int {
				if float64(gap(brokers, applied(parts, plan))) <= limit {
					return 1
				}
				return 0
			}
			heldCounts += within(counts, bytesGap, heldLimit)
			heldBytes += within(bytes, bytesGap, heldLimit)
			heldBoth += within(both, bytesGap, heldLimit)
			inBytes += within(bytes, rateGap, inLimit)
			inBoth += within(both, rateGap, inLimit)
			extraBytes += bytes.ReplicasMoved - counts.ReplicasMoved
			extraIn += both.ReplicasMoved - bytes.ReplicasMoved
		}
		b.ReportMetric(float64(heldCounts), "held-within-counts-only")
		b.ReportMetric(float64(heldBytes), "held-within-bytes")
		b.ReportMetric(float64(heldBoth), "held-within-both")
		b.ReportMetric(float64(inBytes), "in-within-bytes")
		b.ReportMetric(float64(inBoth), "in-within-both")
		b.ReportMetric(float64(extraBytes)/clusters, "bytes-moves/cluster")
		b.ReportMetric(float64(extraIn)/clusters, "in-moves/cluster")
	}
}
