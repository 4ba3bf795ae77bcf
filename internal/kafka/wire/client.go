package wire

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DefaultMaxResponseBytes is the largest response frame a Client accepts when its Dialer sets no
// limit: as large as the largest request a Server accepts by default.
const DefaultMaxResponseBytes = DefaultMaxRequestBytes

// errInterrupted: the round trip's context ended as it finished, so the connection's deadline may be
// moved to the past at any moment and the connection is no longer used.
var errInterrupted = errors.New("wire: round trip interrupted by its context")

// Dialer opens Clients. Its zero value is usable.
type Dialer struct {
	// ClientID is sent in the header of every request.
	ClientID string
	// MaxResponseBytes is the largest response frame read; a larger size is refused before anything
	// is allocated for it (DefaultMaxResponseBytes when 0).
	MaxResponseBytes int32
	// Credentials, when set, secure and authenticate every connection.
	Credentials
}

// Client is the client side of the framing: one TCP connection to a broker, over which it sends one
// request at a time and reads that request's response before the next is sent. It is for weir's own
// calls to other brokers (a follower fetching from its leader). A Client is used by one goroutine
// at a time; Close may be called from any.
type Client struct {
	nc     net.Conn
	br     *bufio.Reader
	format *kmsg.RequestFormatter
	limit  int32
	addr   string
	buf    []byte
	// correlationID is the id of the last request sent.
	correlationID int32
	// err is the failure that closed the connection; every later round trip returns it.
	err error
}

// Dial connects to the broker at addr (host:port), giving up when ctx ends.
func (d Dialer) Dial(ctx context.Context, addr string) (*Client, error) {
	var nd net.Dialer
	nc, err := nd.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("wire: dial %s: %w", addr, err)
	}
	if d.TLS != nil {
		if nc, err = tlsHandshake(ctx, nc, addr, d.TLS); err != nil {
			return nil, err
		}
	}
	limit := d.MaxResponseBytes
	if limit <= 0 {
		limit = DefaultMaxResponseBytes
	}
	c := &Client{
		nc:     nc,
		br:     bufio.NewReaderSize(nc, readBufferBytes),
		format: kmsg.NewRequestFormatter(kmsg.FormatterClientID(d.ClientID)),
		limit:  limit,
		addr:   addr,
	}
	if d.SASL != nil {
		if err := c.authenticate(ctx, d.SASL); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	return c, nil
}

// RoundTrip sends req at its version and returns the broker's response to it. req must be one the
// broker answers (not a Produce with acks 0). ctx bounds the whole round trip: when it ends, a
// blocked write or read returns and the error wraps ctx's. Byte fields of the response alias a
// buffer of its own, which the Client does not reuse.
//
// After any error the connection's stream is at an unknown point, so the Client closes it, and every
// later RoundTrip returns the same error.
func (c *Client) RoundTrip(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if c.err != nil {
		return nil, c.err
	}
	resp, err := c.roundTrip(ctx, req)
	if err != nil {
		c.err = err
		_ = c.nc.Close()
		return nil, err
	}
	return resp, nil
}

func (c *Client) roundTrip(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("wire: request to %s: %w", c.addr, err)
	}
	if err := c.nc.SetDeadline(time.Time{}); err != nil {
		return nil, c.failed(ctx, "request to", err)
	}
	// A blocked write or read ends when ctx does: the deadline in the past wakes it.
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(time.Unix(1, 0)) })
	c.correlationID++
	c.buf = c.format.AppendRequest(c.buf[:0], req, c.correlationID)
	if _, err := c.nc.Write(c.buf); err != nil {
		stop()
		return nil, c.failed(ctx, "write to", err)
	}
	if cap(c.buf) > writeBufferKeepBytes {
		c.buf = nil
	}
	frame, err := readFrame(c.br, c.limit)
	interrupted := !stop()
	if err != nil {
		return nil, c.failed(ctx, "read from", err)
	}
	if interrupted {
		return nil, c.failed(ctx, "read from", errInterrupted)
	}
	resp, err := parseResponse(frame, req, c.correlationID)
	if err != nil {
		return nil, fmt.Errorf("wire: response from %s: %w", c.addr, err)
	}
	return resp, nil
}

// failed describes a failed write or read, with ctx's error when ctx ending is what stopped it.
func (c *Client) failed(ctx context.Context, op string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("wire: %s %s: %w: %w", op, c.addr, ctxErr, err)
	}
	return fmt.Errorf("wire: %s %s: %w", op, c.addr, err)
}

// Close closes the connection; a RoundTrip in progress returns an error.
func (c *Client) Close() error {
	return c.nc.Close()
}
