package api

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/partition"
)

// brokerConns sends one node's inter-broker requests (markers, transaction verification) to other
// brokers over the Kafka protocol, keeping one idle connection per broker for the next request. A
// request that fails closes its connection.
type brokerConns struct {
	clientID string
	timeout  time.Duration
	creds    wire.Credentials

	mu    sync.Mutex
	conns map[string]*wire.Client
}

func newBrokerConns(clientID string, timeout time.Duration, creds wire.Credentials) *brokerConns {
	return &brokerConns{clientID: clientID, timeout: timeout, creds: creds, conns: map[string]*wire.Client{}}
}

// addr is the Kafka address of broker node in img.
func brokerAddr(img *controller.Image, node int32) (string, error) {
	br, ok := img.Broker(node)
	if !ok {
		return "", fmt.Errorf("%w: broker %d is not registered", partition.ErrLeaderUnreachable, node)
	}
	return net.JoinHostPort(br.Host, strconv.Itoa(int(br.Port))), nil
}

// roundTrip sends req to addr over an idle connection or a new one, keeping the connection for the
// next call when it worked. Errors wrap partition.ErrLeaderUnreachable.
func (p *brokerConns) roundTrip(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	p.mu.Lock()
	c := p.conns[addr]
	delete(p.conns, addr)
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	if c == nil {
		var err error
		if c, err = (wire.Dialer{ClientID: p.clientID, Credentials: p.creds}).Dial(ctx, addr); err != nil {
			return nil, fmt.Errorf("%w: %w", partition.ErrLeaderUnreachable, err)
		}
	}
	resp, err := c.RoundTrip(ctx, req)
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("%w: %w", partition.ErrLeaderUnreachable, err)
	}
	p.mu.Lock()
	if old := p.conns[addr]; old != nil {
		_ = old.Close()
	}
	p.conns[addr] = c
	p.mu.Unlock()
	return resp, nil
}

// close closes the idle connections.
func (p *brokerConns) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, c := range p.conns {
		_ = c.Close()
		delete(p.conns, addr)
	}
}
