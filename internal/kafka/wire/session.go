package wire

import (
	"crypto/tls"
	"fmt"
	"time"
)

// SecurityProtocol is a listener's security protocol, named as Kafka's
// listener.security.protocol.map names them.
type SecurityProtocol string

// The security protocols.
const (
	Plaintext     SecurityProtocol = "PLAINTEXT"
	SSL           SecurityProtocol = "SSL"
	SASLPlaintext SecurityProtocol = "SASL_PLAINTEXT"
	SASLSSL       SecurityProtocol = "SASL_SSL"
)

// ParseSecurityProtocol returns the protocol called name (Kafka's spelling, upper case).
func ParseSecurityProtocol(name string) (SecurityProtocol, error) {
	switch p := SecurityProtocol(name); p {
	case Plaintext, SSL, SASLPlaintext, SASLSSL:
		return p, nil
	default:
		return "", fmt.Errorf("wire: unknown security protocol %q (want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)", name)
	}
}

// TLS reports whether connections of the protocol are encrypted.
func (p SecurityProtocol) TLS() bool { return p == SSL || p == SASLSSL }

// SASL reports whether connections of the protocol authenticate with SASL before anything else.
func (p SecurityProtocol) SASL() bool { return p == SASLPlaintext || p == SASLSSL }

// Listener describes the connections one net.Listener accepts.
type Listener struct {
	// Name is the listener's name (Kafka's listener name, such as PLAINTEXT or SECURE); requests
	// carry it so that metadata answers give the endpoints of the listener the client used.
	Name string
	// Protocol is the listener's security protocol.
	Protocol SecurityProtocol
	// TLS configures the server side of TLS; it is required for SSL and SASL_SSL and unused
	// otherwise. Its GetConfigForClient or GetCertificate may change certificates between handshakes.
	TLS *tls.Config
}

// PlaintextListener is the one listener of a Server that Serve is given: PLAINTEXT, named so.
var PlaintextListener = Listener{Name: string(Plaintext), Protocol: Plaintext}

// saslKeys are the API keys a SASL listener answers before the connection has authenticated, and
// whenever its session lifetime has ended: ApiVersions, SaslHandshake, SaslAuthenticate.
var saslKeys = map[int16]bool{17: true, 18: true, 36: true}

// Session is the security state of one connection. The Handler reads and changes it from Handle
// only, which runs on the connection's reader goroutine; nothing else touches it.
type Session struct {
	// Listener is the name of the listener the connection came in on.
	Listener string
	// Protocol is that listener's security protocol.
	Protocol SecurityProtocol
	// SASL is the Handler's own state of a SASL exchange in progress; nil when none is.
	SASL any

	principal     string
	authenticated bool
	expiry        time.Time
	closeAfter    bool
	rawTokens     bool
	onClose       map[string]func()
}

// OnClose has fn called once the connection has closed (after its last reply was written or
// abandoned); a later call with the same key replaces fn, so that state the Handler keeps per
// connection and key registers one hook however often it is renewed. fn runs on the connection's
// reader goroutine: it must not block.
func (s *Session) OnClose(key string, fn func()) {
	if s.onClose == nil {
		s.onClose = map[string]func(){}
	}
	s.onClose[key] = fn
}

// closed runs the OnClose hooks, once.
func (s *Session) closed() {
	hooks := s.onClose
	s.onClose = nil
	for _, fn := range hooks {
		fn()
	}
}

// Principal is who the connection is, in Kafka's "Type:name" form.
func (s *Session) Principal() string { return s.principal }

// Authenticated reports whether a SASL exchange has succeeded on the connection.
func (s *Session) Authenticated() bool { return s.authenticated }

// Authenticate records a successful SASL exchange: from the next request on, the connection is
// principal, until expiry when it is not zero (KIP-368's session lifetime).
func (s *Session) Authenticate(principal string, expiry time.Time) {
	s.principal, s.authenticated, s.expiry = principal, true, expiry
	s.rawTokens = false
}

// ExpectRawTokens switches the connection to SaslHandshake v0's framing (KIP-43) until Authenticate
// or CloseAfterReply: each following frame is a bare SASL token, which the Handler receives as a
// SaslAuthenticate v0 request (Request.RawToken set), and the AuthBytes of its answer go back as a
// bare frame; an answer with an error code sends nothing, and the connection closes.
func (s *Session) ExpectRawTokens() { s.rawTokens = true }

// CloseAfterReply makes the connection read nothing more and close once the reply to the current
// request is written: the end of a failed authentication.
func (s *Session) CloseAfterReply() { s.closeAfter = true }

// admit reports why a request of key may not be served on the session at now, or "" when it may:
// on a SASL listener, only the SASL keys and ApiVersions before authentication and after the
// session's lifetime.
func (s *Session) admit(key int16, now time.Time) string {
	if !s.Protocol.SASL() || saslKeys[key] {
		return ""
	}
	if !s.authenticated {
		return "request before SASL authentication"
	}
	if !s.expiry.IsZero() && now.After(s.expiry) {
		return "SASL session expired; the client did not re-authenticate"
	}
	return ""
}
