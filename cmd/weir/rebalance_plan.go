package main

import (
	"cmp"
	"slices"
)

// This file is `weir cluster rebalance`'s planner: a pure function from the cluster's brokers and
// partitions to the replica lists that even them out. It reads nothing and sends nothing.
//
// It works in four passes, each moving as little as it can:
//
//  1. racks: where every broker has a rack, a partition with two replicas in one rack while a rack it
//     does not use exists has one of them moved to the least loaded broker of such a rack;
//  2. replicas: while the most and the least loaded brokers differ by two or more replicas, one replica
//     moves from a most loaded broker to a least loaded one (preferring a topic the first holds more
//     of, then the smallest partition, so that topics spread too and as few bytes as possible are
//     copied), never into a rack the partition already uses unless it leaves one;
//  3. bytes: while the brokers holding the most and the fewest bytes differ by more than the
//     tolerance (a fraction of the mean), they exchange a replica each, the pair whose difference in
//     size comes nearest half their gap, so that replica counts stay as they are; then the same for
//     the bytes written to them per second (bytes-in), with exchanges that keep the bytes held within
//     the tolerance;
//  4. leaders: the preferred leader (the first replica) changes by reordering replica lists, which
//     copies nothing; a broker preferred by two or more partitions more than another hands one over
//     along a chain of partitions that share a replica (an augmenting path), until the counts are
//     within one. The replica pass helps: a broker preferred too often gives away a preferred
//     replica, others a follower. Counts within one are reached when every partition has two or more
//     replicas (or every one has one); partitions of one replica mixed with larger ones can leave
//     a broker two ahead.
//
// Every partition keeps its replication factor. Replicas on brokers the planner was not given (not
// registered, or fenced) stay where they are and count for no broker.

// balanceBroker is a broker the planner may place replicas on.
type balanceBroker struct {
	ID int32
	// Rack is the broker's rack; racks count only when every broker has one.
	Rack string
}

// balancePartition is one partition's placement as the planner reads and writes it.
type balancePartition struct {
	Topic     string
	Partition int32
	Replicas  []int32
	// Bytes is the partition's size (its largest replica's), the cost of copying it.
	Bytes int64
	// BytesIn is the bytes written to the partition per second, as measured (0 when unknown); every
	// replica appends them.
	BytesIn int64
}

// balancePlan is the planner's answer: the partitions whose replica list changes, in their input
// order, and what the change costs.
type balancePlan struct {
	Partitions []balancePartition
	// ReplicasMoved counts the replicas placed on a broker that did not hold them, BytesMoved their
	// bytes.
	ReplicasMoved int
	BytesMoved    int64
	// LeadersMoved counts the partitions whose preferred leader changes.
	LeadersMoved int
}

// balancer is the planner's working state.
type balancer struct {
	ids      []int32 // brokers, sorted
	rack     map[int32]string
	nRacks   int // distinct racks, 0 when racks do not count
	known    map[int32]bool
	parts    []balancePartition // working copies of the replica lists
	replicas map[int32]int      // replicas per broker
	leaders  map[int32]int      // preferred leaderships per broker
	pos      map[int32]int      // index of a broker in ids
	topicOf  []int              // index of each partition's topic in inTopic
	inTopic  [][]int            // replicas per topic and broker (by index in ids)
}

// planBalance plans the moves that even out replicas, bytes held and bytes-in (each to within
// bytesTolerance times the mean of a broker; 0 leaves both as the replica moves put them) and preferred
// leaders across brokers, keeping replicas of a partition in distinct racks where the racks allow it.
// parts is not modified.
func planBalance(brokers []balanceBroker, parts []balancePartition, bytesTolerance float64) balancePlan {
	b := newBalancer(brokers, parts)
	if len(b.ids) == 0 {
		return balancePlan{}
	}
	b.spreadRacks()
	b.evenReplicas()
	b.evenLoad(bytesTolerance, sizeOf, 0, nil)
	b.evenLoad(bytesTolerance, rateOf, rateFloor, sizeOf)
	b.evenLeaders()
	var plan balancePlan
	for i, p := range parts {
		np := b.parts[i]
		if slices.Equal(p.Replicas, np.Replicas) {
			continue
		}
		for _, r := range np.Replicas {
			if !slices.Contains(p.Replicas, r) {
				plan.ReplicasMoved++
				plan.BytesMoved += p.Bytes
			}
		}
		if p.Replicas[0] != np.Replicas[0] {
			plan.LeadersMoved++
		}
		plan.Partitions = append(plan.Partitions, np)
	}
	return plan
}

// applied is parts with the plan's replica lists in place.
func applied(parts []balancePartition, plan balancePlan) []balancePartition {
	out := slices.Clone(parts)
	for _, np := range plan.Partitions {
		for i, p := range out {
			if p.Topic == np.Topic && p.Partition == np.Partition {
				out[i].Replicas = np.Replicas
			}
		}
	}
	return out
}

func newBalancer(brokers []balanceBroker, parts []balancePartition) *balancer {
	b := &balancer{rack: map[int32]string{}, known: map[int32]bool{}, replicas: map[int32]int{}, leaders: map[int32]int{},
		pos: map[int32]int{}}
	racks := map[string]bool{}
	racked := true
	for _, br := range brokers {
		if b.known[br.ID] {
			continue
		}
		b.known[br.ID] = true
		b.ids = append(b.ids, br.ID)
		b.rack[br.ID] = br.Rack
		racks[br.Rack] = true
		racked = racked && br.Rack != ""
	}
	slices.Sort(b.ids)
	for i, id := range b.ids {
		b.pos[id] = i
	}
	topics := map[string]int{}
	if racked {
		b.nRacks = len(racks)
	}
	b.parts = make([]balancePartition, len(parts))
	b.topicOf = make([]int, len(parts))
	for i, p := range parts {
		p.Replicas = slices.Clone(p.Replicas)
		b.parts[i] = p
		ti, ok := topics[p.Topic]
		if !ok {
			ti = len(b.inTopic)
			topics[p.Topic] = ti
			b.inTopic = append(b.inTopic, make([]int, len(b.ids)))
		}
		b.topicOf[i] = ti
		for _, r := range p.Replicas {
			if b.known[r] {
				b.replicas[r]++
				b.inTopic[ti][b.pos[r]]++
			}
		}
		if len(p.Replicas) > 0 && b.known[p.Replicas[0]] {
			b.leaders[p.Replicas[0]]++
		}
	}
	return b
}

// collisions is how many of replicas share a rack with an earlier one (0 when racks do not count).
func (b *balancer) collisions(replicas []int32) int {
	if b.nRacks == 0 {
		return 0
	}
	n := 0
	for i, r := range replicas {
		if !b.known[r] {
			continue
		}
		for _, o := range replicas[:i] {
			if b.known[o] && b.rack[o] == b.rack[r] {
				n++
				break
			}
		}
	}
	return n
}

// fits reports whether replacing replicas[i] with dst keeps dst out of the partition and adds no rack
// collision.
func (b *balancer) fits(replicas []int32, i int, dst int32) bool {
	if slices.Contains(replicas, dst) {
		return false
	}
	if b.nRacks == 0 {
		return true
	}
	after := slices.Clone(replicas)
	after[i] = dst
	return b.collisions(after) <= b.collisions(replicas)
}

// move puts dst in place of the replica at index i of partition pi.
func (b *balancer) move(pi, i int, dst int32) {
	p := &b.parts[pi]
	src := p.Replicas[i]
	b.replicas[src]--
	b.replicas[dst]++
	b.inTopic[b.topicOf[pi]][b.pos[src]]--
	b.inTopic[b.topicOf[pi]][b.pos[dst]]++
	if i == 0 {
		b.leaders[src]--
		b.leaders[dst]++
	}
	p.Replicas[i] = dst
}

// byLoad is the brokers sorted by replicas, the least loaded (then the lowest id) first.
func (b *balancer) byLoad() []int32 {
	ids := slices.Clone(b.ids)
	slices.SortStableFunc(ids, func(x, y int32) int { return cmp.Compare(b.replicas[x], b.replicas[y]) })
	return ids
}

// spreadRacks moves a replica that shares its rack with another of the partition's replicas to the
// least loaded broker of a rack the partition does not use, where there is one.
func (b *balancer) spreadRacks() {
	if b.nRacks == 0 {
		return
	}
	for pi := range b.parts {
		p := &b.parts[pi]
		for i := len(p.Replicas) - 1; i >= 0; i-- {
			if !b.known[p.Replicas[i]] || !b.sharesRack(p.Replicas, i) {
				continue
			}
			for _, dst := range b.byLoad() {
				if b.fits(p.Replicas, i, dst) && b.collisions(withAt(p.Replicas, i, dst)) < b.collisions(p.Replicas) {
					b.move(pi, i, dst)
					break
				}
			}
		}
	}
}

// sharesRack reports whether replicas[i]'s rack holds another of replicas.
func (b *balancer) sharesRack(replicas []int32, i int) bool {
	for j, o := range replicas {
		if j != i && b.known[o] && b.rack[o] == b.rack[replicas[i]] {
			return true
		}
	}
	return false
}

// withAt is a copy of replicas with dst at index i.
func withAt(replicas []int32, i int, dst int32) []int32 {
	c := slices.Clone(replicas)
	c[i] = dst
	return c
}

// evenReplicas moves one replica at a time from a most loaded broker to a least loaded one until the
// counts are within one, or no move fits the racks.
func (b *balancer) evenReplicas() {
	for {
		order := b.byLoad()
		moved := false
		for si := len(order) - 1; si >= 0 && !moved; si-- {
			src := order[si]
			for _, dst := range order {
				if b.replicas[src]-b.replicas[dst] < 2 {
					break
				}
				if pi, i, ok := b.cheapest(src, dst); ok {
					b.move(pi, i, dst)
					moved = true
					break
				}
			}
		}
		if !moved {
			return
		}
	}
}

// cheapest picks the replica on src that moves to dst best: a preferred leader when src is preferred
// by two or more partitions more than dst and a follower otherwise (a partition of one replica can
// even out leaders only by moving), then one of a topic src holds two or more replicas more of than
// dst (so that each topic spreads too), then the smallest partition, then the earliest in the input.
func (b *balancer) cheapest(src, dst int32) (int, int, bool) {
	wantLeader := b.leaders[src]-b.leaders[dst] >= 2
	si, di := b.pos[src], b.pos[dst]
	best, bestI := -1, -1
	var bestLeader, bestTopic bool
	for pi, p := range b.parts {
		i := slices.Index(p.Replicas, src)
		if i < 0 || !b.fits(p.Replicas, i, dst) {
			continue
		}
		inTopic := b.inTopic[b.topicOf[pi]]
		leader, topic := (i == 0) == wantLeader, inTopic[si]-inTopic[di] >= 2
		better := best < 0
		switch {
		case better:
		case leader != bestLeader:
			better = leader
		case topic != bestTopic:
			better = topic
		default:
			better = p.Bytes < b.parts[best].Bytes
		}
		if better {
			best, bestI, bestLeader, bestTopic = pi, i, leader, topic
		}
	}
	return best, bestI, best >= 0
}

// load is one of the quantities the exchange passes even out: a partition's share of it on every
// broker holding a replica.
type load func(p *balancePartition) int64

func sizeOf(p *balancePartition) int64 { return p.Bytes }
func rateOf(p *balancePartition) int64 { return p.BytesIn }

// rateFloor is the gap in bytes-in below which brokers count as even whatever the tolerance: a
// measured rate of a few KiB/s is noise, not a reason to copy a partition.
const rateFloor = 64 << 10

// evenLoad exchanges replicas between the broker carrying the most of what and the one carrying the
// least while their gap is more than tolerance times the mean a broker carries and more than floor: each exchange moves a replica of a partition P from the first to the second and
// one of a partition Q carrying less back, chosen so that what(P) - what(Q) comes nearest half the gap
// (each exchange narrows it, so the loop ends), the fewest bytes copied among equals. An exchange never
// adds a rack collision, never spreads a topic further (P and Q of one topic, or each moving from a
// broker holding more of its topic to one holding fewer), and, with keep set, never leaves the
// brokers' gap in keep wider than tolerance times its mean. It stops when no exchange between those two
// brokers fits, even if others would.
func (b *balancer) evenLoad(tolerance float64, what load, floor int64, keep load) {
	if tolerance <= 0 {
		return
	}
	for range len(b.parts) {
		carried := b.carried(what)
		hi, lo := b.ids[0], b.ids[0]
		var total int64
		for _, id := range b.ids {
			total += carried[id]
			if carried[id] > carried[hi] {
				hi = id
			}
			if carried[id] < carried[lo] {
				lo = id
			}
		}
		gap := carried[hi] - carried[lo]
		if float64(gap) <= tolerance*float64(total)/float64(len(b.ids)) || gap <= floor {
			return
		}
		x := exchangeRule{hi: hi, lo: lo, gap: gap, what: what}
		if keep != nil {
			x.keep, x.kept = keep, b.carried(keep)
			var keptTotal int64
			for _, id := range b.ids {
				keptTotal += x.kept[id]
			}
			x.keepLimit = int64(tolerance * float64(keptTotal) / float64(len(b.ids)))
		}
		ex, ok := b.bestExchange(x)
		if !ok {
			return
		}
		b.move(ex.p, ex.i, lo)
		b.move(ex.q, ex.j, hi)
	}
}

// carried is what of the partitions each broker holds a replica of.
func (b *balancer) carried(what load) map[int32]int64 {
	held := make(map[int32]int64, len(b.ids))
	for i := range b.parts {
		p := &b.parts[i]
		for _, r := range p.Replicas {
			if b.known[r] {
				held[r] += what(p)
			}
		}
	}
	return held
}

// exchange is a replica of partition p (at index i) moving from one broker to another and one of
// partition q (at index j) moving back.
type exchange struct{ p, i, q, j int }

// exchangeRule is what an exchange between hi and lo must do: narrow their gap in what, and, with
// keep set, leave no two brokers' kept (keep per broker) further apart than keepLimit.
type exchangeRule struct {
	hi, lo    int32
	gap       int64
	what      load
	keep      load
	kept      map[int32]int64
	keepLimit int64
}

// keeps reports whether moving a difference of d in keep from hi to lo leaves the brokers' spread in
// keep within the limit.
func (b *balancer) keeps(x exchangeRule, d int64) bool {
	top, bottom := x.kept[x.hi]-d, x.kept[x.lo]+d
	lowest, highest := min(top, bottom), max(top, bottom)
	for _, id := range b.ids {
		if id != x.hi && id != x.lo {
			lowest, highest = min(lowest, x.kept[id]), max(highest, x.kept[id])
		}
	}
	return highest-lowest <= x.keepLimit
}

// bestExchange picks the exchange between x.hi and x.lo whose difference in x.what comes nearest half
// the gap (strictly between 0 and the gap), the fewest bytes copied among equals.
func (b *balancer) bestExchange(x exchangeRule) (exchange, bool) {
	hi, lo, gap := x.hi, x.lo, x.gap
	type candidate struct{ part, at int }
	var from, to []candidate
	for pi, p := range b.parts {
		if i := slices.Index(p.Replicas, hi); i >= 0 && b.fits(p.Replicas, i, lo) {
			from = append(from, candidate{pi, i})
		}
		if j := slices.Index(p.Replicas, lo); j >= 0 && b.fits(p.Replicas, j, hi) {
			to = append(to, candidate{pi, j})
		}
	}
	var best exchange
	var bestMiss, bestCost int64 = -1, 0
	hp, lp := b.pos[hi], b.pos[lo]
	for _, p := range from {
		pp := &b.parts[p.part]
		for _, q := range to {
			qp := &b.parts[q.part]
			d := x.what(pp) - x.what(qp)
			if d <= 0 || d >= gap {
				continue
			}
			tp, tq := b.inTopic[b.topicOf[p.part]], b.inTopic[b.topicOf[q.part]]
			if b.topicOf[p.part] != b.topicOf[q.part] && (tp[hp] <= tp[lp] || tq[lp] <= tq[hp]) {
				continue
			}
			if x.keep != nil && !b.keeps(x, x.keep(pp)-x.keep(qp)) {
				continue
			}
			miss, cost := abs(gap-2*d), pp.Bytes+qp.Bytes
			if bestMiss < 0 || miss < bestMiss || miss == bestMiss && cost < bestCost {
				best, bestMiss, bestCost = exchange{p.part, p.at, q.part, q.at}, miss, cost
			}
		}
	}
	return best, bestMiss >= 0
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// evenLeaders hands preferred leaderships from brokers with two or more than another along chains of
// partitions, reordering replica lists, until the counts are within one.
func (b *balancer) evenLeaders() {
	for {
		order := slices.Clone(b.ids)
		slices.SortStableFunc(order, func(x, y int32) int { return cmp.Compare(b.leaders[y], b.leaders[x]) })
		improved := false
		for _, src := range order {
			if path := b.leaderPath(src); path != nil {
				for _, step := range path {
					b.promote(step.part, step.to)
				}
				improved = true
				break
			}
		}
		if !improved {
			return
		}
	}
}

// leaderStep makes broker to the preferred leader of partition part.
type leaderStep struct {
	part int
	to   int32
}

// leaderPath finds, breadth first, a chain of partitions from src to a broker preferred at least two
// times fewer than src: the first partition is preferred on src and holds the next broker, and so on.
// It returns nil when there is none.
func (b *balancer) leaderPath(src int32) []leaderStep {
	type via struct {
		from int32
		step leaderStep
	}
	prev := map[int32]via{src: {}}
	queue := []int32{src}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		if b.leaders[u] <= b.leaders[src]-2 {
			var path []leaderStep
			for v := u; v != src; v = prev[v].from {
				path = append(path, prev[v].step)
			}
			slices.Reverse(path)
			return path
		}
		for pi, p := range b.parts {
			if len(p.Replicas) == 0 || p.Replicas[0] != u {
				continue
			}
			for _, v := range p.Replicas[1:] {
				if _, seen := prev[v]; !seen && b.known[v] {
					prev[v] = via{from: u, step: leaderStep{part: pi, to: v}}
					queue = append(queue, v)
				}
			}
		}
	}
	return nil
}

// promote swaps broker to into the first place of partition pi's replicas.
func (b *balancer) promote(pi int, to int32) {
	r := b.parts[pi].Replicas
	i := slices.Index(r, to)
	b.leaders[r[0]]--
	b.leaders[to]++
	r[0], r[i] = r[i], r[0]
}
