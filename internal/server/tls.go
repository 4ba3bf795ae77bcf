package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/weir-mq/weir/internal/vfs"
)

// TLSConfig is the TLS of a node's SSL and SASL_SSL listeners (docs/security.md, TLS).
type TLSConfig struct {
	// CertFile and KeyFile are PEM files: the certificate chain and its private key.
	CertFile, KeyFile string
	// CAFile is a PEM file of the CAs client certificates must chain to; needed for ClientAuth
	// "requested" and "required".
	CAFile string
	// ClientAuth is Kafka's ssl.client.auth: "none" (or empty), "requested" or "required".
	ClientAuth string
}

// tlsReloadInterval is how often, at most, a handshake checks whether the files changed.
const tlsReloadInterval = time.Second

func checkTLSConfig(c TLSConfig) error {
	switch c.ClientAuth {
	case "", "none":
	case "requested", "required":
		if c.CAFile == "" {
			return fmt.Errorf("%w: --tls-client-auth %s needs --tls-ca", ErrBadConfig, c.ClientAuth)
		}
	default:
		return fmt.Errorf("%w: --tls-client-auth %q: want none, requested or required", ErrBadConfig, c.ClientAuth)
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return fmt.Errorf("%w: --tls-cert and --tls-key go together", ErrBadConfig)
	}
	return nil
}

// tlsClock is the reloader's time source.
type tlsClock interface{ Now() time.Time }

// tlsReloader serves the TLS configuration built from a TLSConfig's files and builds it again when
// one of them changes: its modification time is looked at, at most once per tlsReloadInterval, when
// a handshake begins. A file that fails to load keeps the previous configuration in use, logged.
type tlsReloader struct {
	files TLSConfig
	clock tlsClock
	log   *slog.Logger

	mu      sync.Mutex
	current *tls.Config
	mtimes  [3]time.Time
	checked time.Time
}

// newTLSReloader loads the files once; an error there ends the node's start.
func newTLSReloader(files TLSConfig, clk tlsClock, log *slog.Logger) (*tlsReloader, error) {
	r := &tlsReloader{files: files, clock: clk, log: log}
	cfg, mtimes, err := r.load()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	r.current, r.mtimes, r.checked = cfg, mtimes, clk.Now()
	return r, nil
}

// config is the listeners' tls.Config: each handshake asks the reloader for the current one.
func (r *tlsReloader) config() *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return r.get(), nil },
	}
}

func (r *tlsReloader) get() *tls.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	if now.Sub(r.checked) < tlsReloadInterval {
		return r.current
	}
	r.checked = now
	mtimes, err := r.stat()
	if err != nil || mtimes == r.mtimes {
		return r.current
	}
	cfg, mtimes, err := r.load()
	if err != nil {
		r.log.Error("tls: the certificate files changed but do not load; keeping the previous ones", "err", err)
		r.mtimes = mtimes
		return r.current
	}
	r.log.Info("tls: certificate files reloaded", "cert", r.files.CertFile)
	r.current, r.mtimes = cfg, mtimes
	return cfg
}

func (r *tlsReloader) paths() [3]string {
	return [3]string{r.files.CertFile, r.files.KeyFile, r.files.CAFile}
}

func (r *tlsReloader) stat() ([3]time.Time, error) {
	var out [3]time.Time
	for i, p := range r.paths() {
		if p == "" {
			continue
		}
		fi, err := vfs.OS.Stat(p)
		if err != nil {
			return out, err
		}
		out[i] = fi.ModTime()
	}
	return out, nil
}

// load reads the files into a configuration, with the modification times they had before the read.
func (r *tlsReloader) load() (*tls.Config, [3]time.Time, error) {
	mtimes, err := r.stat()
	if err != nil {
		return nil, mtimes, fmt.Errorf("tls: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(r.files.CertFile, r.files.KeyFile)
	if err != nil {
		return nil, mtimes, fmt.Errorf("tls: --tls-cert %s, --tls-key %s: %w", r.files.CertFile, r.files.KeyFile, err)
	}
	// Full-size records from the first byte: Kafka responses are large and latency is not
	// the first packet's (the dynamic sizing's aim).
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, DynamicRecordSizingDisabled: true}
	if r.files.CAFile != "" {
		pem, err := vfs.ReadFile(vfs.OS, r.files.CAFile)
		if err != nil {
			return nil, mtimes, fmt.Errorf("tls: --tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, mtimes, fmt.Errorf("tls: --tls-ca %s holds no PEM certificate", r.files.CAFile)
		}
		cfg.ClientCAs = pool
	}
	switch r.files.ClientAuth {
	case "requested":
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	case "required":
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		cfg.ClientAuth = tls.NoClientCert
	}
	return cfg, mtimes, nil
}

// mutualConfig is the TLS of a listener that requires a verified client certificate (the
// controller listener under --controller-tls): the current files' configuration, whatever
// --tls-client-auth says.
func (r *tlsReloader) mutualConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cfg := r.get().Clone()
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
			return cfg, nil
		},
	}
}

// clientConfig is the TLS of the node's connections to other nodes: it presents the current
// certificate (a rotated one from its next handshake on) and verifies the peer against the CA
// loaded at start; a changed --tls-ca applies to these connections from the next restart.
func (r *tlsReloader) clientConfig() *tls.Config {
	r.mu.Lock()
	roots := r.current.ClientCAs
	r.mu.Unlock()
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    roots,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &r.get().Certificates[0], nil
		},
	}
}
