package server

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"strings"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/kafka/api"
	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/sasl"
)

// bootstrapIterations is the SCRAM iteration count of the bootstrap user's credentials.
const bootstrapIterations = 8192

// listenKafka binds every Kafka listener (the TLS files loaded first, when a listener or the
// controller's mutual TLS needs them); ib is the inter-broker listener's index.
func (n *Node) listenKafka(ctx context.Context, lc *net.ListenConfig, ib int) error {
	ls := n.cfg.listeners()
	for _, l := range ls {
		if (l.Protocol.TLS() || n.cfg.ControllerTLS) && n.tls == nil {
			r, err := newTLSReloader(n.cfg.TLS, n.clock, n.logger)
			if err != nil {
				return err
			}
			n.tls = r
		}
	}
	for _, l := range ls {
		ln, err := lc.Listen(ctx, "tcp", l.Addr)
		if err != nil {
			if len(ls) == 1 && len(n.cfg.Listeners) == 0 {
				return fmt.Errorf("server: kafka listener: %w", err)
			}
			return fmt.Errorf("server: kafka listener %s: %w", l.Name, err)
		}
		n.kafkaLns = append(n.kafkaLns, boundListener{Listener: l, ln: ln})
		ep, err := advertisedEndpoint(l, ln.Addr())
		if err != nil {
			return err
		}
		n.kafkaLns[len(n.kafkaLns)-1].endpoint = ep
	}
	n.kafkaLn = n.kafkaLns[ib].ln
	return nil
}

// endpoints is what the node registers: every listener's advertised endpoint.
func (n *Node) endpoints() []controller.Endpoint {
	out := make([]controller.Endpoint, len(n.kafkaLns))
	for i, l := range n.kafkaLns {
		out[i] = l.endpoint
	}
	return out
}

// serveKafka serves every Kafka listener with the one wire.Server.
func (n *Node) serveKafka(ctx context.Context) {
	for _, l := range n.kafkaLns {
		wl := wire.Listener{Name: l.Name, Protocol: l.Protocol}
		if l.Protocol.TLS() {
			wl.TLS = n.tls.config()
		}
		ln := n.metrics.countListener(l.ln)
		n.goServe("kafka listener "+l.Name, func() error { return n.kafka.ServeListener(ctx, ln, wl) })
	}
}

// saslOptions are the broker's SASL options from the node's Config, counted in the metrics.
func (n *Node) saslOptions() api.SASLOptions {
	return api.SASLOptions{
		Mechanisms:      n.cfg.SASLMechanisms,
		FailureDelay:    n.cfg.SASLFailureDelay,
		SessionLifetime: n.cfg.SASLSessionLifetime,
		Observe:         n.metrics.observeSASL,
	}
}

// ParseBootstrapUser splits "NAME:PASSWORD" (the password may hold colons).
func ParseBootstrapUser(s string) (user, password string, err error) {
	user, password, ok := strings.Cut(s, ":")
	if !ok || user == "" || password == "" {
		return "", "", fmt.Errorf("%w: --bootstrap-user: want NAME:PASSWORD", ErrBadConfig)
	}
	return user, password, nil
}

// bootstrapUser proposes Config.BootstrapUser's SCRAM-SHA-256 and SCRAM-SHA-512 credentials when
// the image has no credential for that user; the command itself changes nothing if one appeared
// meanwhile (AlterScramCredentials.IfUserAbsent).
func (n *Node) bootstrapUser(ctx context.Context) error {
	if n.cfg.BootstrapUser == "" {
		return nil
	}
	user, password, err := ParseBootstrapUser(n.cfg.BootstrapUser)
	if err != nil {
		return err
	}
	if len(n.store.Image().ScramCredentials[user]) > 0 {
		return nil
	}
	cmd := controller.AlterScramCredentials{IfUserAbsent: true}
	for _, m := range []sasl.Mechanism{sasl.SCRAMSHA256, sasl.SCRAMSHA512} {
		salt := make([]byte, 24)
		if _, err := rand.Read(salt); err != nil {
			return fmt.Errorf("server: bootstrap user: %w", err)
		}
		salted, err := sasl.SaltPassword(m, password, salt, bootstrapIterations)
		if err != nil {
			return fmt.Errorf("server: bootstrap user: %w", err)
		}
		c, err := sasl.NewCredential(m, salted, salt, bootstrapIterations)
		if err != nil {
			return fmt.Errorf("server: bootstrap user: %w", err)
		}
		cmd.Upserts = append(cmd.Upserts, controller.ScramCredential{User: user, Mechanism: int8(m),
			Salt: c.Salt, Iterations: int32(c.Iterations), StoredKey: c.StoredKey, ServerKey: c.ServerKey})
	}
	if err := n.store.AlterScramCredentials(ctx, cmd); err != nil {
		return fmt.Errorf("server: bootstrap user %s: %w", user, err)
	}
	n.logger.Info("bootstrap user created", "user", user)
	return nil
}

// ListenerAddr is the address the Kafka listener called name listens on (its real port when it
// asked for 0), or "" when the node has no such listener.
func (n *Node) ListenerAddr(name string) string {
	for _, l := range n.kafkaLns {
		if l.Name == name {
			return l.ln.Addr().String()
		}
	}
	return ""
}
