package test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The kernel of these machines has no netem qdisc, so delay between nodes is made in user space: an
// iptables rule in a node's namespace hands every packet the node sends to another node to an
// NFQUEUE, and a delayer process inside that namespace holds each packet for the delay before it
// accepts it (netfilter's queue protocol over netlink, spoken here with the syscall package alone).
// The delayer is this test binary, started again with delayerEnv set; TestMain runs it instead of
// the tests.

// delayerEnv names the queue and the delay a delayer process serves: "QUEUE:MILLISECONDS".
const delayerEnv = "WEIR_TEST_DELAYER"

// delayQueue is the NFQUEUE number the lab's delay rules use.
const delayQueue = 7

// Netfilter's queue protocol (linux/netfilter/nfnetlink_queue.h).
const (
	nfnlSubsysQueue  = 3
	nfqnlMsgPacket   = 0
	nfqnlMsgVerdict  = 1
	nfqnlMsgConfig   = 2
	nfqaCfgCmd       = 1
	nfqaCfgParams    = 2
	nfqaCfgQueueLen  = 3
	nfqaPacketHdr    = 1
	nfqaVerdictHdr   = 2
	nfqnlCfgCmdBind  = 1
	nfqnlCopyMeta    = 1
	nfAccept         = 1
	delayerQueueLen  = 1 << 16
	delayerRecvBytes = 1 << 16
)

// delayedPacket is one queued packet and when to accept it.
type delayedPacket struct {
	id  uint32
	due time.Time
}

// runDelayer serves spec ("QUEUE:MILLISECONDS") until it is killed: every packet queued there is
// accepted the delay after it arrived, in arrival order. It returns the exit status.
func runDelayer(spec string) int {
	q, ms, ok := strings.Cut(spec, ":")
	queue, err1 := strconv.ParseUint(q, 10, 16)
	delay, err2 := strconv.Atoi(ms)
	if !ok || err1 != nil || err2 != nil {
		fmt.Fprintf(os.Stderr, "delayer: bad %s=%q\n", delayerEnv, spec)
		return 2
	}
	if err := delayPackets(uint16(queue), time.Duration(delay)*time.Millisecond); err != nil {
		fmt.Fprintln(os.Stderr, "delayer:", err)
		return 1
	}
	return 0
}

func delayPackets(queue uint16, delay time.Duration) error {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW, syscall.NETLINK_NETFILTER)
	if err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	// Room for bursts: a packet waits in the kernel's queue for its verdict, and its notice waits here.
	_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, 8<<20)
	if err := syscall.Bind(fd, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink bind: %w", err)
	}
	var mu sync.Mutex // serializes sends: the verdict goroutine and the config requests
	send := func(msgType uint16, flags uint16, attrs ...[]byte) error {
		mu.Lock()
		defer mu.Unlock()
		return syscall.Sendto(fd, nfqMessage(msgType, flags, queue, attrs...), 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK})
	}
	bind := []byte{nfqnlCfgCmdBind, 0, 0, 0}
	binary.BigEndian.PutUint16(bind[2:], syscall.AF_INET)
	params := binary.BigEndian.AppendUint32(nil, 0)
	params = append(params, nfqnlCopyMeta)
	qlen := binary.BigEndian.AppendUint32(nil, delayerQueueLen)
	if err := send(nfqnlMsgConfig, syscall.NLM_F_ACK, nlAttr(nfqaCfgCmd, bind)); err != nil {
		return fmt.Errorf("bind queue %d: %w", queue, err)
	}
	if err := send(nfqnlMsgConfig, syscall.NLM_F_ACK, nlAttr(nfqaCfgParams, params), nlAttr(nfqaCfgQueueLen, qlen)); err != nil {
		return fmt.Errorf("configure queue %d: %w", queue, err)
	}

	pending := make(chan delayedPacket, delayerQueueLen)
	errc := make(chan error, 1)
	go func() {
		for p := range pending {
			time.Sleep(time.Until(p.due))
			v := binary.BigEndian.AppendUint32(nil, nfAccept)
			v = binary.BigEndian.AppendUint32(v, p.id)
			if err := send(nfqnlMsgVerdict, 0, nlAttr(nfqaVerdictHdr, v)); err != nil {
				errc <- fmt.Errorf("verdict: %w", err)
				return
			}
		}
	}()
	buf := make([]byte, delayerRecvBytes)
	for {
		select {
		case err := <-errc:
			return err
		default:
		}
		n, _, err := syscall.Recvfrom(fd, buf, 0)
		if errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.EINTR) {
			// Notices were lost (their packets stay queued until the queue's instance goes away); go on.
			continue
		}
		if err != nil {
			return fmt.Errorf("receive: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return fmt.Errorf("parse: %w", err)
		}
		now := time.Now()
		for _, m := range msgs {
			switch m.Header.Type {
			case syscall.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if code := int32(binary.NativeEndian.Uint32(m.Data)); code != 0 {
						return fmt.Errorf("netlink: %w", syscall.Errno(-code))
					}
				}
			case nfnlSubsysQueue<<8 | nfqnlMsgPacket:
				if id, ok := packetID(m.Data); ok {
					pending <- delayedPacket{id: id, due: now.Add(delay)}
				}
			}
		}
	}
}

// nfqMessage is one nfnetlink request to queue: the netlink header, nfgenmsg and attrs.
func nfqMessage(msgType, flags, queue uint16, attrs ...[]byte) []byte {
	body := []byte{syscall.AF_UNSPEC, 0, 0, 0} // family, version NFNETLINK_V0, res_id (the queue)
	binary.BigEndian.PutUint16(body[2:], queue)
	for _, a := range attrs {
		body = append(body, a...)
	}
	h := make([]byte, syscall.NLMSG_HDRLEN)
	binary.NativeEndian.PutUint32(h[0:], uint32(syscall.NLMSG_HDRLEN+len(body)))
	binary.NativeEndian.PutUint16(h[4:], nfnlSubsysQueue<<8|msgType)
	binary.NativeEndian.PutUint16(h[6:], syscall.NLM_F_REQUEST|flags)
	return append(h, body...)
}

// nlAttr is one netlink attribute, padded to four bytes.
func nlAttr(typ uint16, payload []byte) []byte {
	a := make([]byte, 4, 4+len(payload)+3)
	binary.NativeEndian.PutUint16(a[0:], uint16(4+len(payload)))
	binary.NativeEndian.PutUint16(a[2:], typ)
	a = append(a, payload...)
	for len(a)%4 != 0 {
		a = append(a, 0)
	}
	return a
}

// packetID finds the packet id in a queued packet's notice: nfgenmsg, then attributes, one of them
// NFQA_PACKET_HDR whose first four bytes are the id.
func packetID(data []byte) (uint32, bool) {
	if len(data) < 4 {
		return 0, false
	}
	for b := data[4:]; len(b) >= 4; {
		l := int(binary.NativeEndian.Uint16(b[0:]))
		typ := binary.NativeEndian.Uint16(b[2:]) & 0x3fff
		if l < 4 || l > len(b) {
			return 0, false
		}
		if typ == nfqaPacketHdr && l >= 8 {
			return binary.BigEndian.Uint32(b[4:]), true
		}
		b = b[min((l+3)&^3, len(b)):]
	}
	return 0, false
}

// delayer is one running delayer process, in one node's namespace.
type delayer struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// delay holds every packet between nodes for d (in each direction, so a round trip between two
// nodes takes 2d more), until healFilters: iptables hands them to a delayer in each namespace.
func (l *netLab) delay(d time.Duration) {
	l.t.Helper()
	self, err := os.Executable()
	if err != nil {
		l.t.Fatalf("delay: %v", err)
	}
	for i := 1; i <= l.n; i++ {
		cmd := exec.Command("ip", "netns", "exec", l.netns(i), self, "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d:%d", delayerEnv, delayQueue, d.Milliseconds()))
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			l.t.Fatalf("delay: start the delayer of %s: %v", l.netns(i), err)
		}
		dl := &delayer{cmd: cmd, done: make(chan struct{})}
		go func() {
			_ = cmd.Wait()
			close(dl.done)
		}()
		l.delayers = append(l.delayers, dl)
		// The delayer binds its queue before the rule sends packets there; --queue-bypass lets packets
		// through while no delayer listens.
		time.Sleep(100 * time.Millisecond)
		select {
		case <-dl.done:
			l.t.Fatalf("delay: the delayer of %s exited: %s", l.netns(i), out.String())
		default:
		}
		for j := 1; j <= l.n; j++ {
			if i != j {
				l.iptables(i, "-A", "OUTPUT", "-d", l.addr(j), "-j", "NFQUEUE",
					"--queue-num", strconv.Itoa(delayQueue), "--queue-bypass")
			}
		}
	}
}

// stopDelayers ends the delayer processes (their filters must be gone first, or the packets they
// hold are dropped and retransmitted).
func (l *netLab) stopDelayers() {
	for _, d := range l.delayers {
		_ = d.cmd.Process.Kill()
		<-d.done
	}
	l.delayers = nil
}

// TestNetLabDelay checks the lab's delay: with 150 ms on each node's output, a TCP connection from
// namespace 1 to a node in namespace 2 takes at least a round trip of 300 ms (the SYN waits in
// namespace 1, the SYN-ACK in namespace 2), and it still succeeds; after healing, the delayers are
// gone and connections go on working.
func TestNetLabDelay(t *testing.T) {
	requireTool(t, "iptables")
	l := newNetLab(t, 2)
	n := startNode(t, nodeOptions{NodeID: 2, Ports: l.ports(2), Wrap: l.wrap(2)})
	const d = 150 * time.Millisecond
	l.delay(d)
	start := time.Now()
	if err := l.dialFrom(1, n.kafkaAddr()); err != nil {
		t.Fatalf("node 1 to node 2 through the delay: %v", err)
	}
	took := time.Since(start)
	if took < 2*d {
		t.Fatalf("connection through a %v delay each way took %v, want at least %v", d, took, 2*d)
	}
	t.Logf("a connection through a %v delay each way took %v", d, took.Round(time.Millisecond))
	l.healFilters()
	if len(l.delayers) != 0 {
		t.Fatalf("%d delayers still running after healing", len(l.delayers))
	}
	if err := l.dialFrom(1, n.kafkaAddr()); err != nil {
		t.Fatalf("node 1 to node 2 after healing: %v", err)
	}
}
