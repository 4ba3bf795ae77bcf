package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/weir-mq/weir/internal/acl"
	"github.com/weir-mq/weir/internal/kafka/api"
	"github.com/weir-mq/weir/internal/kafka/wire"
)

// httpSecured reports whether the HTTP listener authenticates its requests: it does once the node
// authenticates Kafka clients, that is once one of its listeners is SASL (docs/security.md, "HTTP").
func (n *Node) httpSecured() bool {
	return slices.ContainsFunc(n.cfg.listeners(), func(l Listener) bool { return l.Protocol.SASL() })
}

// principalKey is the context key of the principal an HTTP request authenticated as.
type principalKey struct{}

// httpProbes are the paths answered without credentials: orchestrators' probes carry none.
var httpProbes = []string{"/healthz", "/readyz"}

// httpAuth makes h answer only authenticated requests when the listener is secured: a verified
// client certificate (mTLS) names the principal by its subject, as on the Kafka listeners, or else
// HTTP Basic credentials (RFC 7617) of a SCRAM user, checked as SASL/PLAIN checks them. A request
// with neither, or with a wrong password, gets 401 after the SASL failure delay, and is logged. The
// probes need no credentials.
func (n *Node) httpAuth(h http.Handler) http.Handler {
	if !n.httpSecured() {
		return h
	}
	cache := &passwordCache{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slices.Contains(httpProbes, r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		principal := ""
		if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
			principal = "User:" + r.TLS.PeerCertificates[0].Subject.String()
		} else if user, pass, ok := r.BasicAuth(); ok && n.ready.Load() && cache.check(n, user, pass) {
			principal = "User:" + user
		} else {
			if ok {
				n.logger.Info("http authentication failed", "user", user, "remote", r.RemoteAddr)
			}
			select {
			case <-n.clock.After(n.saslFailureDelay()):
			case <-r.Context().Done():
			}
			w.Header().Set("WWW-Authenticate", `Basic realm="weir", charset="UTF-8"`)
			http.Error(w, "authentication required: HTTP Basic with a weir user's name and password", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, principal)))
	})
}

// httpAuthorize is the HTTP API's authorizer: the request's principal (User:ANONYMOUS on a listener
// that does not authenticate) from its remote address, decided by the broker's ACLs.
func (n *Node) httpAuthorize(r *http.Request, op acl.Operation, t acl.ResourceType, name string) bool {
	principal, _ := r.Context().Value(principalKey{}).(string)
	if principal == "" {
		principal = wire.AnonymousPrincipal
	}
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	return n.broker.Allowed(principal, host, op, t, name)
}

// passwordCache remembers the passwords that passed, as hashes, so that a client sending the same
// Basic credentials with every request pays the PBKDF2 of the check once, not per request. An entry
// holds for the stored credential it was checked against; a changed or deleted credential is checked
// again.
type passwordCache struct {
	mu sync.Mutex
	ok map[string]cachedPassword
}

type cachedPassword struct {
	sum    [sha256.Size]byte
	stored []byte
}

func (c *passwordCache) check(n *Node, user, pass string) bool {
	stored := n.storedKey(user)
	if stored == nil {
		n.broker.CheckPassword(user, pass)
		return false
	}
	sum := sha256.Sum256([]byte(pass))
	c.mu.Lock()
	e, hit := c.ok[user]
	c.mu.Unlock()
	if hit && subtle.ConstantTimeCompare(e.sum[:], sum[:]) == 1 && subtle.ConstantTimeCompare(e.stored, stored) == 1 {
		return true
	}
	if !n.broker.CheckPassword(user, pass) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok == nil {
		c.ok = make(map[string]cachedPassword)
	}
	c.ok[user] = cachedPassword{sum: sum, stored: stored}
	return true
}

// storedKey is the stored key of the credential a PLAIN check of user uses (SCRAM-SHA-512's, else
// SCRAM-SHA-256's), nil when the user has none.
func (n *Node) storedKey(user string) []byte {
	img := n.store.Image()
	for _, m := range []int8{2, 1} {
		if c, ok := img.ScramCredential(user, m); ok {
			return c.StoredKey
		}
	}
	return nil
}

// saslFailureDelay is how long a failed authentication waits before its answer.
func (n *Node) saslFailureDelay() time.Duration {
	if n.cfg.SASLFailureDelay > 0 {
		return n.cfg.SASLFailureDelay
	}
	return api.DefaultSASLFailureDelay
}

// httpTLS is the HTTP listener's TLS configuration: the Kafka listeners' certificates once the
// listener is secured and the node has them, else nil (plain HTTP).
func (n *Node) httpTLS() *tls.Config {
	if !n.httpSecured() || n.tls == nil {
		return nil
	}
	return n.tls.config()
}
