package server

import (
	"net"
	"sync"
)

// countListener returns ln counting its connections in weir_kafka_connections and
// weir_kafka_connections_accepted_total.
func (m *metrics) countListener(ln net.Listener) net.Listener {
	return countingListener{Listener: ln, m: m}
}

// countingListener counts the connections its listener accepts and those still open.
type countingListener struct {
	net.Listener
	m *metrics
}

// Accept counts the accepted connection as open until its first Close.
func (l countingListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.m.connsOpened.Inc()
	l.m.connsOpen.Inc()
	return &countedConn{Conn: nc, m: l.m}, nil
}

// countedConn is an accepted connection that leaves weir_kafka_connections when closed.
type countedConn struct {
	net.Conn
	m    *metrics
	once sync.Once
}

// NetConn returns the wrapped connection: countedConn writes bytes unchanged, so the wire may send
// fetched records on it directly (sendfile).
func (c *countedConn) NetConn() net.Conn { return c.Conn }

// Close closes the connection; the first call counts it closed.
func (c *countedConn) Close() error {
	c.once.Do(c.m.connsOpen.Dec)
	return c.Conn.Close()
}
