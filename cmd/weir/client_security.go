package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/weir-mq/weir/internal/vfs"
)

// envSASLPassword holds the client commands' SASL password: never a flag, so that it stays out of
// process listings and shell history.
const envSASLPassword = "WEIR_SASL_PASSWORD"

// clientSecurity are the client commands' TLS and SASL flags (docs/security.md).
type clientSecurity struct {
	tls       bool
	tlsCA     string
	mechanism string
	user      string
}

// addClientSecurityFlags registers the TLS and SASL flags on cmd and its subcommands.
func (g *globalOpts) addClientSecurityFlags(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	f.BoolVar(&g.sec.tls, "tls", false, "connect with TLS (implied by --tls-ca)")
	f.StringVar(&g.sec.tlsCA, "tls-ca", "", "PEM CA certificates to verify the brokers with (default: the system's)")
	f.StringVar(&g.sec.mechanism, "sasl-mechanism", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (the password from "+envSASLPassword+")")
	f.StringVar(&g.sec.user, "sasl-user", "", "SASL user name")
}

// securityOpts are the client options the TLS and SASL flags ask for.
func (g *globalOpts) securityOpts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if g.sec.tls || g.sec.tlsCA != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if g.sec.tlsCA != "" {
			pem, err := vfs.ReadFile(vfs.OS, g.sec.tlsCA)
			if err != nil {
				return nil, fmt.Errorf("%w: --tls-ca: %w", errUsage, err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("%w: --tls-ca %s holds no PEM certificate", errUsage, g.sec.tlsCA)
			}
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if g.sec.mechanism == "" {
		return opts, nil
	}
	password := os.Getenv(envSASLPassword)
	if g.sec.user == "" || password == "" {
		return nil, fmt.Errorf("%w: --sasl-mechanism needs --sasl-user and %s", errUsage, envSASLPassword)
	}
	switch strings.ToUpper(g.sec.mechanism) {
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: g.sec.user, Pass: password}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: g.sec.user, Pass: password}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: g.sec.user, Pass: password}.AsSha512Mechanism()))
	default:
		return nil, fmt.Errorf("%w: --sasl-mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", errUsage, g.sec.mechanism)
	}
	return opts, nil
}
