package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/acl"
	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/kafka/wire"
)

// errSecurityDisabled: an ACL request to a node without an authorizer (Kafka's SECURITY_DISABLED).
var errSecurityDisabled = errors.New("api: no authorizer is configured (--authorizer acl)")

// authz is a broker's authorizer: its configuration, the acl.Authorizer built from the ACLs of the
// image it last saw, and the count of its decisions.
type authz struct {
	cfg acl.Config
	cur atomic.Pointer[authzSet]
	// building serializes the builds, so that the requests arriving together after an ACL change
	// build the new index once. It is a leaf lock held for no I/O.
	building sync.Mutex
	// allowed and denied count the decisions (weir_acl_decisions_total).
	allowed, denied atomic.Uint64
}

// authzSet is an acl.Authorizer and the ACL slice it was built from.
type authzSet struct {
	acls []acl.Binding
	a    *acl.Authorizer
}

// authorizer returns the acl.Authorizer for img's ACLs, building it when they changed since the
// last one. An image shares its ACL slice with the image before it unless an ACL command made it
// (controller.Image.ACLs), so the slice's identity tells whether to rebuild.
func (z *authz) authorizer(img *controller.Image) *acl.Authorizer {
	if s := z.cur.Load(); s != nil && sameSlice(s.acls, img.ACLs) {
		return s.a
	}
	z.building.Lock()
	defer z.building.Unlock()
	if s := z.cur.Load(); s != nil && sameSlice(s.acls, img.ACLs) {
		return s.a
	}
	s := &authzSet{acls: img.ACLs, a: acl.New(z.cfg, img.ACLs)}
	z.cur.Store(s)
	return s.a
}

// sameSlice reports whether a and b are the same slice: the same length over the same array.
func sameSlice(a, b []acl.Binding) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// ACLDecisions returns how many authorization decisions allowed and denied an action since the
// broker started; both are zero without an authorizer.
func (b *Broker) ACLDecisions() (allowed, denied uint64) {
	if b.authz == nil {
		return 0, 0
	}
	return b.authz.allowed.Load(), b.authz.denied.Load()
}

// authCtx is one request's view of the authorizer: who asks, from where, under which ACLs.
type authCtx struct {
	b         *Broker
	a         *acl.Authorizer
	img       *controller.Image
	principal string
	host      string
	key       int16
}

// may decides whether the request's principal may do op on the resource, counts the decision and
// logs it at debug.
func (c *authCtx) may(op acl.Operation, t acl.ResourceType, name string) bool {
	r := c.a.Authorize(acl.Action{Principal: c.principal, Host: c.host, Operation: op, Type: t, Name: name})
	c.count(r.Allowed())
	if c.b.log.Enabled(context.Background(), slog.LevelDebug) {
		c.b.log.Debug("acl decision", "principal", c.principal, "host", c.host, "key", c.key,
			"operation", op.String(), "resource", t.String(), "name", name, "allowed", r.Allowed(), "reason", r.String())
	}
	return r.Allowed()
}

// mayCluster is may on the cluster resource.
func (c *authCtx) mayCluster(op acl.Operation) bool {
	return c.may(op, acl.ResourceCluster, acl.ClusterName)
}

// mayAnyTopic is Kafka's authorizeByResourceType: op on at least one topic.
func (c *authCtx) mayAnyTopic(op acl.Operation) bool {
	ok := c.a.AuthorizeAny(c.principal, c.host, op, acl.ResourceTopic)
	c.count(ok)
	if c.b.log.Enabled(context.Background(), slog.LevelDebug) {
		c.b.log.Debug("acl decision", "principal", c.principal, "host", c.host, "key", c.key,
			"operation", op.String(), "resource", "TOPIC", "name", "(any)", "allowed", ok)
	}
	return ok
}

func (c *authCtx) count(allowed bool) {
	if allowed {
		c.b.authz.allowed.Add(1)
	} else {
		c.b.authz.denied.Add(1)
	}
}

// ops returns the authorized-operations bitfield of the resource for the request's principal.
func (c *authCtx) ops(t acl.ResourceType, name string) int32 {
	return c.a.AuthorizedOperations(c.principal, c.host, t, name)
}

// hostOf returns the IP address of a client's remote address as ACL hosts name it, or "" when it
// has none (a binding for a host then never matches, a wildcard host does).
func hostOf(addr net.Addr) string {
	if addr == nil {
		return ""
	}
	if ta, ok := addr.(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(ta.IP); ok {
			return ip.Unmap().String()
		}
		return ""
	}
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return ""
	}
	return ap.Addr().Unmap().String()
}

// authorized serves req through the authorizing layer: the rule of req's key (authzRules) checks
// what Kafka checks, takes the denied parts out of the request, lets serve answer the rest and puts
// the denied parts back into the response with Kafka's codes.
func (b *Broker) authorized(ctx context.Context, req *wire.Request) wire.Reply {
	img := b.meta.Image()
	c := &authCtx{b: b, a: b.authz.authorizer(img), img: img, principal: req.Principal, host: hostOf(req.Remote), key: req.Key}
	rule, ok := authzRules[req.Key]
	if !ok {
		// A key without a rule is a programming error that TestAuthzEveryKeyHasARule catches; it is
		// never served unchecked. wire recovers the panic and closes this connection only.
		panic(fmt.Sprintf("api: no authorization rule for key %d", req.Key))
	}
	return rule(c, ctx, req)
}

// after runs fill on the response of inner, when there is one.
func after(inner wire.Reply, fill func(kmsg.Response)) wire.Reply {
	return func(ctx context.Context) kmsg.Response {
		resp := inner(ctx)
		if resp != nil {
			fill(resp)
		}
		return resp
	}
}

// serveRest serves what is left of req after the denied parts were taken out, then fill puts them
// back. When nothing is left and something was denied (denied), the handler is not asked at all: the
// response is fill's on an empty one, so that an empty request, which means "everything" to some
// keys, never reaches the handler.
func (c *authCtx) serveRest(ctx context.Context, req *wire.Request, left, denied int, fill func(kmsg.Response)) wire.Reply {
	if denied == 0 {
		return c.b.serve(ctx, req)
	}
	if left == 0 {
		resp := req.Body.ResponseKind()
		fill(resp)
		return ready(resp)
	}
	return after(c.b.serve(ctx, req), fill)
}

// split returns the items of in that keep accepts and those it refuses, in order.
func split[T any](in []T, keep func(T) bool) (kept, denied []T) {
	kept = in[:0:0]
	for _, v := range in {
		if keep(v) {
			kept = append(kept, v)
		} else {
			denied = append(denied, v)
		}
	}
	return kept, denied
}

// topicCheck returns a function that asks op on a topic once per topic name in one request (a
// request names few topics, so a slice beats a map).
func (c *authCtx) topicCheck(op acl.Operation) func(string) bool {
	type decision struct {
		topic string
		ok    bool
	}
	var seen []decision
	return func(topic string) bool {
		for _, d := range seen {
			if d.topic == topic {
				return d.ok
			}
		}
		ok := c.may(op, acl.ResourceTopic, topic)
		seen = append(seen, decision{topic, ok})
		return ok
	}
}

// AuthorizerOn reports whether the broker checks requests against ACLs (Options.ACL).
func (b *Broker) AuthorizerOn() bool { return b.authz != nil }
