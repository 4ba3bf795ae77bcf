package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-mq/weir/internal/acl"
)

// AuthorizerACL is the Config.Authorizer value that turns ACLs on.
const AuthorizerACL = "acl"

// aclConfig is the broker's authorizer configuration: nil unless cfg turns ACLs on.
func aclConfig(cfg Config) *acl.Config {
	if cfg.Authorizer != AuthorizerACL {
		return nil
	}
	return &acl.Config{SuperUsers: cfg.SuperUsers, AllowEveryoneIfNoACLFound: cfg.AllowEveryoneIfNoACLFound}
}

var descACLDecisions = prometheus.NewDesc("weir_acl_decisions_total",
	"Authorization decisions of the ACL authorizer, by result (allowed, denied); absent without --authorizer acl.",
	[]string{"result"}, nil)

// aclCollector reports the broker's authorization decisions.
type aclCollector struct{ m *metrics }

// Describe sends the ACL series' descriptor.
func (c aclCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descACLDecisions }

// Collect sends the decision counts, when the node runs an authorizer.
func (c aclCollector) Collect(ch chan<- prometheus.Metric) {
	b := c.m.broker.Load()
	if b == nil || !b.AuthorizerOn() {
		return
	}
	allowed, denied := b.ACLDecisions()
	ch <- prometheus.MustNewConstMetric(descACLDecisions, prometheus.CounterValue, float64(allowed), "allowed")
	ch <- prometheus.MustNewConstMetric(descACLDecisions, prometheus.CounterValue, float64(denied), "denied")
}
