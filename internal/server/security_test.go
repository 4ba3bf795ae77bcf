package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/server"
	"github.com/weir-mq/weir/internal/tlstest"
)

// secureConfig is a node with an INTERNAL PLAINTEXT listener (the inter-broker one), a SECURE
// SASL_SSL listener with certificates of ca, and the bootstrap user admin.
func secureConfig(t *testing.T, ca *tlstest.CA) server.Config {
	t.Helper()
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.KafkaAddr = ""
	cfg.Listeners = []server.Listener{
		{Name: "INTERNAL", Protocol: wire.Plaintext, Addr: "127.0.0.1:0"},
		{Name: "SECURE", Protocol: wire.SASLSSL, Addr: "127.0.0.1:0"},
	}
	cfg.TLS.CertFile, cfg.TLS.KeyFile = ca.Server(t, "broker").Write(t, dir, "server")
	cfg.BootstrapUser = "admin:admin-secret"
	cfg.SASLFailureDelay = 10 * time.Millisecond
	return cfg
}

// secureClient is a franz-go client of the SECURE listener authenticating with mech.
func secureClient(t *testing.T, n *server.Node, ca *tlstest.CA, mech kgo.Opt, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	all := append([]kgo.Opt{
		kgo.SeedBrokers(n.ListenerAddr("SECURE")),
		kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}),
		mech,
		kgo.RetryTimeout(5 * time.Second),
	}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func scram256(user, pass string) kgo.Opt {
	return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism())
}

func TestSecuritySCRAMOverTLSProduceConsumeGroup(t *testing.T) {
	ca := tlstest.NewCA(t)
	n := start(t, secureConfig(t, ca))
	ctx := testCtx(t)
	admin := secureClient(t, n, ca, scram256("admin", "admin-secret"))
	adm := kadm.NewClient(admin)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "secure"); err != nil {
		t.Fatalf("create over SASL_SSL: %v", err)
	}

	// Metadata on each listener gives that listener's endpoint.
	for _, tc := range []struct {
		cl   *kgo.Client
		name string
	}{{admin, "SECURE"}, {client(t, n), "INTERNAL"}} {
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, tc.cl)
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(n.ListenerAddr(tc.name))
		if len(resp.Brokers) != 1 || strconv.Itoa(int(resp.Brokers[0].Port)) != port {
			t.Fatalf("metadata on %s: brokers %+v, want port %s", tc.name, resp.Brokers, port)
		}
	}

	for i := range 10 {
		r := &kgo.Record{Topic: "secure", Value: []byte("v" + strconv.Itoa(i))}
		if err := admin.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	cons := secureClient(t, n, ca, scram256("admin", "admin-secret"),
		kgo.ConsumeTopics("secure"), kgo.ConsumerGroup("secure-group"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < 10 {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		got += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	offsets, err := adm.FetchOffsets(ctx, "secure-group")
	if err != nil || offsets.Error() != nil {
		t.Fatalf("group offsets: %v %v", err, offsets.Error())
	}
}

func TestSecurityUsersAndRefusals(t *testing.T) {
	ca := tlstest.NewCA(t)
	n := start(t, secureConfig(t, ca))
	ctx := testCtx(t)
	admin := secureClient(t, n, ca, scram256("admin", "admin-secret"))
	adm := kadm.NewClient(admin)

	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "bob-secret"}})
	if err != nil || res.Error() != nil {
		t.Fatalf("create bob: %v %v", err, res.Error())
	}
	described, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b := described["bob"]; len(b.CredInfos) != 1 || b.CredInfos[0].Mechanism != kadm.ScramSha512 || b.CredInfos[0].Iterations != 4096 {
		t.Fatalf("bob described as %+v", b)
	}
	if a := described["admin"]; len(a.CredInfos) != 2 {
		t.Fatalf("the bootstrap user described as %+v", a)
	}

	// bob with SCRAM-SHA-512 and with PLAIN (checked against the SCRAM credential).
	for _, mech := range []kgo.Opt{
		kgo.SASL(scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism()),
		kgo.SASL(plain.Auth{User: "bob", Pass: "bob-secret"}.AsMechanism()),
	} {
		if err := secureClient(t, n, ca, mech).Ping(ctx); err != nil {
			t.Fatalf("bob: %v", err)
		}
	}
	// Refused: a wrong password, an unknown user, bob over SHA-256 (he has no such credential).
	for _, mech := range []kgo.Opt{
		kgo.SASL(scram.Auth{User: "bob", Pass: "wrong"}.AsSha512Mechanism()),
		scram256("mallory", "whatever"),
		scram256("bob", "bob-secret"),
		kgo.SASL(plain.Auth{User: "bob", Pass: "wrong"}.AsMechanism()),
	} {
		err := secureClient(t, n, ca, mech, kgo.RequestRetries(0)).Ping(ctx)
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("bad credentials: %v, want SASL_AUTHENTICATION_FAILED", err)
		}
	}

	// Kafka's credential errors, sent raw: kadm checks some of them before sending.
	alter := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	alter.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "nobody", Mechanism: 1}}
	salted := make([]byte, 32)
	alter.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		{Name: "carol", Mechanism: 1, Iterations: 100, Salt: []byte("s"), SaltedPassword: salted},
		{Name: "dave", Mechanism: 3, Iterations: 4096, Salt: []byte("s"), SaltedPassword: salted},
		{Name: "erin", Mechanism: 1, Iterations: 4096, Salt: []byte("s"), SaltedPassword: salted},
		{Name: "erin", Mechanism: 1, Iterations: 4096, Salt: []byte("s"), SaltedPassword: salted},
		{Name: "frank", Mechanism: 2, Iterations: 4096, Salt: []byte("s"), SaltedPassword: salted},
	}
	altered, err := alter.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*kerr.Error{"nobody": kerr.ResourceNotFound, "carol": kerr.UnacceptableCredential,
		"dave": kerr.UnsupportedSaslMechanism, "erin": kerr.DuplicateResource, "frank": kerr.UnacceptableCredential}
	for _, r := range altered.Results {
		if w := want[r.User]; r.ErrorCode != w.Code {
			t.Errorf("%s: %v, want %v", r.User, kerr.ErrorForCode(r.ErrorCode), w)
		}
	}
	if len(altered.Results) != len(want) {
		t.Errorf("%d results, want %d", len(altered.Results), len(want))
	}
	for _, u := range []string{"carol", "dave", "erin", "frank"} {
		if _, ok := mustDescribe(t, adm)[u]; ok {
			t.Fatalf("%s was created", u)
		}
	}
	del, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "bob", Mechanism: kadm.ScramSha512}}, nil)
	if err != nil || del.Error() != nil {
		t.Fatalf("delete bob: %v %v", err, del.Error())
	}
	if err := secureClient(t, n, ca, kgo.SASL(scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism()), kgo.RequestRetries(0)).Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("deleted bob: %v", err)
	}

	// A plaintext client on the TLS port, and a TLS client that does not authenticate.
	plainOnTLS, err := kgo.NewClient(kgo.SeedBrokers(n.ListenerAddr("SECURE")), kgo.RequestRetries(0), kgo.DialTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer plainOnTLS.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := plainOnTLS.Ping(pctx); err == nil {
		t.Fatal("a plaintext client was served on the SASL_SSL port")
	}
	noSASL := secureClient(t, n, ca, kgo.ClientID("no-sasl"), kgo.RequestRetries(0))
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(pctx, noSASL); err == nil {
		t.Fatal("metadata answered before authentication")
	}

	body := secureHTTPGet(t, n, ca, "/metrics")
	for _, want := range []string{
		`weir_sasl_authentications_total{mechanism="SCRAM-SHA-512",result="failed"} 2`,
		`weir_sasl_authentications_total{mechanism="SCRAM-SHA-256",result="failed"} 2`,
		`weir_sasl_authentications_total{mechanism="PLAIN",result="failed"} 1`,
		`weir_sasl_authentications_total{mechanism="PLAIN",result="ok"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func mustDescribe(t *testing.T, adm *kadm.Client) kadm.DescribedUserSCRAMs {
	t.Helper()
	d, err := adm.DescribeUserSCRAMs(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestSecurityReauthentication: with a session lifetime, franz-go re-authenticates (KIP-368) and
// keeps producing past several lifetimes.
func TestSecurityReauthentication(t *testing.T) {
	ca := tlstest.NewCA(t)
	cfg := secureConfig(t, ca)
	cfg.SASLSessionLifetime = 500 * time.Millisecond
	n := start(t, cfg)
	ctx := testCtx(t)
	cl := secureClient(t, n, ca, scram256("admin", "admin-secret"))
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "reauth"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "reauth", Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d across re-authentications: %v", i, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	body := secureHTTPGet(t, n, ca, "/metrics")
	if !strings.Contains(body, `weir_sasl_authentications_total{mechanism="SCRAM-SHA-256",result="ok"}`) ||
		strings.Contains(body, `result="failed"`) {
		t.Fatalf("authentications after 2s of 500ms sessions:\n%s", grepLines(body, "weir_sasl"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestSecurityListenerConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		listeners, advertised, protoMap string
		want                            string
	}{
		{listeners: "PLAINTEXT://:1,PLAINTEXT://:2", want: "twice"},
		{listeners: "SECURE://:1", want: "no entry in --listener-security-protocol-map"},
		{listeners: "SECURE://:1", protoMap: "SECURE:TLS", want: "NAME:PROTOCOL"},
		{listeners: "PLAINTEXT://:1", advertised: "OTHER://h:1", want: "names OTHER"},
		{listeners: "plaintext://:1", want: "upper-case"},
		{listeners: "PLAINTEXT://nohostport", want: "NAME://host:port"},
		{advertised: "PLAINTEXT://h:1", want: "need --listeners"},
	} {
		_, err := server.ParseListeners(tc.listeners, tc.advertised, tc.protoMap)
		if !errors.Is(err, server.ErrBadConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc, err, tc.want)
		}
	}
	ls, err := server.ParseListeners("PLAINTEXT://:9092, SASL_SSL://:9094,SECURE://:9095",
		"SECURE://kafka.example.com:19095", "SECURE:SSL")
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 3 || ls[1].Protocol != wire.SASLSSL || ls[2].Protocol != wire.SSL || ls[2].Advertised != "kafka.example.com:19095" {
		t.Fatalf("parsed %+v", ls)
	}

	base := testConfig(t.TempDir())
	base.KafkaAddr = ""
	for _, tc := range []struct {
		edit func(*server.Config)
		want string
	}{
		{func(c *server.Config) { c.KafkaAddr = "127.0.0.1:0" }, "not both"},
		{func(c *server.Config) { c.Listeners[0].Protocol = wire.SASLPlaintext }, "needs --inter-broker-sasl-user"},
		{func(c *server.Config) {
			c.Listeners[0].Protocol = wire.SASLPlaintext
			c.InterBrokerSASLUser = "broker"
		}, "WEIR_INTER_BROKER_PASSWORD"},
		{func(c *server.Config) { c.InterBrokerSASLUser = "broker" }, "inter-broker listener PLAINTEXT is PLAINTEXT"},
		{func(c *server.Config) {
			c.Listeners[0].Protocol = wire.SSL
			c.TLS = server.TLSConfig{CertFile: "c", KeyFile: "k"}
		}, "needs --tls-ca"},
		{func(c *server.Config) {
			c.Listeners[0].Protocol = wire.SSL
			c.TLS = server.TLSConfig{CertFile: "c", KeyFile: "k", CAFile: "ca"}
		}, "--tls-client-auth must be required or requested"},
		{func(c *server.Config) { c.ControllerTLS = true }, "--controller-tls needs"},
		{func(c *server.Config) {
			c.ControllerTLS = true
			c.TLS = server.TLSConfig{CertFile: "c", KeyFile: "k"}
		}, "--controller-tls needs"},
		{func(c *server.Config) { c.InterBrokerListener = "NOPE" }, "not one of --listeners"},
		{func(c *server.Config) {
			c.Listeners = append(c.Listeners, server.Listener{Name: "S", Protocol: wire.SSL, Addr: "127.0.0.1:0"})
		}, "needs --tls-cert"},
		{func(c *server.Config) { c.TLS.ClientAuth = "required" }, "needs --tls-ca"},
		{func(c *server.Config) { c.TLS.ClientAuth = "maybe" }, "want none"},
	} {
		cfg := base
		cfg.Listeners = []server.Listener{{Name: "PLAINTEXT", Protocol: wire.Plaintext, Addr: "127.0.0.1:0"}}
		tc.edit(&cfg)
		if _, err := server.Start(t.Context(), cfg); !errors.Is(err, server.ErrBadConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("start: %v, want %q", err, tc.want)
		}
	}
}

func scram512(user, pass string) kgo.Opt {
	return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism())
}

// TestSecurityRawSASL drives SaslHandshake and SaslAuthenticate one request at a time on a
// SASL_PLAINTEXT listener: the session lifetime answered, a re-authentication as the same user, one
// as another user refused and closed, and a mechanism not offered refused and closed.
func TestSecurityRawSASL(t *testing.T) {
	ca := tlstest.NewCA(t)
	cfg := secureConfig(t, ca)
	cfg.Listeners = append(cfg.Listeners, server.Listener{Name: "SASL_PLAINTEXT", Protocol: wire.SASLPlaintext, Addr: "127.0.0.1:0"})
	cfg.SASLSessionLifetime = time.Hour
	cfg.SASLMechanisms = []string{"PLAIN", "SCRAM-SHA-512"}
	n := start(t, cfg)
	ctx := testCtx(t)
	adm := kadm.NewClient(client(t, n))
	if res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha256, Password: "bob-secret"}}); err != nil || res.Error() != nil {
		t.Fatalf("create bob: %v %v", err, res)
	}
	dial := func() *wire.Client {
		c, err := wire.Dialer{}.Dial(ctx, n.ListenerAddr("SASL_PLAINTEXT"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	handshake := func(c *wire.Client, mech string) int16 {
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, mech
		resp, err := c.RoundTrip(ctx, hs)
		if err != nil {
			t.Fatalf("handshake %s: %v", mech, err)
		}
		return resp.(*kmsg.SASLHandshakeResponse).ErrorCode
	}
	plainAuth := func(c *wire.Client, user, pass string) *kmsg.SASLAuthenticateResponse {
		a := kmsg.NewPtrSASLAuthenticateRequest()
		a.Version, a.SASLAuthBytes = 2, []byte("\x00"+user+"\x00"+pass)
		resp, err := c.RoundTrip(ctx, a)
		if err != nil {
			t.Fatalf("authenticate %s: %v", user, err)
		}
		return resp.(*kmsg.SASLAuthenticateResponse)
	}
	metadata := func(c *wire.Client) error {
		_, err := c.RoundTrip(ctx, kmsg.NewPtrMetadataRequest())
		return err
	}

	c := dial()
	if code := handshake(c, "PLAIN"); code != 0 {
		t.Fatalf("handshake PLAIN: %v", kerr.ErrorForCode(code))
	}
	if r := plainAuth(c, "admin", "admin-secret"); r.ErrorCode != 0 || r.SessionLifetimeMillis != time.Hour.Milliseconds() {
		t.Fatalf("authenticate admin: %v, lifetime %d ms", kerr.ErrorForCode(r.ErrorCode), r.SessionLifetimeMillis)
	}
	if err := metadata(c); err != nil {
		t.Fatal(err)
	}
	handshake(c, "PLAIN")
	if r := plainAuth(c, "admin", "admin-secret"); r.ErrorCode != 0 {
		t.Fatalf("re-authenticate admin: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	handshake(c, "PLAIN")
	if r := plainAuth(c, "bob", "bob-secret"); r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("re-authentication as bob: %v, want SASL_AUTHENTICATION_FAILED", kerr.ErrorForCode(r.ErrorCode))
	}
	if err := metadata(c); err == nil {
		t.Fatal("the connection served a request after a refused re-authentication")
	}

	other := dial()
	if code := handshake(other, "SCRAM-SHA-256"); code != kerr.UnsupportedSaslMechanism.Code {
		t.Fatalf("handshake with a mechanism not offered: %v", kerr.ErrorForCode(code))
	}
	if err := metadata(other); err == nil {
		t.Fatal("the connection served a request after an unsupported mechanism")
	}
	// bob's SCRAM-SHA-256 credential serves PLAIN on a fresh connection.
	fresh := dial()
	handshake(fresh, "PLAIN")
	if r := plainAuth(fresh, "bob", "bob-secret"); r.ErrorCode != 0 {
		t.Fatalf("bob over PLAIN: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// TestSecurityMutualTLS: an SSL listener with --tls-client-auth required serves a client with a
// certificate of the CA and refuses one without.
func TestSecurityMutualTLS(t *testing.T) {
	ca := tlstest.NewCA(t)
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.KafkaAddr = ""
	cfg.Listeners = []server.Listener{
		{Name: "PLAINTEXT", Protocol: wire.Plaintext, Addr: "127.0.0.1:0"},
		{Name: "SSL", Protocol: wire.SSL, Addr: "127.0.0.1:0"},
	}
	cfg.TLS.CertFile, cfg.TLS.KeyFile = ca.Server(t, "broker").Write(t, dir, "server")
	cfg.TLS.CAFile = filepath.Join(dir, "ca.pem")
	tlstest.WriteFile(t, cfg.TLS.CAFile, ca.PEM)
	cfg.TLS.ClientAuth = "required"
	n := start(t, cfg)
	ctx := testCtx(t)
	alice := ca.Client(t, pkix.Name{CommonName: "alice"})
	for _, tc := range []struct {
		certs []tls.Certificate
		ok    bool
	}{{certs: []tls.Certificate{alice.TLS(t)}, ok: true}, {ok: false}} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.ListenerAddr("SSL")), kgo.RequestRetries(0),
			kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool, ServerName: "localhost", Certificates: tc.certs, MinVersion: tls.VersionTLS12}))
		if err != nil {
			t.Fatal(err)
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = cl.Ping(pctx)
		cancel()
		cl.Close()
		if (err == nil) != tc.ok {
			t.Fatalf("client with %d certificates: %v, want served %v", len(tc.certs), err, tc.ok)
		}
	}
}

// secureHTTPGet is httpGet on a secured node's HTTP listener: HTTPS with ca's certificates, as the
// bootstrap user admin.
func secureHTTPGet(t *testing.T, n *server.Node, ca *tlstest.CA, path string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodGet, "https://"+n.HTTPAddr()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("admin", "admin-secret")
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, ServerName: "localhost"}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", path, resp.Status, err)
	}
	return string(body)
}
