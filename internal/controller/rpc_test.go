package controller

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"
)

// TestRPCClientCallsSideBySide: calls to one address do not wait for each other. The server answers
// no request until four are in flight at once, which a client that sends one call per address at a
// time never reaches; then every call returns, and the connections are kept for the next calls.
func TestRPCClientCallsSideBySide(t *testing.T) {
	const inFlight = 4
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	waiting := 0
	all := make(chan struct{})
	var served sync.WaitGroup
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			served.Add(1)
			go func() {
				defer served.Done()
				defer conn.Close()
				var kind [1]byte
				if _, err := conn.Read(kind[:]); err != nil || kind[0] != streamRPC {
					return
				}
				for {
					var req rpcRequest
					if err := readFrame(conn, &req); err != nil {
						return
					}
					mu.Lock()
					if waiting++; waiting == inFlight {
						close(all)
					}
					mu.Unlock()
					<-all
					if err := writeFrame(conn, rpcResponse{Body: []byte(`"ok"`)}); err != nil {
						return
					}
				}
			}()
		}
	}()
	c := newRPCClient(10*time.Second, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, inFlight)
	for range inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out string
			_, err := c.call(ctx, ln.Addr().String(), methodStatus, struct{}{}, &out)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("call: %v", err)
		}
	}
	c.mu.Lock()
	kept := len(c.idle[ln.Addr().String()])
	c.mu.Unlock()
	if kept != inFlight {
		t.Fatalf("%d connections kept after %d calls side by side, want %d", kept, inFlight, inFlight)
	}
	c.close()
	ln.Close()
	served.Wait()
}
