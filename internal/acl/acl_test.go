package acl

import (
	"errors"
	"fmt"
	"testing"
)

func allow(t ResourceType, name string, pt PatternType, principal, host string, op Operation) Binding {
	return Binding{ResourceType: t, ResourceName: name, PatternType: pt, Principal: principal, Host: host, Operation: op, Permission: PermissionAllow}
}

func deny(t ResourceType, name string, pt PatternType, principal, host string, op Operation) Binding {
	b := allow(t, name, pt, principal, host, op)
	b.Permission = PermissionDeny
	return b
}

func TestACLAuthorize(t *testing.T) {
	const alice, bob = "User:alice", "User:bob"
	bindings := []Binding{
		allow(ResourceTopic, "orders", PatternLiteral, alice, "*", OpRead),
		allow(ResourceTopic, "logs-", PatternPrefixed, alice, "*", OpWrite),
		deny(ResourceTopic, "logs-secret", PatternLiteral, alice, "*", OpWrite),
		allow(ResourceTopic, "*", PatternLiteral, bob, "10.0.0.1", OpAll),
		allow(ResourceGroup, "g", PatternLiteral, WildcardPrincipal, "*", OpRead),
		allow(ResourceCluster, ClusterName, PatternLiteral, alice, "*", OpAlterConfigs),
		deny(ResourceTopic, "orders", PatternLiteral, bob, "*", OpAll),
	}
	a := New(Config{SuperUsers: []string{"User:root"}}, bindings)
	open := New(Config{AllowEveryoneIfNoACLFound: true}, bindings)
	for _, tc := range []struct {
		name string
		a    *Authorizer
		act  Action
		want Reason
	}{
		{"literal allow", a, Action{alice, "1.2.3.4", OpRead, ResourceTopic, "orders"}, ReasonAllowed},
		{"read implies describe", a, Action{alice, "1.2.3.4", OpDescribe, ResourceTopic, "orders"}, ReasonAllowed},
		{"read grants no write", a, Action{alice, "1.2.3.4", OpWrite, ResourceTopic, "orders"}, ReasonNoMatch},
		{"prefixed allow", a, Action{alice, "1.2.3.4", OpWrite, ResourceTopic, "logs-app"}, ReasonAllowed},
		{"prefix itself", a, Action{alice, "1.2.3.4", OpWrite, ResourceTopic, "logs-"}, ReasonAllowed},
		{"shorter than prefix", a, Action{alice, "1.2.3.4", OpWrite, ResourceTopic, "logs"}, ReasonNoMatch},
		{"deny wins over prefixed allow", a, Action{alice, "1.2.3.4", OpWrite, ResourceTopic, "logs-secret"}, ReasonDenied},
		{"deny of write does not deny describe", a, Action{alice, "1.2.3.4", OpDescribe, ResourceTopic, "logs-secret"}, ReasonAllowed},
		{"wildcard name and host match", a, Action{bob, "10.0.0.1", OpWrite, ResourceTopic, "anything"}, ReasonAllowed},
		{"other host", a, Action{bob, "10.0.0.2", OpWrite, ResourceTopic, "anything"}, ReasonNoMatch},
		{"deny all wins over wildcard allow", a, Action{bob, "10.0.0.1", OpRead, ResourceTopic, "orders"}, ReasonDenied},
		{"wildcard principal", a, Action{bob, "1.1.1.1", OpDescribe, ResourceGroup, "g"}, ReasonAllowed},
		{"alter configs implies describe configs", a, Action{alice, "1.1.1.1", OpDescribeConfigs, ResourceCluster, ClusterName}, ReasonAllowed},
		{"super user", a, Action{"User:root", "1.1.1.1", OpDelete, ResourceTopic, "orders"}, ReasonSuperUser},
		{"no acl, closed", a, Action{alice, "1.1.1.1", OpRead, ResourceGroup, "other"}, ReasonNoMatch},
		{"no acl, allow everyone", open, Action{alice, "1.1.1.1", OpRead, ResourceGroup, "other"}, ReasonNoACLAllowed},
		{"acl exists for someone else, allow everyone does not apply", open, Action{bob, "1.1.1.1", OpWrite, ResourceTopic, "logs-x"}, ReasonNoMatch},
		{"transactional id without bindings", a, Action{alice, "1.1.1.1", OpWrite, ResourceTransactionalID, "tx"}, ReasonNoMatch},
	} {
		if got := tc.a.Authorize(tc.act); got != tc.want {
			t.Errorf("%s: Authorize(%+v) = %v, want %v", tc.name, tc.act, got, tc.want)
		}
	}
	if !a.AuthorizeAny(alice, "1.1.1.1", OpWrite, ResourceTopic) || a.AuthorizeAny("User:carol", "1.1.1.1", OpWrite, ResourceTopic) {
		t.Error("AuthorizeAny: alice has WRITE on a prefix, carol on nothing")
	}
	if got, want := a.AuthorizedOperations(alice, "1.1.1.1", ResourceTopic, "orders"), int32(1<<OpRead|1<<OpDescribe); got != want {
		t.Errorf("AuthorizedOperations = %b, want %b", got, want)
	}
}

func TestACLFilterMatches(t *testing.T) {
	str := func(s string) *string { return &s }
	lit := allow(ResourceTopic, "orders", PatternLiteral, "User:a", "*", OpRead)
	wild := allow(ResourceTopic, "*", PatternLiteral, "User:a", "*", OpRead)
	pre := allow(ResourceTopic, "ord", PatternPrefixed, "User:a", "*", OpRead)
	grp := allow(ResourceGroup, "orders", PatternLiteral, "User:b", "*", OpRead)
	all := []Binding{lit, wild, pre, grp}
	for _, tc := range []struct {
		name string
		f    Filter
		want []Binding
	}{
		{"any", Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}, all},
		{"any named", Filter{ResourceType: ResourceAny, ResourceName: str("orders"), PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}, []Binding{lit, grp}},
		{"literal star is only the wildcard", Filter{ResourceType: ResourceTopic, ResourceName: str("*"), PatternType: PatternLiteral, Operation: OpAny, Permission: PermissionAny}, []Binding{wild}},
		{"match", Filter{ResourceType: ResourceTopic, ResourceName: str("orders"), PatternType: PatternMatch, Operation: OpAny, Permission: PermissionAny}, []Binding{lit, wild, pre}},
		{"prefixed", Filter{ResourceType: ResourceTopic, PatternType: PatternPrefixed, Operation: OpAny, Permission: PermissionAny}, []Binding{pre}},
		{"principal", Filter{ResourceType: ResourceAny, PatternType: PatternAny, Principal: str("User:b"), Operation: OpAny, Permission: PermissionAny}, []Binding{grp}},
		{"deny", Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionDeny}, nil},
	} {
		if got := Select(all, tc.f); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	if err := (Filter{ResourceType: ResourceUnknown, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}).Validate(); !errors.Is(err, ErrInvalidBinding) {
		t.Errorf("unknown resource type: %v", err)
	}
}

func TestACLBindingValidate(t *testing.T) {
	good := allow(ResourceTopic, "t", PatternLiteral, "User:a", "*", OpRead)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Binding){
		"match pattern":    func(b *Binding) { b.PatternType = PatternMatch },
		"any operation":    func(b *Binding) { b.Operation = OpAny },
		"any permission":   func(b *Binding) { b.Permission = PermissionAny },
		"empty name":       func(b *Binding) { b.ResourceName = "" },
		"bad principal":    func(b *Binding) { b.Principal = "alice" },
		"bad host":         func(b *Binding) { b.Host = "example.com" },
		"cluster name":     func(b *Binding) { b.ResourceType = ResourceCluster },
		"unknown resource": func(b *Binding) { b.ResourceType = ResourceAny },
	} {
		b := good
		mut(&b)
		if err := b.Validate(); !errors.Is(err, ErrInvalidBinding) {
			t.Errorf("%s: Validate = %v, want ErrInvalidBinding", name, err)
		}
	}
}

// thousandBindings are 1,000 bindings over literal and prefixed topics, groups and users, as a
// large deployment has them.
func thousandBindings() []Binding {
	var bs []Binding
	for i := range 1000 {
		p := fmt.Sprintf("User:u%d", i%50)
		switch i % 4 {
		case 0:
			bs = append(bs, allow(ResourceTopic, fmt.Sprintf("topic-%d", i), PatternLiteral, p, "*", OpWrite))
		case 1:
			bs = append(bs, allow(ResourceTopic, fmt.Sprintf("team%d-", i), PatternPrefixed, p, "*", OpRead))
		case 2:
			bs = append(bs, allow(ResourceGroup, fmt.Sprintf("group-%d", i), PatternLiteral, p, "*", OpRead))
		default:
			bs = append(bs, deny(ResourceTopic, fmt.Sprintf("topic-%d", i-3), PatternLiteral, "User:blocked", "*", OpAll))
		}
	}
	return bs
}

// BenchmarkACLAuthorize is one decision among 1,000 bindings.
func BenchmarkACLAuthorize(b *testing.B) {
	a := New(Config{}, thousandBindings())
	act := Action{Principal: "User:u8", Host: "127.0.0.1", Operation: OpWrite, Type: ResourceTopic, Name: "topic-408"}
	if !a.Authorize(act).Allowed() {
		b.Fatal("the benchmark's action is denied")
	}
	b.ReportAllocs()
	for b.Loop() {
		a.Authorize(act)
	}
}
