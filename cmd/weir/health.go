package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// maxHealthBytes bounds the /healthz body read from a node: a word, or one line of why not.
const maxHealthBytes = 4 << 10

// errUnhealthy is returned when the node answers /healthz with anything but 200.
var errUnhealthy = errors.New("node not serving")

// newHealthCmd is the probe of a container's HEALTHCHECK or a supervisor, for images that hold the
// weir binary alone (no curl): it asks one node's /healthz and exits 0 only on 200.
func newHealthCmd(g *globalOpts) *cobra.Command {
	var httpAddr string
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Ask one node's /healthz; exit 0 when it serves, 1 when it does not or does not answer",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := g.resolve(cmd); err != nil {
				return err
			}
			if f := cmd.Flags().Lookup("http"); !f.Changed {
				if v, ok := os.LookupEnv(envHTTP); ok {
					httpAddr = v
				}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
			defer cancel()
			body, err := fetchHealth(ctx, httpAddr)
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), body)
			return err
		},
	}
	cmd.Flags().StringVar(&httpAddr, "http", defaultHTTP, "HTTP address (host:port) of the node ("+envHTTP+")")
	return cmd
}

// fetchHealth asks the node at addr for /healthz and returns its body when it answers 200.
func fetchHealth(ctx context.Context, addr string) (string, error) {
	url := "http://" + addr + "/healthz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", fmt.Errorf("%w: --http %q: %w", errUsage, addr, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return "", fmt.Errorf("%w: %s: %w", errNoAnswer, url, err)
		}
		return "", fmt.Errorf("%w: %s: %w", errUnreachable, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxHealthBytes))
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", errNoAnswer, url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%w: %s answered %s: %s", errUnhealthy, url, resp.Status, strings.TrimSpace(string(raw)))
	}
	return string(raw), nil
}
