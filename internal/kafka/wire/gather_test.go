package wire

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"io"
	"net"
	"sync/atomic"
	"testing"

	"github.com/weir-mq/weir/internal/tlstest"
)

// countingConn counts the writes that reach a connection.
type countingConn struct {
	net.Conn
	writes atomic.Int32
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// TestRecordGathererFewWrites writes 1 MiB through a TLS server connection over a recordGatherer,
// once inside gather and once outside it: the client reads the same bytes both times, and gather
// takes a few socket writes where a plain write takes one per 16 KiB record.
func TestRecordGathererFewWrites(t *testing.T) {
	ca := tlstest.NewCA(t)
	serverRaw, clientRaw := net.Pipe()
	defer serverRaw.Close()
	defer clientRaw.Close()
	counted := &countingConn{Conn: serverRaw}
	g := &recordGatherer{Conn: counted}
	srv := tls.Server(g, &tls.Config{Certificates: []tls.Certificate{ca.Server(t, "broker").TLS(t)}, MinVersion: tls.VersionTLS12})
	cl := tls.Client(clientRaw, &tls.Config{RootCAs: ca.Pool, ServerName: "localhost", MinVersion: tls.VersionTLS12})
	handshook := make(chan error, 1)
	go func() { handshook <- srv.Handshake() }()
	if err := cl.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-handshook; err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 1<<20)
	_, _ = rand.Read(data)
	for _, gathered := range []bool{true, false} {
		before := counted.writes.Load()
		wrote := make(chan error, 1)
		go func() {
			write := func() error {
				_, err := srv.Write(data)
				return err
			}
			if gathered {
				wrote <- g.gather(write)
			} else {
				wrote <- write()
			}
		}()
		got := make([]byte, len(data))
		if _, err := io.ReadFull(cl, got); err != nil {
			t.Fatal(err)
		}
		if err := <-wrote; err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("gathered %v: the client read other bytes than were written", gathered)
		}
		writes := counted.writes.Load() - before
		records := int32(len(data) / tlsRecordBytes)
		switch {
		case gathered && writes > int32(len(data)/gatherBytes)+1:
			t.Errorf("gathered: %d socket writes for 1 MiB, want at most %d", writes, len(data)/gatherBytes+1)
		case !gathered && writes < records:
			t.Errorf("not gathered: %d socket writes for 1 MiB, want one per record (%d)", writes, records)
		}
	}
}
