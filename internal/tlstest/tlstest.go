// Package tlstest makes throwaway certificates for tests: a CA, a server certificate for 127.0.0.1
// and localhost, and client certificates, all signed by the CA, as PEM in memory or in files. Keys
// are ECDSA P-256 and never leave the test that made them.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/vfs"
)

// CA is a certificate authority made for one test.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate, PEM-encoded.
	PEM []byte
	// Pool holds the CA certificate, for clients verifying servers and servers verifying clients.
	Pool *x509.CertPool
	next int64
}

// Pair is a certificate chain and its key, PEM-encoded.
type Pair struct {
	CertPEM, KeyPEM []byte
}

// NewCA makes a CA; it fails t on error.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "weir test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{cert: cert, key: key, PEM: pemBlock("CERTIFICATE", der), Pool: pool, next: 2}
}

// Server makes a server certificate for 127.0.0.1, ::1 and localhost, named cn.
func (ca *CA) Server(t testing.TB, cn string) Pair {
	t.Helper()
	return ca.issue(t, pkix.Name{CommonName: cn}, x509.ExtKeyUsageServerAuth)
}

// Node makes a certificate a weir node uses both ways (its listeners' and its client certificate
// towards other nodes), for 127.0.0.1, ::1 and localhost, whose subject is subject.
func (ca *CA) Node(t testing.TB, subject pkix.Name) Pair {
	t.Helper()
	return ca.issue(t, subject, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
}

// Client makes a client certificate whose subject is subject.
func (ca *CA) Client(t testing.TB, subject pkix.Name) Pair {
	t.Helper()
	return ca.issue(t, subject, x509.ExtKeyUsageClientAuth)
}

func (ca *CA) issue(t testing.TB, subject pkix.Name, usage ...x509.ExtKeyUsage) Pair {
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.next),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	ca.next++
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Pair{CertPEM: pemBlock("CERTIFICATE", der), KeyPEM: pemBlock("PRIVATE KEY", keyDER)}
}

// TLS returns the pair as a tls.Certificate.
func (p Pair) TLS(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Write writes the pair to dir as name.crt and name.key and returns their paths.
func (p Pair) Write(t testing.TB, dir, name string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	WriteFile(t, certFile, p.CertPEM)
	WriteFile(t, keyFile, p.KeyPEM)
	return certFile, keyFile
}

// WriteFile writes data to path (created or truncated).
func WriteFile(t testing.TB, path string, data []byte) {
	t.Helper()
	f, err := vfs.OS.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
