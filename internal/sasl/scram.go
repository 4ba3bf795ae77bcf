// Package sasl holds the server side of the SASL mechanisms weir accepts, PLAIN and
// SCRAM-SHA-256/512 (RFC 5802 and RFC 7677 without channel binding), and the SCRAM credentials they
// check: pure functions and a per-exchange state machine over bytes, with no I/O, no clock and no
// randomness of their own (the server nonce is the caller's). Only the standard library is used.
//
// A credential is what Kafka stores per user and mechanism: a salt, an iteration count, StoredKey =
// H(HMAC(SaltedPassword, "Client Key")) and ServerKey = HMAC(SaltedPassword, "Server Key"), where
// SaltedPassword = PBKDF2(password, salt, iterations). The password itself is never kept.
package sasl

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"errors"
	"fmt"
	"hash"
)

// Mechanism is a SCRAM mechanism, numbered as Kafka's ScramMechanism (DescribeUserScramCredentials
// and AlterUserScramCredentials carry these numbers).
type Mechanism int8

// The SCRAM mechanisms.
const (
	SCRAMSHA256 Mechanism = 1
	SCRAMSHA512 Mechanism = 2
)

// Names of the mechanisms on the wire (SaslHandshake).
const (
	NamePlain       = "PLAIN"
	NameSCRAMSHA256 = "SCRAM-SHA-256"
	NameSCRAMSHA512 = "SCRAM-SHA-512"
)

// Kafka's bounds on the iterations of a SCRAM credential.
const (
	IterationsMin = 4096
	IterationsMax = 16384
)

var (
	// ErrMalformed is returned by the parsers and by a conversation's Step for a message that does not
	// follow the mechanism's grammar.
	ErrMalformed = errors.New("sasl: malformed message")
	// ErrAuthFailed is returned when the credentials do not match, whatever the reason (an unknown
	// user included), so that a client cannot tell which.
	ErrAuthFailed = errors.New("sasl: authentication failed")
	// ErrUnknownMechanism is returned for a mechanism number or name that is not SCRAM-SHA-256/512.
	ErrUnknownMechanism = errors.New("sasl: unknown SCRAM mechanism")
)

// MechanismByName returns the SCRAM mechanism called name.
func MechanismByName(name string) (Mechanism, bool) {
	switch name {
	case NameSCRAMSHA256:
		return SCRAMSHA256, true
	case NameSCRAMSHA512:
		return SCRAMSHA512, true
	default:
		return 0, false
	}
}

// Valid reports whether m is one of the SCRAM mechanisms.
func (m Mechanism) Valid() bool { return m == SCRAMSHA256 || m == SCRAMSHA512 }

// String returns the mechanism's wire name.
func (m Mechanism) String() string {
	switch m {
	case SCRAMSHA256:
		return NameSCRAMSHA256
	case SCRAMSHA512:
		return NameSCRAMSHA512
	default:
		return fmt.Sprintf("SCRAM(%d)", int8(m))
	}
}

// newHash returns the mechanism's hash; m must be Valid.
func (m Mechanism) newHash() func() hash.Hash {
	if m == SCRAMSHA512 {
		return sha512.New
	}
	return sha256.New
}

// KeyBytes is the size of the mechanism's keys (its hash's output); 0 for an invalid mechanism.
func (m Mechanism) KeyBytes() int {
	switch m {
	case SCRAMSHA256:
		return sha256.Size
	case SCRAMSHA512:
		return sha512.Size
	default:
		return 0
	}
}

// Credential is one user's stored SCRAM credential for one mechanism.
type Credential struct {
	Mechanism  Mechanism
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}

// SaltPassword is PBKDF2(password, salt, iterations) with the mechanism's hash: the SaltedPassword
// that AlterUserScramCredentials carries.
func SaltPassword(m Mechanism, password string, salt []byte, iterations int) ([]byte, error) {
	if !m.Valid() {
		return nil, fmt.Errorf("%w: %d", ErrUnknownMechanism, m)
	}
	if iterations < 1 || len(salt) == 0 {
		return nil, fmt.Errorf("%w: %d iterations, %d bytes of salt", ErrMalformed, iterations, len(salt))
	}
	return pbkdf2.Key(m.newHash(), password, salt, iterations, m.KeyBytes())
}

// NewCredential derives the stored credential from a salted password, as a broker does with what
// AlterUserScramCredentials sends.
func NewCredential(m Mechanism, salted, salt []byte, iterations int) (Credential, error) {
	if !m.Valid() {
		return Credential{}, fmt.Errorf("%w: %d", ErrUnknownMechanism, m)
	}
	if len(salted) != m.KeyBytes() {
		return Credential{}, fmt.Errorf("%w: a salted password of %d bytes, want %d", ErrMalformed, len(salted), m.KeyBytes())
	}
	h := m.newHash()
	clientKey := mac(h, salted, "Client Key")
	stored := h()
	stored.Write(clientKey)
	return Credential{
		Mechanism:  m,
		Salt:       append([]byte(nil), salt...),
		Iterations: iterations,
		StoredKey:  stored.Sum(nil),
		ServerKey:  mac(h, salted, "Server Key"),
	}, nil
}

// CheckPassword reports whether password is the one c was made from: the PLAIN mechanism's check
// against the SCRAM store.
func (c Credential) CheckPassword(password string) bool {
	salted, err := SaltPassword(c.Mechanism, password, c.Salt, c.Iterations)
	if err != nil {
		return false
	}
	derived, err := NewCredential(c.Mechanism, salted, c.Salt, c.Iterations)
	return err == nil && subtle.ConstantTimeCompare(derived.StoredKey, c.StoredKey) == 1
}

func mac(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}
