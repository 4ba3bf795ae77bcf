package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Errors of the client commands. main prints them after "weir: ", so they carry no prefix of their own.
var (
	// errUnreachable is returned when no seed broker answers the first request.
	errUnreachable = errors.New("cannot reach broker")
	// errNoAnswer is returned when a request gets no answer within --timeout.
	errNoAnswer = errors.New("no answer from broker")
	// errUsage is returned for flag values and arguments that make no sense together.
	errUsage = errors.New("usage")
)

const (
	defaultBrokers = "localhost:9092"
	defaultTimeout = 10 * time.Second
	envBrokers     = "WEIR_BROKERS"
	envTimeout     = "WEIR_TIMEOUT"
)

// globalOpts are the flags the client commands share. They are persistent flags of each client
// command (never of the root, so weir serve does not show them); all of them land here.
type globalOpts struct {
	brokers string
	timeout time.Duration
	sec     clientSecurity
}

// addClientFlags registers --brokers and --timeout on cmd and its subcommands.
func (g *globalOpts) addClientFlags(cmd *cobra.Command) *cobra.Command {
	cmd.PersistentFlags().StringVar(&g.brokers, "brokers", defaultBrokers, "comma-separated seed brokers, host:port ("+envBrokers+")")
	g.addClientSecurityFlags(cmd)
	return g.addTimeoutFlag(cmd)
}

// addTimeoutFlag registers --timeout alone, for a command that talks to no Kafka broker.
func (g *globalOpts) addTimeoutFlag(cmd *cobra.Command) *cobra.Command {
	cmd.PersistentFlags().DurationVar(&g.timeout, "timeout", defaultTimeout, "bound on connecting and on every request ("+envTimeout+")")
	return cmd
}

// resolve fills flags not given on the command line from the environment and checks them.
func (g *globalOpts) resolve(cmd *cobra.Command) error {
	fs := cmd.Flags()
	for _, name := range [...]struct{ flag, env string }{{"brokers", envBrokers}, {"timeout", envTimeout}} {
		f := fs.Lookup(name.flag)
		if f == nil || f.Changed {
			continue
		}
		if v, ok := os.LookupEnv(name.env); ok {
			if err := f.Value.Set(v); err != nil {
				return fmt.Errorf("%w: %s=%q: %w", errUsage, name.env, v, err)
			}
		}
	}
	if g.timeout <= 0 {
		return fmt.Errorf("%w: --timeout must be positive, got %s", errUsage, g.timeout)
	}
	if fs.Lookup("brokers") != nil && len(g.seeds()) == 0 {
		return fmt.Errorf("%w: --brokers is empty", errUsage)
	}
	return nil
}

func (g *globalOpts) seeds() []string {
	var out []string
	for s := range strings.SplitSeq(g.brokers, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// connect builds a client over the seed brokers and makes one bounded request, so an unreachable
// cluster is reported at once in one line instead of hanging in retries.
func (g *globalOpts) connect(ctx context.Context, extra ...kgo.Opt) (*kgo.Client, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(g.seeds()...),
		kgo.ClientID("weir-cli"),
		kgo.DialTimeout(g.timeout),
		kgo.RetryTimeout(g.timeout),
	}
	sec, err := g.securityOpts()
	if err != nil {
		return nil, err
	}
	opts = append(opts, sec...)
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	pctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		cl.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w at %s: %s", errUnreachable, strings.Join(g.seeds(), ","), g.reason(err))
	}
	return cl, nil
}

// admin connects and wraps the client for admin requests; the caller closes the returned client.
func (g *globalOpts) admin(ctx context.Context) (*kadm.Client, *kgo.Client, error) {
	cl, err := g.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(g.timeout.Milliseconds()))
	return adm, cl, nil
}

// call runs one request under its own --timeout bound and names a missed deadline plainly.
func call[T any](ctx context.Context, g *globalOpts, what string, fn func(context.Context) (T, error)) (T, error) {
	rctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	v, err := fn(rctx)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return v, fmt.Errorf("%s: %w within %s", what, errNoAnswer, g.timeout)
		}
		return v, fmt.Errorf("%s: %w", what, err)
	}
	return v, nil
}

// reason turns a dial or request failure into the short phrase a user needs.
func (g *globalOpts) reason(err error) string {
	var dnsErr *net.DNSError
	var sysErr *os.SyscallError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Sprintf("no answer within %s", g.timeout)
	case errors.As(err, &dnsErr):
		return dnsErr.Err
	case errors.As(err, &sysErr):
		return sysErr.Err.Error()
	}
	return err.Error()
}
