package api

import (
	"net"
	"testing"
)

// TestAuthzEveryKeyHasARule: every key in the version table has its authorization rule, and no rule
// names a key weir does not serve.
func TestAuthzEveryKeyHasARule(t *testing.T) {
	for key := range versions {
		if authzRules[key] == nil {
			t.Errorf("key %d is served but has no authorization rule", key)
		}
	}
	for key := range authzRules {
		if _, ok := versions[key]; !ok {
			t.Errorf("key %d has a rule but is not served", key)
		}
	}
}

func TestAuthzHostOf(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 5}, "10.1.2.3"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:10.1.2.3"), Port: 5}, "10.1.2.3"},
		{&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 5}, "fe80::1"},
		{nil, ""},
		{&net.UnixAddr{Name: "/tmp/s"}, ""},
	} {
		if got := hostOf(tc.addr); got != tc.want {
			t.Errorf("hostOf(%v) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}
