package test

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// stalledConns is how many connections TestAbuseSecure leaves stalled in a handshake at once.
const stalledConns = 50

// dialSecure opens a TCP connection to the SASL_SSL listener; with handshake set, it completes TLS.
func dialSecure(t *testing.T, s *secure, handshake bool) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", s.addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", s.addr, err)
	}
	t.Cleanup(func() { nc.Close() })
	if !handshake {
		return &rawConn{t: t, conn: nc}
	}
	tc := tls.Client(nc, &tls.Config{RootCAs: s.ca.Pool, ServerName: "localhost", MinVersion: tls.VersionTLS12})
	_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS handshake: %v", err)
	}
	return &rawConn{t: t, conn: tc}
}

// request frames body as a non-flexible request (every request sent here is one).
func request(corr int32, body kmsg.Request) []byte {
	return frame(header(body.Key(), body.GetVersion(), corr, false), body.AppendTo(nil))
}

// TestAbuseSecure feeds the SASL_SSL listener stalled, slow and malformed TLS and SASL handshakes
// while a SCRAM client over TLS keeps producing and consuming: each bad connection is closed (after
// its SASL failure is answered, where there is one) and the good client is never held up.
func TestAbuseSecure(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	s := secureNode(t)
	s.createTopic(ctx, t, "abuse-secure", 1, nil)
	opts := []kgo.Opt{
		kgo.SeedBrokers(s.addr),
		kgo.DialTLSConfig(&tls.Config{RootCAs: s.ca.Pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}),
		kgo.SASL(scram.Auth{User: "admin", Pass: adminPassword}.AsSha512Mechanism()),
	}
	good := &goodClient{topic: "abuse-secure", prod: s.newClient(t, append(opts, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite())...),
		cons: s.newClient(t, append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"abuse-secure": {0: kgo.NewOffset().AtStart()}}),
			kgo.FetchMaxWait(500*time.Millisecond))...)}
	defer good.prod.Close()
	defer good.cons.Close()
	good.roundTrip(ctx, t)

	// Stalled handshakes: TCP only; TLS done and nothing more; TLS and a SaslHandshake, no token.
	var corr int32 = 1
	var stalledTCP *rawConn
	for i := range stalledConns {
		c := dialSecure(t, s, i%3 != 0)
		if i == 0 {
			stalledTCP = c
		}
		if i%3 == 2 {
			hs := kmsg.NewPtrSASLHandshakeRequest()
			hs.Version, hs.Mechanism = 1, "SCRAM-SHA-512"
			if err := c.send(request(corr, hs)); err != nil {
				t.Fatal(err)
			}
			c.response(corr, false)
		}
	}
	start := time.Now()
	for range 5 {
		good.roundTrip(ctx, t)
	}
	t.Logf("5 good round trips in %v with %d stalled handshakes open", time.Since(start), stalledConns)

	cases := []struct {
		name string
		tls  bool
		send func(c *rawConn) []byte
		// sasl is set when the broker answers SASL_AUTHENTICATION_FAILED before it closes.
		sasl bool
	}{
		{name: "plaintext Kafka request on the TLS port", send: func(*rawConn) []byte { return apiVersionsV0(corr) }},
		{name: "HTTP on the TLS port", send: func(*rawConn) []byte { return []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n") }},
		{name: "a TLS record of garbage", send: func(*rawConn) []byte { return append([]byte{22, 3, 1, 0, 40}, bytes.Repeat([]byte{0xff}, 40)...) }},
		{name: "metadata before authentication", tls: true, send: func(*rawConn) []byte { return request(corr, kmsg.NewPtrMetadataRequest()) }},
		{name: "authenticate without handshake", tls: true, send: func(*rawConn) []byte {
			a := kmsg.NewPtrSASLAuthenticateRequest()
			a.SASLAuthBytes = []byte("n,,n=admin,r=x")
			return request(corr, a)
		}},
		{name: "malformed SCRAM client-first", tls: true, sasl: true, send: func(c *rawConn) []byte {
			return handshakeThen(c, &corr, []byte("p=tls-unique,,n=admin,r=abc"))
		}},
		{name: "oversized SCRAM message", tls: true, sasl: true, send: func(c *rawConn) []byte {
			return handshakeThen(c, &corr, bytes.Repeat([]byte{'a'}, 64<<10))
		}},
		{name: "PLAIN without separators", tls: true, sasl: true, send: func(c *rawConn) []byte {
			return handshakeThenMech(c, &corr, "PLAIN", []byte("adminadmin-secret"))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			corr++
			c := dialSecure(t, s, tc.tls)
			c.t = t
			_ = c.send(tc.send(c))
			if tc.sasl {
				b := c.response(corr, false)
				var resp kmsg.SASLAuthenticateResponse
				resp.Version = 1
				if err := resp.ReadFrom(b); err != nil || resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
					t.Fatalf("answer %v, code %d, want SASL_AUTHENTICATION_FAILED", err, resp.ErrorCode)
				}
			}
			if tc.tls {
				c.expectClosed(corr, false)
			} else {
				expectBytesThenClose(t, c)
			}
			good.roundTrip(ctx, t)
		})
	}
	// The handshake timeout (10 s) closes a connection that never begins TLS.
	stalledTCP.expectClosed(0, false)
	if !s.alive() {
		t.Fatal("broker process died")
	}
}

// expectBytesThenClose waits until the broker closes c, whatever it sent first (a TLS alert).
func expectBytesThenClose(t *testing.T, c *rawConn) {
	t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(closeWait))
	if _, err := io.Copy(io.Discard, c.conn); err != nil && !isClosed(err) {
		t.Fatalf("connection not closed within %v: %v", closeWait, err)
	}
}

// handshakeThen hand-shakes SCRAM-SHA-512 on c and returns a SaslAuthenticate v1 carrying token.
func handshakeThen(c *rawConn, corr *int32, token []byte) []byte {
	return handshakeThenMech(c, corr, "SCRAM-SHA-512", token)
}

func handshakeThenMech(c *rawConn, corr *int32, mech string, token []byte) []byte {
	c.t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, mech
	if err := c.send(request(*corr, hs)); err != nil {
		c.t.Fatal(err)
	}
	if b := c.response(*corr, false); binary.BigEndian.Uint16(b) != 0 {
		c.t.Fatalf("SaslHandshake %s answered % x", mech, b)
	}
	*corr++
	a := kmsg.NewPtrSASLAuthenticateRequest()
	a.Version, a.SASLAuthBytes = 1, token
	return request(*corr, a)
}
