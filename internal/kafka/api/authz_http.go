package api

import (
	"github.com/weir-mq/weir/internal/acl"
	"github.com/weir-mq/weir/internal/sasl"
)

// CheckPassword reports whether password is user's, checked as SASL/PLAIN checks it: against the
// user's stored SCRAM credential (docs/security.md, "Users"). It is the HTTP listener's Basic
// authentication; it costs one PBKDF2 of the credential's iterations.
func (b *Broker) CheckPassword(user, password string) bool {
	cred, ok := plainCredential(b.meta.Image(), user)
	if !ok {
		// An unknown user costs what a known one does, so that the time does not tell them apart.
		cred, _ = sasl.NewCredential(sasl.SCRAMSHA512, make([]byte, sasl.SCRAMSHA512.KeyBytes()), []byte("weir-unknown-user"), 4096)
		cred.CheckPassword(password)
		return false
	}
	return cred.CheckPassword(password)
}

// Allowed decides whether principal, from host, may do op on the resource, as a Kafka request of
// that principal would be decided: always without an authorizer; counted and logged like the Kafka
// listener's decisions otherwise. The HTTP API asks it before acting for a principal.
func (b *Broker) Allowed(principal, host string, op acl.Operation, t acl.ResourceType, name string) bool {
	if b.authz == nil {
		return true
	}
	c := &authCtx{b: b, a: b.authz.authorizer(b.meta.Image()), principal: principal, host: host, key: -1}
	return c.may(op, t, name)
}
