package freeport

import (
	"net"
	"strconv"
	"testing"
)

// TestAddrsBelowEphemeralRange: the addresses are distinct, on loopback, below the kernel's
// ephemeral range, and free to bind once returned.
func TestAddrsBelowEphemeralRange(t *testing.T) {
	addrs, err := Addrs(20)
	if err != nil {
		t.Fatal(err)
	}
	floor := ephemeralFloor()
	seen := map[string]bool{}
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host != "127.0.0.1" {
			t.Fatalf("address %q: %v", a, err)
		}
		p, _ := strconv.Atoi(port)
		if floor-lowest >= 1000 && (p < lowest || p >= floor) {
			t.Errorf("port %d outside [%d, %d)", p, lowest, floor)
		}
		if seen[a] {
			t.Errorf("address %s returned twice", a)
		}
		seen[a] = true
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("bind %s: %v", a, err)
		}
		_ = ln.Close()
	}
}
