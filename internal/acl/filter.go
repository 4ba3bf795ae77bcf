package acl

import (
	"fmt"
	"strings"
)

// Filter selects bindings, Kafka's AclBindingFilter: DescribeAcls lists the bindings a filter
// matches and DeleteAcls deletes them. A nil name, principal or host matches any; ResourceAny,
// PatternAny, OpAny and PermissionAny match any value of their field.
type Filter struct {
	ResourceType ResourceType
	ResourceName *string
	// PatternType is Any (every pattern type, the name compared as it is), Match (the bindings that
	// apply to the name: its literal, the literal wildcard, and every prefix of it), Literal or
	// Prefixed (that pattern type only).
	PatternType PatternType
	Principal   *string
	Host        *string
	Operation   Operation
	Permission  Permission
}

// Validate checks that f is a filter Kafka accepts: no Unknown field, known values only.
func (f Filter) Validate() error {
	switch {
	case f.ResourceType < ResourceAny || f.ResourceType > ResourceUser:
		return fmt.Errorf("%w: filter resource type %s", ErrInvalidBinding, f.ResourceType)
	case f.PatternType < PatternAny || f.PatternType > PatternPrefixed:
		return fmt.Errorf("%w: filter pattern type %s", ErrInvalidBinding, f.PatternType)
	case f.Operation < OpAny || f.Operation > maxOperation:
		return fmt.Errorf("%w: filter operation %s", ErrInvalidBinding, f.Operation)
	case f.Permission < PermissionAny || f.Permission > PermissionAllow:
		return fmt.Errorf("%w: filter permission %s", ErrInvalidBinding, f.Permission)
	}
	return nil
}

// Matches reports whether f selects b.
func (f Filter) Matches(b Binding) bool {
	return (f.ResourceType == ResourceAny || f.ResourceType == b.ResourceType) &&
		f.matchesPattern(b) &&
		(f.Principal == nil || *f.Principal == b.Principal) &&
		(f.Host == nil || *f.Host == b.Host) &&
		(f.Operation == OpAny || f.Operation == b.Operation) &&
		(f.Permission == PermissionAny || f.Permission == b.Permission)
}

func (f Filter) matchesPattern(b Binding) bool {
	switch f.PatternType {
	case PatternAny:
		return f.ResourceName == nil || *f.ResourceName == b.ResourceName
	case PatternMatch:
		if f.ResourceName == nil {
			return true
		}
		name := *f.ResourceName
		switch b.PatternType {
		case PatternLiteral:
			return b.ResourceName == name || b.ResourceName == Wildcard
		case PatternPrefixed:
			return strings.HasPrefix(name, b.ResourceName)
		}
		return false
	default:
		return f.PatternType == b.PatternType && (f.ResourceName == nil || *f.ResourceName == b.ResourceName)
	}
}

// Select returns the bindings of bs that f matches, in their order.
func Select(bs []Binding, f Filter) []Binding {
	var out []Binding
	for _, b := range bs {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}
