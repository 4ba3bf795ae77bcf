package test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// dropProposals drops, until healFilters, every packet node a sends to another node's controller
// port that carries a controller RPC proposal (iptables' string match on the request's
// `"method":"propose"`), and nothing else: node a's Raft traffic and its broker heartbeats go on,
// so it keeps its lease and leads, but every command it asks the controller leader to commit
// (AlterPartition among them) hangs until its call times out. A TCP segment that carries a
// proposal is dropped at every retransmission too, so the connection stalls while the rule holds.
func (l *netLab) dropProposals(a int) {
	l.t.Helper()
	for b := 1; b <= l.n; b++ {
		if b != a {
			l.iptables(a, "-A", "OUTPUT", "-p", "tcp", "-d", l.addr(b), "--dport", strconv.Itoa(labControllerPort),
				"-m", "string", "--algo", "bm", "--string", `"method":"propose"`, "-j", "DROP")
		}
	}
}

// isrHas reports whether the ISR of partition p, as its leader names it, holds node id.
func (c *netCluster) isrHas(ctx context.Context, p, id int32) bool {
	_, pp := c.leaderOf(ctx, p)
	return slices.Contains(pp.ISR, id)
}

// isrChangeFails makes the ISR changes of one partition leader fail while it leads and its followers
// fetch: the leader of a partition, not the controller leader, has its proposals to the controller
// dropped (dropProposals). First its ISR cannot grow: the third node, cut from the leader until it
// has left the ISR, fetches again and catches up while the proposals are dropped for 8 s, and must
// stay out of the ISR. Then its ISR cannot shrink: with the proposals dropped, the leader is cut
// from that node for 8 s, and the node must stay in the ISR, so acks=all writes to the partition
// wait until the link heals. Neither may cost a record.
func isrChangeFails(ctx context.Context, c *netCluster) {
	requireTool(c.t, "iptables")
	ctl := controllerOf(ctx, c.t, c.nodes, c.live)
	p, l := int32(-1), (*node)(nil)
	for q := range int32(netPartitions) {
		if n, _ := c.leaderOf(ctx, q); n != ctl {
			p, l = q, n
			break
		}
	}
	if l == nil {
		c.t.Fatalf("the controller leader, node %d, leads every partition", ctl.id)
	}
	var x *node
	for _, n := range c.nodes {
		if n != l && n != ctl {
			x = n
		}
	}
	c.fault(ctx, fmt.Sprintf("ISR growth fails: node %d (leads partition %d) cut from node %d until it leaves the ISR, then healed with node %d's proposals dropped, 8s",
		l.id, p, x.id, l.id), func() {
		c.lab.cutLink(int(l.id), int(x.id))
		for c.isrHas(ctx, p, x.id) {
			if ctx.Err() != nil {
				c.t.Fatalf("node %d never left the ISR of partition %d", x.id, p)
			}
			time.Sleep(100 * time.Millisecond)
		}
		c.lab.dropProposals(int(l.id))
		c.lab.healAll()
		time.Sleep(8 * time.Second)
		if c.isrHas(ctx, p, x.id) {
			c.t.Errorf("node %d rejoined the ISR of partition %d while its leader's proposals were dropped: the fault did not hold", x.id, p)
		}
		c.lab.healFilters()
	})
	c.fault(ctx, fmt.Sprintf("ISR shrink fails: node %d (leads partition %d) has its proposals dropped and is cut from node %d, 8s",
		l.id, p, x.id), func() {
		c.lab.dropProposals(int(l.id))
		c.lab.cutLink(int(l.id), int(x.id))
		time.Sleep(8 * time.Second)
		if !c.isrHas(ctx, p, x.id) {
			c.t.Errorf("node %d left the ISR of partition %d while its leader's proposals were dropped: the fault did not hold", x.id, p)
		}
		c.lab.healAll()
		c.lab.healFilters()
	})
}
