package wire

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// Credentials are how a Dialer's connections prove themselves to a broker: TLS (with a client
// certificate for mTLS), SASL, or both, as the broker's listener wants.
type Credentials struct {
	// TLS, when set, makes the connection TLS; the peer is verified for addr's host unless TLS
	// names a server.
	TLS *tls.Config
	// SASL, when set, authenticates the connection with this mechanism (SaslHandshake v1, then
	// SaslAuthenticate v1 until the mechanism is done) before Dial returns.
	SASL sasl.Mechanism
}

// ErrAuthentication is returned by Dial when the broker refused the Dialer's SASL credentials or
// mechanism.
var ErrAuthentication = errors.New("wire: SASL authentication failed")

// tlsHandshake runs the client side of a TLS handshake on nc, closing nc when it fails.
func tlsHandshake(ctx context.Context, nc net.Conn, addr string, cfg *tls.Config) (net.Conn, error) {
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			_ = nc.Close()
			return nil, fmt.Errorf("wire: dial %s: %w", addr, err)
		}
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("wire: TLS handshake with %s: %w", addr, err)
	}
	return tc, nil
}

// authenticate runs a SASL exchange with mech over c: SaslHandshake v1 names the mechanism, and
// each of its messages travels in a SaslAuthenticate v1 (KIP-152) until the mechanism is done (a
// last message it gives with done is sent too).
func (c *Client) authenticate(ctx context.Context, mech sasl.Mechanism) error {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version = 1
	hs.Mechanism = mech.Name()
	resp, err := c.RoundTrip(ctx, hs)
	if err != nil {
		return err
	}
	if code := resp.(*kmsg.SASLHandshakeResponse).ErrorCode; code != 0 {
		return fmt.Errorf("%w: %s: mechanism %s refused (error code %d)", ErrAuthentication, c.addr, mech.Name(), code)
	}
	session, msg, err := mech.Authenticate(ctx, c.addr)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrAuthentication, c.addr, err)
	}
	for done := false; ; {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version = 1
		req.SASLAuthBytes = msg
		resp, err := c.RoundTrip(ctx, req)
		if err != nil {
			return err
		}
		ar := resp.(*kmsg.SASLAuthenticateResponse)
		if ar.ErrorCode != 0 {
			text := ""
			if ar.ErrorMessage != nil {
				text = *ar.ErrorMessage
			}
			return fmt.Errorf("%w: %s: error code %d: %s", ErrAuthentication, c.addr, ar.ErrorCode, text)
		}
		if done {
			return nil
		}
		if done, msg, err = session.Challenge(ar.SASLAuthBytes); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrAuthentication, c.addr, err)
		}
		if done && len(msg) == 0 {
			return nil
		}
	}
}
