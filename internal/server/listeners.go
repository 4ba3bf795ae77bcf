package server

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/kafka/wire"
)

// Listener is one Kafka listener of a node (Kafka's listeners, advertised.listeners and
// listener.security.protocol.map in one entry).
type Listener struct {
	// Name is the listener's name, such as PLAINTEXT or SECURE.
	Name string
	// Protocol is its security protocol.
	Protocol wire.SecurityProtocol
	// Addr is where it listens, host:port (port 0: any free port).
	Addr string
	// Advertised is the host:port Metadata gives clients that came in on it; Addr when empty.
	Advertised string
}

// ParseListeners reads Kafka's three listener settings: listeners ("NAME://host:port,..."),
// advertised ("NAME://host:port,...", each naming a listener; those not named advertise their
// listen address) and protocolMap ("NAME:PROTOCOL,..."; a listener named after a protocol needs no
// entry). An empty listeners gives nil.
func ParseListeners(listeners, advertised, protocolMap string) ([]Listener, error) {
	if strings.TrimSpace(listeners) == "" {
		if strings.TrimSpace(advertised) != "" || strings.TrimSpace(protocolMap) != "" {
			return nil, fmt.Errorf("%w: --advertised-listeners and --listener-security-protocol-map need --listeners", ErrBadConfig)
		}
		return nil, nil
	}
	protos := map[string]wire.SecurityProtocol{}
	for entry := range strings.SplitSeq(protocolMap, ",") {
		if entry = strings.TrimSpace(entry); entry == "" {
			continue
		}
		name, proto, ok := strings.Cut(entry, ":")
		p, err := wire.ParseSecurityProtocol(strings.TrimSpace(proto))
		if !ok || err != nil {
			return nil, fmt.Errorf("%w: --listener-security-protocol-map entry %q: want NAME:PROTOCOL with PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", ErrBadConfig, entry)
		}
		protos[strings.TrimSpace(name)] = p
	}
	addrs, err := parseNamedAddrs("--listeners", listeners)
	if err != nil {
		return nil, err
	}
	adv, err := parseNamedAddrs("--advertised-listeners", advertised)
	if err != nil {
		return nil, err
	}
	out := make([]Listener, 0, len(addrs))
	for _, a := range addrs {
		p, ok := protos[a.name]
		if !ok {
			if p, err = wire.ParseSecurityProtocol(a.name); err != nil {
				return nil, fmt.Errorf("%w: listener %s has no entry in --listener-security-protocol-map", ErrBadConfig, a.name)
			}
		}
		l := Listener{Name: a.name, Protocol: p, Addr: a.addr}
		for _, v := range adv {
			if v.name == a.name {
				l.Advertised = v.addr
			}
		}
		out = append(out, l)
	}
	for _, v := range adv {
		if !containsListener(out, v.name) {
			return nil, fmt.Errorf("%w: --advertised-listeners names %s, which --listeners does not", ErrBadConfig, v.name)
		}
	}
	return out, nil
}

type namedAddr struct{ name, addr string }

// parseNamedAddrs parses "NAME://host:port,..." with distinct names.
func parseNamedAddrs(flag, s string) ([]namedAddr, error) {
	var out []namedAddr
	for entry := range strings.SplitSeq(s, ",") {
		if entry = strings.TrimSpace(entry); entry == "" {
			continue
		}
		name, addr, ok := strings.Cut(entry, "://")
		if !ok || name == "" || strings.ToUpper(name) != name {
			return nil, fmt.Errorf("%w: %s entry %q: want NAME://host:port with an upper-case name", ErrBadConfig, flag, entry)
		}
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("%w: %s entry %q: want NAME://host:port", ErrBadConfig, flag, entry)
		}
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return nil, fmt.Errorf("%w: %s entry %q: the port must be a number from 0 to 65535", ErrBadConfig, flag, entry)
		}
		for _, o := range out {
			if o.name == name {
				return nil, fmt.Errorf("%w: %s names %s twice", ErrBadConfig, flag, name)
			}
		}
		out = append(out, namedAddr{name: name, addr: addr})
	}
	return out, nil
}

func containsListener(ls []Listener, name string) bool {
	for _, l := range ls {
		if l.Name == name {
			return true
		}
	}
	return false
}

// listeners is the node's listeners: Config.Listeners, or the one PLAINTEXT listener of KafkaAddr
// and AdvertisedKafkaAddr.
func (c Config) listeners() []Listener {
	if len(c.Listeners) > 0 {
		return c.Listeners
	}
	return []Listener{{Name: string(wire.Plaintext), Protocol: wire.Plaintext, Addr: c.KafkaAddr, Advertised: c.AdvertisedKafkaAddr}}
}

// interBroker returns the index of the inter-broker listener: the one InterBrokerListener names,
// else the first.
func (c Config) interBroker() (int, error) {
	ls := c.listeners()
	i := 0
	if c.InterBrokerListener != "" {
		i = -1
		for j, l := range ls {
			if l.Name == c.InterBrokerListener {
				i = j
			}
		}
		if i < 0 {
			return 0, fmt.Errorf("%w: --inter-broker-listener-name %s is not one of --listeners", ErrBadConfig, c.InterBrokerListener)
		}
	}
	return i, nil
}

// CheckListeners checks the listener settings of c before anything is created: listeners given
// one way only, an inter-broker listener that exists and the credentials the nodes need for it, and
// a certificate for TLS listeners and the controller's mutual TLS.
func (c Config) CheckListeners() error {
	if len(c.Listeners) > 0 && (c.KafkaAddr != "" || c.AdvertisedKafkaAddr != "") {
		return fmt.Errorf("%w: give --listeners or --kafka-addr, not both", ErrBadConfig)
	}
	ib, err := c.interBroker()
	if err != nil {
		return err
	}
	if err := c.checkNodeAuth(c.listeners()[ib]); err != nil {
		return err
	}
	for _, l := range c.listeners() {
		if l.Protocol.TLS() && (c.TLS.CertFile == "" || c.TLS.KeyFile == "") {
			return fmt.Errorf("%w: listener %s is %s: it needs --tls-cert and --tls-key", ErrBadConfig, l.Name, l.Protocol)
		}
	}
	return checkTLSConfig(c.TLS)
}

// boundListener is a listener with its socket and the endpoint it advertises.
type boundListener struct {
	Listener
	ln       net.Listener
	endpoint controller.Endpoint
}

// advertisedEndpoint is what l advertises: Advertised, else its listen address with the bound port;
// an empty or wildcard host becomes the machine's host name.
func advertisedEndpoint(l Listener, bound net.Addr) (controller.Endpoint, error) {
	addr := l.Advertised
	if addr == "" {
		addr = l.Addr
	}
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return controller.Endpoint{}, fmt.Errorf("%w: advertised address %q: %w", ErrBadConfig, addr, err)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return controller.Endpoint{}, fmt.Errorf("%w: advertised port %q: %w", ErrBadConfig, portText, err)
	}
	if port == 0 || l.Advertised == "" {
		if tcp, ok := bound.(*net.TCPAddr); ok {
			port = uint64(tcp.Port)
		}
	}
	return controller.Endpoint{Name: l.Name, Host: routableHost(host), Port: int32(port)}, nil
}
