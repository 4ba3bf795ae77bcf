package server

import (
	"crypto/tls"
	"fmt"

	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/weir-mq/weir/internal/kafka/wire"
)

// checkNodeAuth checks the settings of node-to-node authentication (docs/security.md, Node to
// node) against the inter-broker listener l: what the node needs to reach that listener on its
// peers, and what the controller listener's mutual TLS needs.
func (c Config) checkNodeAuth(l Listener) error {
	if c.ControllerTLS && (c.TLS.CertFile == "" || c.TLS.CAFile == "") {
		return fmt.Errorf("%w: --controller-tls needs --tls-cert, --tls-key and --tls-ca (the nodes' certificate and the cluster's CA)", ErrBadConfig)
	}
	if l.Protocol.TLS() && c.TLS.CAFile == "" {
		return fmt.Errorf("%w: the inter-broker listener %s is %s: it needs --tls-ca, the CA the nodes verify each other with", ErrBadConfig, l.Name, l.Protocol)
	}
	if l.Protocol == wire.SSL && (c.TLS.ClientAuth == "" || c.TLS.ClientAuth == "none") {
		return fmt.Errorf("%w: the inter-broker listener %s is SSL: the nodes authenticate with their certificates, so --tls-client-auth must be required or requested", ErrBadConfig, l.Name)
	}
	if l.Protocol.SASL() && (c.InterBrokerSASLUser == "" || c.InterBrokerSASLPassword == "") {
		return fmt.Errorf("%w: the inter-broker listener %s is %s: it needs --inter-broker-sasl-user and the password in WEIR_INTER_BROKER_PASSWORD", ErrBadConfig, l.Name, l.Protocol)
	}
	if !l.Protocol.SASL() && c.InterBrokerSASLUser != "" {
		return fmt.Errorf("%w: --inter-broker-sasl-user is given but the inter-broker listener %s is %s", ErrBadConfig, l.Name, l.Protocol)
	}
	return nil
}

// controllerTLS is the controller listener's mutual TLS: the node's certificate on both sides, the
// peer's verified against --tls-ca and required, whatever --tls-client-auth says for the Kafka
// listeners. Both are nil without --controller-tls.
func (n *Node) controllerTLS() (server, client *tls.Config) {
	if !n.cfg.ControllerTLS {
		return nil, nil
	}
	return n.tls.mutualConfig(), n.tls.clientConfig()
}

// interBrokerCredentials are how this node's own clients (followers, marker writers, KIP-890
// verification, the HTTP API) connect to the inter-broker listener: TLS with the node's
// certificate when the listener is TLS, SCRAM-SHA-512 as --inter-broker-sasl-user when it is SASL.
func (n *Node) interBrokerCredentials(l Listener) wire.Credentials {
	var creds wire.Credentials
	if l.Protocol.TLS() {
		creds.TLS = n.tls.clientConfig()
	}
	if l.Protocol.SASL() {
		creds.SASL = scram.Auth{User: n.cfg.InterBrokerSASLUser, Pass: n.cfg.InterBrokerSASLPassword}.AsSha512Mechanism()
	}
	return creds
}
