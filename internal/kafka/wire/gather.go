package wire

import (
	"net"
	"sync"
)

const (
	// tlsRecordBytes is the most plaintext one TLS record carries: a response larger than this is
	// sealed into several records.
	tlsRecordBytes = 16 << 10
	// gatherBytes is how many bytes of sealed records a recordGatherer holds before it writes them
	// to the socket.
	gatherBytes = 256 << 10
)

var gatherBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, gatherBytes)
	return &b
}}

// recordGatherer is the socket under a TLS server connection. crypto/tls writes each record to its
// socket as soon as it is sealed, so a 1 MiB fetch response took 64 write system calls and woke the
// client as many times. While the connection's writer writes one large response (gather), the
// records gather in a pooled buffer and reach the socket gatherBytes at a time; any other write
// (the handshake, an alert, a key update) goes straight through, or, if it comes during gather,
// after the records sealed before it.
type recordGatherer struct {
	net.Conn
	mu sync.Mutex
	// buf holds the records sealed since gather began; nil outside gather.
	buf *[]byte
}

// Write writes b to the socket, or adds it to the records gathered.
func (g *recordGatherer) Write(b []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.buf == nil {
		return g.Conn.Write(b)
	}
	if len(*g.buf)+len(b) > cap(*g.buf) {
		if err := g.writeGathered(); err != nil {
			return 0, err
		}
		if len(b) > cap(*g.buf) {
			return g.Conn.Write(b)
		}
	}
	*g.buf = append(*g.buf, b...)
	return len(b), nil
}

// writeGathered writes the records gathered to the socket; g.mu is held.
func (g *recordGatherer) writeGathered() error {
	_, err := g.Conn.Write(*g.buf)
	*g.buf = (*g.buf)[:0]
	return err
}

// gather runs write, which writes to the TLS connection above g, and writes the records it sealed
// to the socket in as few writes as gatherBytes allows. If write fails, what it gathered is dropped:
// the connection is closed after a failed write.
func (g *recordGatherer) gather(write func() error) error {
	g.mu.Lock()
	g.buf = gatherBufs.Get().(*[]byte)
	g.mu.Unlock()
	err := write()
	g.mu.Lock()
	defer g.mu.Unlock()
	if err == nil {
		err = g.writeGathered()
	}
	*g.buf = (*g.buf)[:0]
	gatherBufs.Put(g.buf)
	g.buf = nil
	return err
}
