package main

import (
	"fmt"
	"strings"

	"github.com/weir-mq/weir/internal/server"
)

// splitSuperUsers reads --super-users: principals separated by ';', blanks ignored.
func splitSuperUsers(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ";") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// checkAuthorizer checks --authorizer and --super-users.
func checkAuthorizer(cfg server.Config) error {
	if cfg.Authorizer != "none" && cfg.Authorizer != "" && cfg.Authorizer != server.AuthorizerACL {
		return fmt.Errorf("%w: --authorizer %q: want acl or none", errUsage, cfg.Authorizer)
	}
	for _, p := range cfg.SuperUsers {
		if typ, name, ok := strings.Cut(p, ":"); !ok || typ == "" || name == "" {
			return fmt.Errorf("%w: --super-users: %q is not a principal Type:name (User:admin)", errUsage, p)
		}
	}
	return nil
}
