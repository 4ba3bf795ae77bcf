package sasl

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// maxMessageBytes bounds one SASL message a client may send: a user name, a password or a SCRAM
// message is never near it.
const maxMessageBytes = 4 << 10

// Lookup returns the stored credential of user for the conversation's mechanism.
type Lookup func(user string) (Credential, bool)

// Scram is the server side of one SCRAM exchange: the client-first message, then the client-final
// one. It is driven by one goroutine and used once.
type Scram struct {
	mech        Mechanism
	lookup      Lookup
	serverNonce string

	step            int
	user            string
	gs2Header       string
	clientFirstBare string
	serverFirst     string
	nonce           string
	cred            Credential
	known           bool
}

// NewScram starts a SCRAM exchange of mechanism m that checks users against lookup; serverNonce is
// the server's part of the nonce (printable, without commas), which the caller draws at random.
func NewScram(m Mechanism, lookup Lookup, serverNonce string) *Scram {
	return &Scram{mech: m, lookup: lookup, serverNonce: serverNonce}
}

// User is the user name the client-first message named ("" before it).
func (s *Scram) User() string { return s.user }

// Step takes the client's next message and returns the server's answer; done is set once the
// exchange has succeeded (the answer is then the server-final message). An error ends the exchange:
// ErrMalformed for a message outside the grammar, ErrAuthFailed for a wrong proof or an unknown user
// (told apart by nothing but User and the lookup).
func (s *Scram) Step(msg []byte) (out []byte, done bool, err error) {
	if len(msg) > maxMessageBytes {
		return nil, false, fmt.Errorf("%w: %d bytes", ErrMalformed, len(msg))
	}
	s.step++
	switch s.step {
	case 1:
		out, err = s.clientFirst(string(msg))
		return out, false, err
	case 2:
		out, err = s.clientFinal(string(msg))
		return out, err == nil, err
	default:
		return nil, false, fmt.Errorf("%w: message after the exchange ended", ErrMalformed)
	}
}

// clientFirst parses "gs2-header client-first-bare" (RFC 5802 §7): no channel binding, no
// extension, an authzid only if it is the user name.
func (s *Scram) clientFirst(msg string) ([]byte, error) {
	gs2, authzid, bare, err := ParseClientFirst(msg)
	if err != nil {
		return nil, err
	}
	user, clientNonce, err := parseBare(bare)
	if err != nil {
		return nil, err
	}
	if authzid != "" && authzid != user {
		return nil, fmt.Errorf("%w: authzid %q is not the user %q", ErrAuthFailed, authzid, user)
	}
	s.user, s.gs2Header, s.clientFirstBare = user, gs2, bare
	s.nonce = clientNonce + s.serverNonce
	s.cred, s.known = s.lookup(user)
	if !s.known || s.cred.Mechanism != s.mech {
		// Answer as if the user existed, so that the client learns nothing until the proof fails.
		s.known = false
		fake := sha256.Sum256([]byte(user + s.serverNonce))
		s.cred = Credential{Mechanism: s.mech, Salt: fake[:16], Iterations: IterationsMin}
	}
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(s.cred.Salt) +
		",i=" + strconv.Itoa(s.cred.Iterations)
	return []byte(s.serverFirst), nil
}

// clientFinal checks "c=<gs2 header>,r=<nonce>,p=<proof>" and answers "v=<server signature>". The
// proof covers the message as sent, so the only freedom the nonce rule below leaves is the client's
// to use.
func (s *Scram) clientFinal(msg string) ([]byte, error) {
	withoutProof, proofText, ok := strings.Cut(msg, ",p=")
	if !ok || strings.Contains(proofText, ",") {
		return nil, fmt.Errorf("%w: client-final without a proof last", ErrMalformed)
	}
	cb, rest, ok := strings.Cut(withoutProof, ",")
	if !ok || cb != "c="+base64.StdEncoding.EncodeToString([]byte(s.gs2Header)) {
		return nil, fmt.Errorf("%w: channel binding %q does not repeat the gs2 header", ErrMalformed, cb)
	}
	// Kafka accepts a nonce that ends with the exchange's, and librdkafka relies on it: it sends its
	// own nonce followed by the whole nonce of the server-first message.
	if nonce, ok := strings.CutPrefix(rest, "r="); !ok || !strings.HasSuffix(nonce, s.nonce) || !printable(nonce) {
		return nil, fmt.Errorf("%w: the nonce is not the exchange's", ErrMalformed)
	}
	proof, err := base64.StdEncoding.DecodeString(proofText)
	if err != nil || len(proof) != s.mech.KeyBytes() {
		return nil, fmt.Errorf("%w: proof", ErrMalformed)
	}
	h := s.mech.newHash()
	authMessage := s.clientFirstBare + "," + s.serverFirst + "," + withoutProof
	clientSig := mac(h, s.cred.StoredKey, authMessage)
	clientKey := make([]byte, len(proof))
	subtle.XORBytes(clientKey, proof, clientSig)
	stored := h()
	stored.Write(clientKey)
	if !s.known || !hmac.Equal(stored.Sum(nil), s.cred.StoredKey) {
		return nil, ErrAuthFailed
	}
	return []byte("v=" + base64.StdEncoding.EncodeToString(mac(h, s.cred.ServerKey, authMessage))), nil
}

// ParseClientFirst splits a SCRAM client-first message into its gs2 header (with its trailing
// comma), the authzid it names ("" for none) and the client-first-bare rest. Channel binding ("p=")
// is refused; "y" (a client that could bind but thinks the server cannot) is accepted.
func ParseClientFirst(msg string) (gs2, authzid, bare string, err error) {
	if len(msg) > maxMessageBytes {
		return "", "", "", fmt.Errorf("%w: %d bytes", ErrMalformed, len(msg))
	}
	flag, rest, ok := strings.Cut(msg, ",")
	if !ok || flag != "n" && flag != "y" {
		return "", "", "", fmt.Errorf("%w: gs2 flag %q (channel binding is not supported)", ErrMalformed, flag)
	}
	zid, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return "", "", "", fmt.Errorf("%w: no client-first-bare", ErrMalformed)
	}
	if zid != "" {
		enc, found := strings.CutPrefix(zid, "a=")
		if !found {
			return "", "", "", fmt.Errorf("%w: authzid %q", ErrMalformed, zid)
		}
		if authzid, err = decodeName(enc); err != nil {
			return "", "", "", err
		}
	}
	return msg[:len(msg)-len(bare)], authzid, bare, nil
}

// parseBare parses "n=<user>,r=<nonce>" and refuses anything after it: the mandatory extension
// "m=" and every optional one (Kafka's tokenauth included).
func parseBare(bare string) (user, nonce string, err error) {
	parts := strings.Split(bare, ",")
	if len(parts) != 2 {
		return "", "", fmt.Errorf("%w: client-first-bare has %d attributes, want n= and r= only", ErrMalformed, len(parts))
	}
	enc, ok := strings.CutPrefix(parts[0], "n=")
	if !ok {
		return "", "", fmt.Errorf("%w: %q is not n=", ErrMalformed, parts[0])
	}
	if user, err = decodeName(enc); err != nil {
		return "", "", err
	}
	nonce, ok = strings.CutPrefix(parts[1], "r=")
	if !ok || nonce == "" || !printable(nonce) {
		return "", "", fmt.Errorf("%w: nonce %q", ErrMalformed, parts[1])
	}
	if user == "" {
		return "", "", fmt.Errorf("%w: empty user name", ErrMalformed)
	}
	return user, nonce, nil
}

// decodeName undoes SCRAM's escaping of user names: "=2C" is ',' and "=3D" is '='; any other '='
// is malformed.
func decodeName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", fmt.Errorf("%w: bad escape in name %q", ErrMalformed, s)
		}
		i += 2
	}
	return b.String(), nil
}

// printable reports whether s is RFC 5802's printable: ASCII 0x21-0x7e except ','.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e || s[i] == ',' {
			return false
		}
	}
	return true
}

// ParsePlain parses a PLAIN message, "authzid NUL user NUL password" (RFC 4616). The user and the
// password may not be empty, and a present authzid must be the user (as Kafka and Redpanda require).
func ParsePlain(msg []byte) (user, password string, err error) {
	if len(msg) > maxMessageBytes {
		return "", "", fmt.Errorf("%w: %d bytes", ErrMalformed, len(msg))
	}
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return "", "", fmt.Errorf("%w: PLAIN has %d fields, want 3", ErrMalformed, len(parts))
	}
	authzid, user, password := string(parts[0]), string(parts[1]), string(parts[2])
	if user == "" || password == "" {
		return "", "", fmt.Errorf("%w: PLAIN with an empty user or password", ErrMalformed)
	}
	if authzid != "" && authzid != user {
		return "", "", fmt.Errorf("%w: authzid %q is not the user %q", ErrAuthFailed, authzid, user)
	}
	return user, password, nil
}
