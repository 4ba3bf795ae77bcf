package wire

import (
	"context"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Request is one decoded request from a client.
type Request struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      *string
	// Body is the decoded request, at Version. It is nil only when Unsupported is set. Its byte
	// fields (produce records) alias the request's frame buffer. A Produce's buffer is reused for a
	// later request once its Reply was called and the response written (or once Handle returned a
	// nil Reply): the Handler and the Reply must not keep its records past that, nor leave them to a
	// goroutine that outlives the Reply. Other requests' buffers are never reused.
	Body kmsg.Request
	// Unsupported is set for an ApiVersions request whose version the Handler does not support:
	// the body was not parsed (KIP-511) and the Handler answers with a version 0 response.
	Unsupported bool
	// Remote is the client's address, for logs and for ACLs' host match.
	Remote net.Addr
	// Principal is who the connection has authenticated as, in Kafka's "Type:name" form
	// ("User:alice"); AnonymousPrincipal until it authenticates (docs/security.md).
	Principal string
	// Listener is the name of the listener the connection came in on.
	Listener string
	// Session is the connection's security state, which the SASL handlers change; it may be used
	// during Handle only, never from a Reply.
	Session *Session
	// RawToken is set for a SaslAuthenticate v0 request made from a bare SASL token, after a
	// SaslHandshake v0 (Session.ExpectRawTokens).
	RawToken bool
}

// AnonymousPrincipal is the principal of a connection that has not authenticated, as Kafka names it.
const AnonymousPrincipal = "User:ANONYMOUS"

// Reply produces the response to one request. Replies of a connection are called by its writer one at
// a time, in request order; a Reply may block (a produce waiting for durability, a fetch parked until
// data arrives) while later requests of the same connection are already being handled. A Reply that
// returns nil sends nothing (a produce with acks=0). The context is cancelled when the connection or
// the server closes; a Reply must then return promptly. The wire calls every Reply that Handle
// returned exactly once, even after its connection failed (then with a cancelled context), and sets
// the response's version to the request's, except for the answer to an Unsupported request. A nil
// Reply is allowed and, like a nil response, sends nothing.
type Reply func(ctx context.Context) kmsg.Response

// Handler serves decoded requests.
type Handler interface {
	// Supports reports whether the handler serves key at version. The connection is closed, with a
	// logged reason, for a request it does not support, except ApiVersions (see Request.Unsupported).
	Supports(key, version int16) bool
	// Handle is called for the requests of one connection one at a time, in arrival order; what must
	// happen in request order (appends to a log) happens inside Handle, and waiting happens in the
	// returned Reply.
	Handle(ctx context.Context, req *Request) Reply
}
