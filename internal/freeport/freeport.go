// Package freeport picks loopback addresses for tests that start a listener later, or in another
// process, than they pick its port: a weir process started with --kafka-addr, a cluster whose voters
// must know each other's controller addresses before any of them runs.
//
// A port the kernel hands out for ":0" lies in its ephemeral range, the range it also draws from for
// the local end of every outgoing connection, so between the pick and the bind any connection on the
// machine can take it ("bind: address already in use"). The ports picked here lie below that range,
// where only another explicit bind can take them.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"

	"github.com/weir-mq/weir/internal/vfs"
)

// lowest is the lowest port picked: below it sit the well-known and commonly configured services.
const lowest = 10000

// ephemeralFloor is where the kernel's ephemeral range starts, read from Linux's
// ip_local_port_range; 32768 (Linux's default low end) where that cannot be read.
func ephemeralFloor() int {
	b, err := vfs.ReadFile(vfs.OS, "/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				return n
			}
		}
	}
	return 32768
}

// Addrs returns n distinct 127.0.0.1 addresses whose ports were free when it bound each of them,
// below the ephemeral range when the range leaves room there, else from the kernel's ":0".
func Addrs(n int) ([]string, error) {
	floor := ephemeralFloor()
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	out := make([]string, 0, n)
	for tries := 0; len(out) < n; tries++ {
		if tries > 100*n {
			return nil, fmt.Errorf("freeport: no free port found in %d tries", tries)
		}
		addr := "127.0.0.1:0"
		if floor-lowest >= 1000 {
			addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(lowest+rand.IntN(floor-lowest)))
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	return out, nil
}
