package group

import (
	"cmp"
	"slices"
)

// The server-side assignors of KIP-848 groups (docs/groups.md, "Assignors").
const (
	// AssignorUniform balances partition counts and keeps partitions with their previous owners; the
	// default.
	AssignorUniform = "uniform"
	// AssignorRange gives each topic's partitions in contiguous ranges, in member id order.
	AssignorRange = "range"
)

// assignors lists the assignors in order of preference: the first is the default, and wins ties.
var assignors = []string{AssignorUniform, AssignorRange}

// TopicInfo is what an assignor needs of a topic: its id and partition count.
type TopicInfo struct {
	ID         [16]byte
	Partitions int32
}

// TopicPartitions is partitions of one topic, named by id.
type TopicPartitions struct {
	TopicID    [16]byte
	Partitions []int32
}

// tidp is one partition of a topic named by id.
type tidp struct {
	id [16]byte
	p  int32
}

// partSet is a set of partitions.
type partSet map[tidp]struct{}

func (s partSet) has(tp tidp) bool {
	_, ok := s[tp]
	return ok
}

// intersects reports whether s and o share a partition.
func (s partSet) intersects(o partSet) bool {
	for tp := range s {
		if o.has(tp) {
			return true
		}
	}
	return false
}

// subsetOf reports whether every partition of s is in o.
func (s partSet) subsetOf(o partSet) bool {
	for tp := range s {
		if !o.has(tp) {
			return false
		}
	}
	return true
}

func (s partSet) equal(o partSet) bool { return len(s) == len(o) && s.subsetOf(o) }

// sorted returns s's partitions ordered by topic id, then partition.
func (s partSet) sorted() []tidp {
	out := make([]tidp, 0, len(s))
	for tp := range s {
		out = append(out, tp)
	}
	slices.SortFunc(out, compareTidp)
	return out
}

func compareTidp(a, b tidp) int {
	if c := slices.Compare(a.id[:], b.id[:]); c != 0 {
		return c
	}
	return cmp.Compare(a.p, b.p)
}

// byTopic is s as the wire carries it: one entry per topic, in topic id order, partitions ascending.
func (s partSet) byTopic() []TopicPartitions {
	out := []TopicPartitions{}
	for _, tp := range s.sorted() {
		if n := len(out); n > 0 && out[n-1].TopicID == tp.id {
			out[n-1].Partitions = append(out[n-1].Partitions, tp.p)
			continue
		}
		out = append(out, TopicPartitions{TopicID: tp.id, Partitions: []int32{tp.p}})
	}
	return out
}

func setOf(tps []TopicPartitions) partSet {
	s := partSet{}
	for _, t := range tps {
		for _, p := range t.Partitions {
			s[tidp{t.TopicID, p}] = struct{}{}
		}
	}
	return s
}

// assignMember is one member as an assignor sees it: its id and the names of the topics it subscribes
// to that exist.
type assignMember struct {
	id     string
	topics []string
}

// assign runs the named assignor. members are in id order; topics holds every subscribed topic's
// metadata; prev is the previous target assignment. Every member has an entry in the result.
func assign(name string, members []assignMember, topics map[string]TopicInfo, prev map[string]partSet) map[string]partSet {
	if name == AssignorRange {
		return assignRange(members, topics)
	}
	return assignUniform(members, topics, prev)
}

// subscribers returns, for each subscribed topic in name order, its subscribers in id order.
func subscribers(members []assignMember, topics map[string]TopicInfo) ([]string, map[string][]string) {
	subs := map[string][]string{}
	for _, m := range members {
		for _, t := range m.topics {
			if _, ok := topics[t]; ok {
				subs[t] = append(subs[t], m.id)
			}
		}
	}
	names := make([]string, 0, len(subs))
	for t := range subs {
		names = append(names, t)
	}
	slices.Sort(names)
	return names, subs
}

// assignRange gives each topic's partitions to its subscribers in contiguous ranges: with n
// partitions and k subscribers (in id order), the i-th gets n/k partitions, plus one when i < n%k.
func assignRange(members []assignMember, topics map[string]TopicInfo) map[string]partSet {
	out := make(map[string]partSet, len(members))
	for _, m := range members {
		out[m.id] = partSet{}
	}
	names, subs := subscribers(members, topics)
	for _, t := range names {
		info, ids := topics[t], subs[t]
		k := int32(len(ids))
		next := int32(0)
		for i, id := range ids {
			n := info.Partitions / k
			if int32(i) < info.Partitions%k {
				n++
			}
			for p := next; p < next+n; p++ {
				out[id][tidp{info.ID, p}] = struct{}{}
			}
			next += n
		}
	}
	return out
}

// assignUniform keeps each partition with its previous owner while that member still subscribes to
// the partition's topic, gives the others one at a time to the subscriber with the fewest partitions
// (ties: the lower member id), then moves partitions from a member to another subscriber of the
// partition's topic with at least two fewer, until no such move is left. Each move lowers the sum of
// the squared counts, so the last step ends.
func assignUniform(members []assignMember, topics map[string]TopicInfo, prev map[string]partSet) map[string]partSet {
	names, subs := subscribers(members, topics)
	counts := make(map[string]int, len(members))
	owner := map[tidp]string{}
	// eligible holds, per partition in order, the members subscribed to its topic.
	type part struct {
		tp       tidp
		eligible []string
	}
	var parts []part
	subscribed := map[tidp]map[string]bool{}
	for _, t := range names {
		info := topics[t]
		set := map[string]bool{}
		for _, id := range subs[t] {
			set[id] = true
		}
		for p := range info.Partitions {
			tp := tidp{info.ID, p}
			parts = append(parts, part{tp, subs[t]})
			subscribed[tp] = set
		}
	}
	for _, m := range members {
		for _, tp := range prev[m.id].sorted() {
			if subscribed[tp][m.id] {
				if _, taken := owner[tp]; !taken {
					owner[tp] = m.id
					counts[m.id]++
				}
			}
		}
	}
	fewest := func(ids []string) string {
		best := ids[0]
		for _, id := range ids[1:] {
			if counts[id] < counts[best] {
				best = id
			}
		}
		return best
	}
	for _, pt := range parts {
		if _, ok := owner[pt.tp]; !ok {
			id := fewest(pt.eligible)
			owner[pt.tp] = id
			counts[id]++
		}
	}
	for moved := true; moved; {
		moved = false
		for _, pt := range parts {
			from, to := owner[pt.tp], fewest(pt.eligible)
			if counts[from] > counts[to]+1 {
				owner[pt.tp] = to
				counts[from]--
				counts[to]++
				moved = true
			}
		}
	}
	out := make(map[string]partSet, len(members))
	for _, m := range members {
		out[m.id] = partSet{}
	}
	for tp, id := range owner {
		out[id][tp] = struct{}{}
	}
	return out
}
