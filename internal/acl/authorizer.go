package acl

import "slices"

// Config is how an Authorizer decides besides its bindings: Kafka's super.users and
// allow.everyone.if.no.acl.found.
type Config struct {
	// SuperUsers are principals ("User:admin") allowed everything, whatever the bindings say.
	SuperUsers []string
	// AllowEveryoneIfNoACLFound allows an action on a resource that no binding names at all.
	AllowEveryoneIfNoACLFound bool
}

// Action is one thing a principal asks to do: an operation on a named resource, from a host.
type Action struct {
	Principal string
	// Host is the client's IP address as text.
	Host      string
	Operation Operation
	Type      ResourceType
	Name      string
}

// Reason says why a decision came out as it did, for the log and the metrics.
type Reason int8

// Reasons, in the order Authorize tries them.
const (
	// ReasonSuperUser: the principal is a super user.
	ReasonSuperUser Reason = iota
	// ReasonDenied: a DENY binding matches.
	ReasonDenied
	// ReasonAllowed: an ALLOW binding matches and no DENY does.
	ReasonAllowed
	// ReasonNoACLAllowed: no binding names the resource, and AllowEveryoneIfNoACLFound is set.
	ReasonNoACLAllowed
	// ReasonNoMatch: bindings name the resource (or the authorizer allows nothing without one), and
	// none allows the action.
	ReasonNoMatch
)

// String names the reason.
func (r Reason) String() string {
	switch r {
	case ReasonSuperUser:
		return "super user"
	case ReasonDenied:
		return "denied by a binding"
	case ReasonAllowed:
		return "allowed by a binding"
	case ReasonNoACLAllowed:
		return "no binding for the resource, allow everyone"
	default:
		return "no binding allows it"
	}
}

// Allowed reports whether a decision with this reason lets the action happen.
func (r Reason) Allowed() bool {
	return r == ReasonSuperUser || r == ReasonAllowed || r == ReasonNoACLAllowed
}

// Authorizer decides actions from a fixed set of bindings. It is immutable once built, so any number
// of goroutines may use one; a new set of bindings makes a new Authorizer.
//
// The bindings are indexed by resource type, then by literal name (the wildcard under "*") and by
// prefix, with the distinct prefix lengths kept, so that a decision looks at the bindings that can
// apply to the resource and no others: a few map lookups, however many bindings there are.
type Authorizer struct {
	superUsers   map[string]bool
	allowIfNoACL bool
	types        [ResourceUser + 1]typeIndex
}

// typeIndex holds one resource type's bindings.
type typeIndex struct {
	n        int
	literal  map[string][]Binding
	prefixed map[string][]Binding
	// prefixLens lists the lengths of the keys of prefixed, ascending.
	prefixLens []int
}

// New returns an Authorizer deciding from bindings under cfg. Bindings that do not pass
// Binding.Validate are ignored (the controller admits none).
func New(cfg Config, bindings []Binding) *Authorizer {
	a := &Authorizer{superUsers: make(map[string]bool, len(cfg.SuperUsers)), allowIfNoACL: cfg.AllowEveryoneIfNoACLFound}
	for _, u := range cfg.SuperUsers {
		a.superUsers[u] = true
	}
	for _, b := range bindings {
		if b.Validate() != nil {
			continue
		}
		ti := &a.types[b.ResourceType]
		ti.n++
		if b.PatternType == PatternLiteral {
			if ti.literal == nil {
				ti.literal = map[string][]Binding{}
			}
			ti.literal[b.ResourceName] = append(ti.literal[b.ResourceName], b)
			continue
		}
		if ti.prefixed == nil {
			ti.prefixed = map[string][]Binding{}
		}
		if _, ok := ti.prefixed[b.ResourceName]; !ok && !slices.Contains(ti.prefixLens, len(b.ResourceName)) {
			ti.prefixLens = append(ti.prefixLens, len(b.ResourceName))
		}
		ti.prefixed[b.ResourceName] = append(ti.prefixed[b.ResourceName], b)
	}
	for i := range a.types {
		slices.Sort(a.types[i].prefixLens)
	}
	return a
}

// IsSuperUser reports whether principal is one of the configured super users.
func (a *Authorizer) IsSuperUser(principal string) bool { return a.superUsers[principal] }

// Authorize decides act as Kafka's StandardAuthorizer does: a super user is allowed; else any
// matching DENY denies; else any matching ALLOW allows; else, when no binding names the resource at
// all, AllowEveryoneIfNoACLFound decides; else it is denied. A DENY matches its own operation and
// ALL; an ALLOW also matches the operations it implies (READ, WRITE, DELETE and ALTER imply
// DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS).
func (a *Authorizer) Authorize(act Action) Reason {
	if a.superUsers[act.Principal] {
		return ReasonSuperUser
	}
	if act.Type < 0 || int(act.Type) >= len(a.types) {
		return ReasonNoMatch
	}
	ti := &a.types[act.Type]
	found, allowed := false, false
	check := func(bs []Binding) bool {
		for i := range bs {
			b := &bs[i]
			found = true
			if !b.appliesTo(act.Principal, act.Host) {
				continue
			}
			if b.Permission == PermissionDeny {
				if b.Operation == act.Operation || b.Operation == OpAll {
					return true
				}
				continue
			}
			if grants(b.Operation, act.Operation) {
				allowed = true
			}
		}
		return false
	}
	if ti.literal != nil {
		if check(ti.literal[act.Name]) || check(ti.literal[Wildcard]) {
			return ReasonDenied
		}
	}
	for _, l := range ti.prefixLens {
		if l > len(act.Name) {
			break
		}
		if check(ti.prefixed[act.Name[:l]]) {
			return ReasonDenied
		}
	}
	switch {
	case allowed:
		return ReasonAllowed
	case !found && a.allowIfNoACL:
		return ReasonNoACLAllowed
	default:
		return ReasonNoMatch
	}
}

// AuthorizeAny reports whether principal, from host, may do op on at least one resource of type t:
// Kafka's authorizeByResourceType, by which an idempotent producer with WRITE on any topic may
// have a producer id. It is allowed for a super user; for an ALLOW binding of type t that grants op
// to the principal, unless a DENY of op on every resource of the type (the literal wildcard)
// matches; and, with AllowEveryoneIfNoACLFound, when no binding of type t exists.
func (a *Authorizer) AuthorizeAny(principal, host string, op Operation, t ResourceType) bool {
	if a.superUsers[principal] {
		return true
	}
	if t < 0 || int(t) >= len(a.types) {
		return false
	}
	ti := &a.types[t]
	if ti.n == 0 {
		return a.allowIfNoACL
	}
	for _, b := range ti.literal[Wildcard] {
		if b.Permission == PermissionDeny && b.appliesTo(principal, host) && (b.Operation == op || b.Operation == OpAll) {
			return false
		}
	}
	for _, m := range []map[string][]Binding{ti.literal, ti.prefixed} {
		for _, bs := range m {
			for _, b := range bs {
				if b.Permission == PermissionAllow && b.appliesTo(principal, host) && grants(b.Operation, op) {
					return true
				}
			}
		}
	}
	return false
}

// appliesTo reports whether b names principal (or every user) and host (or every host).
func (b *Binding) appliesTo(principal, host string) bool {
	return (b.Principal == principal || b.Principal == WildcardPrincipal) && (b.Host == Wildcard || b.Host == host)
}

// grants reports whether an ALLOW of have allows want.
func grants(have, want Operation) bool {
	if have == want || have == OpAll {
		return true
	}
	switch want {
	case OpDescribe:
		return have == OpRead || have == OpWrite || have == OpDelete || have == OpAlter
	case OpDescribeConfigs:
		return have == OpAlterConfigs
	}
	return false
}

// resourceOps are the operations Kafka reports in authorized-operations bitfields, per resource type.
var resourceOps = map[ResourceType][]Operation{
	ResourceTopic: {OpRead, OpWrite, OpCreate, OpDelete, OpAlter, OpDescribe, OpDescribeConfigs, OpAlterConfigs},
	ResourceGroup: {OpRead, OpDelete, OpDescribe},
	ResourceCluster: {OpCreate, OpAlter, OpDescribe, OpClusterAction, OpDescribeConfigs, OpAlterConfigs,
		OpIdempotentWrite},
	ResourceTransactionalID: {OpWrite, OpDescribe},
}

// AuthorizedOperations returns the bitfield of the operations principal, from host, may do on the
// resource (bit n set for operation n), as Metadata, DescribeGroups and DescribeCluster return it.
func (a *Authorizer) AuthorizedOperations(principal, host string, t ResourceType, name string) int32 {
	var bits int32
	for _, op := range resourceOps[t] {
		if a.Authorize(Action{Principal: principal, Host: host, Operation: op, Type: t, Name: name}).Allowed() {
			bits |= 1 << op
		}
	}
	return bits
}

// AllOperations returns the bitfield of every operation Kafka reports for resource type t: what a
// node without an authorizer answers.
func AllOperations(t ResourceType) int32 {
	var bits int32
	for _, op := range resourceOps[t] {
		bits |= 1 << op
	}
	return bits
}
