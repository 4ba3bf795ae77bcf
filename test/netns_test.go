package test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A netLab is a private network for one test: a bridge in the test's network namespace and one
// network namespace per node, each joined to the bridge by a veth pair. Addresses come from one
// /24 of 10.231.0.0/16 and exist only on the bridge (.254, where the test's clients send from) and
// inside the namespaces (.1, .2, ...), so nothing is routed anywhere else. Links between nodes are
// cut with blackhole routes inside the namespaces: a node's packets to a cut peer are dropped
// silently, as by a bad switch port, while the bridge's address, and so every client, still reaches
// every node. Everything it makes is removed at the test's cleanup, after the nodes started on it
// are killed (their cleanups run first).
type netLab struct {
	t      testing.TB
	prefix string // of every interface and namespace name, unique to this lab
	subnet string // the first three octets of the lab's /24
	n      int
	cut    map[[2]int]bool // cut links, as (lower, higher) node numbers
	// delayers are the running delayer processes of delay, stopped by healFilters and at cleanup.
	delayers []*delayer
}

// netLabSeq makes the names of the labs one test binary creates distinct.
var netLabSeq atomic.Int32

// Ports of a node inside its namespace; every node has its own address, so all use the same ones.
const (
	labKafkaPort      = 9092
	labHTTPPort       = 8080
	labControllerPort = 9093
)

// newNetLab creates the bridge and n namespaces, or skips the test when it cannot: not root, or
// no `ip netns`.
func newNetLab(t testing.TB, n int) *netLab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network fault tests create network namespaces: run as root")
	}
	requireTool(t, "ip")
	if out, err := exec.Command("ip", "netns", "list").CombinedOutput(); err != nil {
		t.Skipf("ip netns is unavailable: %v\n%s", err, out)
	}
	seq := netLabSeq.Add(1)
	l := &netLab{
		t:      t,
		prefix: "wf" + strconv.FormatInt(int64(os.Getpid()), 36) + strconv.FormatInt(int64(seq), 36),
		n:      n,
		cut:    map[[2]int]bool{},
	}
	l.subnet = freeSubnet(t, (os.Getpid()+int(seq))%250)
	t.Cleanup(l.stopDelayers)
	br := l.prefix + "br"
	l.ip("link", "add", br, "type", "bridge")
	t.Cleanup(func() { l.ipCleanup("link", "del", br) })
	l.ip("addr", "add", l.subnet+".254/24", "dev", br)
	l.ip("link", "set", br, "up")
	for i := 1; i <= n; i++ {
		ns, veth := l.netns(i), fmt.Sprintf("%sv%d", l.prefix, i)
		l.ip("netns", "add", ns)
		t.Cleanup(func() { l.ipCleanup("netns", "del", ns) })
		l.ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
		// Deleting one end deletes the pair at once; a deleted namespace frees its end later.
		t.Cleanup(func() { l.ipCleanup("link", "del", veth) })
		l.ip("link", "set", veth, "master", br, "up")
		l.ip("-n", ns, "addr", "add", l.addr(i)+"/24", "dev", "eth0")
		l.ip("-n", ns, "link", "set", "eth0", "up")
		l.ip("-n", ns, "link", "set", "lo", "up")
	}
	return l
}

// freeSubnet returns the first 10.231.K (from K = start, wrapping) that no address of this
// namespace is in, so that labs of test binaries running at once do not overlap.
func freeSubnet(t testing.TB, start int) string {
	t.Helper()
	out, err := exec.Command("ip", "-4", "-o", "addr", "show").CombinedOutput()
	if err != nil {
		t.Fatalf("ip addr show: %v\n%s", err, out)
	}
	for k := range 256 {
		s := fmt.Sprintf("10.231.%d", (start+k)%256)
		if !strings.Contains(string(out), " "+s+".") {
			return s
		}
	}
	t.Fatal("every /24 of 10.231.0.0/16 is in use")
	return ""
}

// netns is the name of node i's namespace (i from 1).
func (l *netLab) netns(i int) string { return fmt.Sprintf("%sn%d", l.prefix, i) }

// addr is node i's address.
func (l *netLab) addr(i int) string { return fmt.Sprintf("%s.%d", l.subnet, i) }

// ports are node i's listen addresses.
func (l *netLab) ports(i int) nodePorts {
	a := l.addr(i)
	return nodePorts{
		Kafka:      fmt.Sprintf("%s:%d", a, labKafkaPort),
		HTTP:       fmt.Sprintf("%s:%d", a, labHTTPPort),
		Controller: fmt.Sprintf("%s:%d", a, labControllerPort),
	}
}

// wrap runs a node's binary inside node i's namespace.
func (l *netLab) wrap(i int) []string { return []string{"ip", "netns", "exec", l.netns(i)} }

// cutLink drops every packet between nodes a and b, both ways.
func (l *netLab) cutLink(a, b int) {
	l.t.Helper()
	k := [2]int{min(a, b), max(a, b)}
	if a == b || l.cut[k] {
		return
	}
	l.ip("-n", l.netns(a), "route", "add", "blackhole", l.addr(b)+"/32")
	l.ip("-n", l.netns(b), "route", "add", "blackhole", l.addr(a)+"/32")
	l.cut[k] = true
}

// healLink undoes cutLink.
func (l *netLab) healLink(a, b int) {
	l.t.Helper()
	k := [2]int{min(a, b), max(a, b)}
	if !l.cut[k] {
		return
	}
	l.ip("-n", l.netns(a), "route", "del", "blackhole", l.addr(b)+"/32")
	l.ip("-n", l.netns(b), "route", "del", "blackhole", l.addr(a)+"/32")
	delete(l.cut, k)
}

// isolate cuts node a from every other node.
func (l *netLab) isolate(a int) {
	l.t.Helper()
	for b := 1; b <= l.n; b++ {
		l.cutLink(a, b)
	}
}

// healAll heals every cut link.
func (l *netLab) healAll() {
	l.t.Helper()
	for k := range l.cut {
		l.healLink(k[0], k[1])
	}
}

// lossy drops each packet between nodes with probability p (iptables' statistic match in every
// node's namespace, on what it sends to the other nodes; packets to and from the clients pass), until
// healFilters.
func (l *netLab) lossy(p float64) {
	l.t.Helper()
	for i := 1; i <= l.n; i++ {
		for j := 1; j <= l.n; j++ {
			if i != j {
				l.iptables(i, "-A", "OUTPUT", "-d", l.addr(j), "-m", "statistic", "--mode", "random",
					"--probability", strconv.FormatFloat(p, 'f', 3, 64), "-j", "DROP")
			}
		}
	}
}

// dropOneWay drops every packet node a sends to node b, while b's packets still reach a, until
// healFilters: an asymmetric fault (over TCP, b's requests arrive and their answers never do).
func (l *netLab) dropOneWay(a, b int) {
	l.t.Helper()
	l.iptables(a, "-A", "OUTPUT", "-d", l.addr(b), "-j", "DROP")
}

// healFilters removes every packet filter of lossy, dropOneWay and delay, and stops the delayers.
func (l *netLab) healFilters() {
	l.t.Helper()
	for i := 1; i <= l.n; i++ {
		l.iptables(i, "-F", "OUTPUT")
	}
	l.stopDelayers()
}

// iptables runs iptables inside node i's namespace and fails the test if it fails.
func (l *netLab) iptables(i int, args ...string) {
	l.t.Helper()
	argv := append([]string{"netns", "exec", l.netns(i), "iptables"}, args...)
	if out, err := exec.Command("ip", argv...).CombinedOutput(); err != nil {
		l.t.Fatalf("iptables in %s: %s: %v\n%s", l.netns(i), strings.Join(args, " "), err, out)
	}
}

// ip runs `ip args...` and fails the test if it fails.
func (l *netLab) ip(args ...string) {
	l.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// ipCleanup runs `ip args...` at cleanup, where a failure is reported but the other removals go on.
func (l *netLab) ipCleanup(args ...string) {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.t.Errorf("cleanup: ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// dialFrom opens a TCP connection from inside node i's namespace to addr (host:port) and closes
// it, giving up after two seconds.
func (l *netLab) dialFrom(i int, addr string) error {
	host, port, _ := strings.Cut(addr, ":")
	out, err := exec.Command("ip", "netns", "exec", l.netns(i), "timeout", "2",
		"bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/%s/%s", host, port)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

// TestNetLab checks the lab itself with a single-node weir in namespace 2: the client and
// namespace 1 reach it; a cut link stops namespace 1 reaching it while the client still does;
// healing restores the link; and no interface or namespace of the lab is left once its test ends.
func TestNetLab(t *testing.T) {
	var l *netLab
	t.Run("lab", func(t *testing.T) {
		l = newNetLab(t, 2)
		n := startNode(t, nodeOptions{NodeID: 2, Ports: l.ports(2), Wrap: l.wrap(2)})
		clientDial := func() {
			c, err := net.DialTimeout("tcp", n.kafkaAddr(), 2*time.Second)
			if err != nil {
				t.Fatalf("client to node 2: %v", err)
			}
			c.Close()
		}
		clientDial()
		if err := l.dialFrom(1, n.kafkaAddr()); err != nil {
			t.Fatalf("node 1 to node 2 before the cut: %v", err)
		}
		l.cutLink(1, 2)
		if err := l.dialFrom(1, n.kafkaAddr()); err == nil {
			t.Fatal("node 1 reached node 2 across a cut link")
		}
		clientDial()
		l.healAll()
		if err := l.dialFrom(1, n.kafkaAddr()); err != nil {
			t.Fatalf("node 1 to node 2 after healing: %v", err)
		}
	})
	if l == nil {
		return
	}
	out, err := exec.Command("ip", "-o", "link", "show").CombinedOutput()
	if err != nil {
		t.Fatalf("ip link show: %v\n%s", err, out)
	}
	ns, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v\n%s", err, ns)
	}
	if strings.Contains(string(out)+string(ns), l.prefix) {
		t.Errorf("left behind by the lab %s:\n%s%s", l.prefix, out, ns)
	}
}
