package api

import (
	"crypto/rand"
	"encoding/base64"
	"io"
	"slices"
	"time"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/sasl"
)

// DefaultSASLFailureDelay is how long a failed authentication waits before its answer and the
// connection's close, as Kafka's connection.failed.authentication.delay.ms.
const DefaultSASLFailureDelay = 100 * time.Millisecond

// SASLMechanisms are the mechanisms a broker offers when SASLOptions names none, in the order
// SaslHandshake lists them.
var SASLMechanisms = []string{sasl.NameSCRAMSHA512, sasl.NameSCRAMSHA256, sasl.NamePlain}

// SASLOptions configure the SASL exchanges of the SASL listeners (docs/security.md, SASL).
type SASLOptions struct {
	// Mechanisms are the mechanisms offered, from SASLMechanisms; all of them when nil.
	Mechanisms []string
	// FailureDelay is how long a failed exchange waits before answering and closing the connection;
	// DefaultSASLFailureDelay when zero.
	FailureDelay time.Duration
	// SessionLifetime is KIP-368's session lifetime: a client must authenticate again within it, or
	// its next request closes the connection. Zero: sessions do not expire.
	SessionLifetime time.Duration
	// Rand is the source of server nonces; crypto/rand when nil.
	Rand io.Reader
	// Observe, when set, is told the mechanism and result ("ok" or "failed") of every exchange that
	// ends, for the node's metrics.
	Observe func(mechanism, result string)
}

// saslState is a connection's SASL exchange in progress, kept in its wire.Session.
type saslState struct {
	mechanism string
	scram     *sasl.Scram
}

// saslAuth is a Broker's SASL configuration, resolved from SASLOptions.
type saslAuth struct {
	mechanisms   []string
	failureDelay time.Duration
	lifetime     time.Duration
	rand         io.Reader
	observe      func(mechanism, result string)
}

func newSASLAuth(o SASLOptions) saslAuth {
	a := saslAuth{
		mechanisms:   o.Mechanisms,
		failureDelay: o.FailureDelay,
		lifetime:     o.SessionLifetime,
		rand:         o.Rand,
		observe:      o.Observe,
	}
	if a.mechanisms == nil {
		a.mechanisms = SASLMechanisms
	}
	if a.failureDelay <= 0 {
		a.failureDelay = DefaultSASLFailureDelay
	}
	if a.rand == nil {
		a.rand = rand.Reader
	}
	if a.observe == nil {
		a.observe = func(string, string) {}
	}
	return a
}

// offers reports whether mechanism is enabled.
func (a saslAuth) offers(mechanism string) bool { return slices.Contains(a.mechanisms, mechanism) }

// nonce draws a server nonce: 18 random bytes, base64 (printable and comma-free, as SCRAM wants).
func (a saslAuth) nonce() (string, error) {
	var b [18]byte
	if _, err := io.ReadFull(a.rand, b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// scramLookup reads users' credentials of mechanism m from the current image.
func scramLookup(meta *controller.Store, m sasl.Mechanism) sasl.Lookup {
	return func(user string) (sasl.Credential, bool) {
		c, ok := meta.Image().ScramCredential(user, int8(m))
		if !ok {
			return sasl.Credential{}, false
		}
		return toSASLCredential(c), true
	}
}

// plainCredential is the stored credential PLAIN checks a password against: SCRAM-SHA-512's when
// the user has one, else SCRAM-SHA-256's.
func plainCredential(img *controller.Image, user string) (sasl.Credential, bool) {
	for _, m := range []sasl.Mechanism{sasl.SCRAMSHA512, sasl.SCRAMSHA256} {
		if c, ok := img.ScramCredential(user, int8(m)); ok {
			return toSASLCredential(c), true
		}
	}
	return sasl.Credential{}, false
}

func toSASLCredential(c controller.ScramCredential) sasl.Credential {
	return sasl.Credential{
		Mechanism: sasl.Mechanism(c.Mechanism), Salt: c.Salt, Iterations: int(c.Iterations),
		StoredKey: c.StoredKey, ServerKey: c.ServerKey,
	}
}
