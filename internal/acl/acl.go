// Package acl holds Kafka's access control lists: the bindings an operator creates, the filters that
// describe and delete them, and the decision an authorizer makes from them. It is pure: no I/O, no
// clock, no goroutine. The controller keeps the bindings in its image; package kafka/api asks an
// Authorizer built from them before it serves a request (docs/security.md).
//
// The numbers of every enum are Kafka's wire values, so a binding converts to and from kmsg's fields
// by assignment.
package acl

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// ResourceType is what a binding protects (Kafka's ResourceType).
type ResourceType int8

// Resource types. Any is a filter's only.
const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
)

// ClusterName is the name of the one CLUSTER resource, as Kafka names it.
const ClusterName = "kafka-cluster"

// PatternType is how a binding's resource name matches (Kafka's PatternType).
type PatternType int8

// Pattern types. Any and Match are a filter's only: Match finds the bindings that apply to a name
// (literal, wildcard and prefixed), Any those of every pattern type.
const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1
	PatternMatch    PatternType = 2
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

// Operation is what a binding allows or denies (Kafka's AclOperation).
type Operation int8

// Operations. Any is a filter's only; All in a binding matches every operation.
const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
)

// maxOperation is the last operation weir knows.
const maxOperation = OpDescribeTokens

// Permission is whether a binding allows or denies (Kafka's AclPermissionType).
type Permission int8

// Permissions. Any is a filter's only.
const (
	PermissionUnknown Permission = 0
	PermissionAny     Permission = 1
	PermissionDeny    Permission = 2
	PermissionAllow   Permission = 3
)

// Wildcard is the resource name of a literal binding that names every resource of its type, and the
// host of a binding that applies from every address.
const Wildcard = "*"

// WildcardPrincipal is the principal of a binding that applies to every user.
const WildcardPrincipal = "User:*"

// Binding is one access control entry on one resource pattern, Kafka's AclBinding.
type Binding struct {
	ResourceType ResourceType
	ResourceName string
	PatternType  PatternType
	// Principal is "Type:name" ("User:alice"), or WildcardPrincipal.
	Principal string
	// Host is an IP address, or Wildcard.
	Host       string
	Operation  Operation
	Permission Permission
}

// String prints the binding as Kafka's tools do.
func (b Binding) String() string {
	return fmt.Sprintf("(%s:%s:%s, %s from %s: %s %s)", b.ResourceType, b.PatternType, b.ResourceName,
		b.Principal, b.Host, b.Permission, b.Operation)
}

// ErrInvalidBinding is returned by Binding.Validate and Filter.Validate for a binding or filter that
// Kafka refuses with INVALID_REQUEST.
var ErrInvalidBinding = errors.New("acl: invalid binding")

// Validate checks that b is a binding that may be created: concrete types (no Any, Match or Unknown),
// a non-empty name (kafka-cluster for the cluster, which is literal), a principal of the form
// "Type:name" and a host that is Wildcard or an IP address.
func (b Binding) Validate() error {
	switch {
	case b.ResourceType < ResourceTopic || b.ResourceType > ResourceUser:
		return fmt.Errorf("%w: resource type %s", ErrInvalidBinding, b.ResourceType)
	case b.PatternType != PatternLiteral && b.PatternType != PatternPrefixed:
		return fmt.Errorf("%w: pattern type %s", ErrInvalidBinding, b.PatternType)
	case b.Operation < OpAll || b.Operation > maxOperation:
		return fmt.Errorf("%w: operation %s", ErrInvalidBinding, b.Operation)
	case b.Permission != PermissionAllow && b.Permission != PermissionDeny:
		return fmt.Errorf("%w: permission %s", ErrInvalidBinding, b.Permission)
	case b.ResourceName == "":
		return fmt.Errorf("%w: empty resource name", ErrInvalidBinding)
	case b.ResourceType == ResourceCluster && (b.ResourceName != ClusterName || b.PatternType != PatternLiteral):
		return fmt.Errorf("%w: the cluster resource is the literal %q", ErrInvalidBinding, ClusterName)
	}
	if err := checkPrincipal(b.Principal); err != nil {
		return err
	}
	if b.Host != Wildcard {
		if _, err := netip.ParseAddr(b.Host); err != nil {
			return fmt.Errorf("%w: host %q is neither %q nor an IP address", ErrInvalidBinding, b.Host, Wildcard)
		}
	}
	return nil
}

// checkPrincipal checks Kafka's "Type:name" form.
func checkPrincipal(p string) error {
	typ, name, ok := strings.Cut(p, ":")
	if !ok || typ == "" || name == "" {
		return fmt.Errorf("%w: principal %q is not Type:name", ErrInvalidBinding, p)
	}
	return nil
}

// String returns Kafka's name of t.
func (t ResourceType) String() string {
	switch t {
	case ResourceAny:
		return "ANY"
	case ResourceTopic:
		return "TOPIC"
	case ResourceGroup:
		return "GROUP"
	case ResourceCluster:
		return "CLUSTER"
	case ResourceTransactionalID:
		return "TRANSACTIONAL_ID"
	case ResourceDelegationToken:
		return "DELEGATION_TOKEN"
	case ResourceUser:
		return "USER"
	default:
		return fmt.Sprintf("UNKNOWN(%d)", int8(t))
	}
}

// String returns Kafka's name of p.
func (p PatternType) String() string {
	switch p {
	case PatternAny:
		return "ANY"
	case PatternMatch:
		return "MATCH"
	case PatternLiteral:
		return "LITERAL"
	case PatternPrefixed:
		return "PREFIXED"
	default:
		return fmt.Sprintf("UNKNOWN(%d)", int8(p))
	}
}

// opNames are Kafka's names of the operations, by number.
var opNames = [...]string{"UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
	"CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS"}

// String returns Kafka's name of o.
func (o Operation) String() string {
	if o > 0 && int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("UNKNOWN(%d)", int8(o))
}

// String returns Kafka's name of p.
func (p Permission) String() string {
	switch p {
	case PermissionAny:
		return "ANY"
	case PermissionDeny:
		return "DENY"
	case PermissionAllow:
		return "ALLOW"
	default:
		return fmt.Sprintf("UNKNOWN(%d)", int8(p))
	}
}
