package server_test

import (
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/tlstest"
)

// TestSecuritySASLUsersUnderACLs joins the two halves of security: principals come from SCRAM over
// TLS, the authorizer decides on them. The super user admin creates alice; alice may neither write
// nor read the topic until admin grants her, only on that topic, and another user's grant is not hers.
func TestSecuritySASLUsersUnderACLs(t *testing.T) {
	ca := tlstest.NewCA(t)
	cfg := secureConfig(t, ca)
	cfg.Authorizer = "acl"
	cfg.SuperUsers = []string{"User:admin"}
	n := start(t, cfg)
	ctx := testCtx(t)

	admin := secureClient(t, n, ca, scram256("admin", "admin-secret"))
	adm := kadm.NewClient(admin)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "payroll"); err != nil {
		t.Fatal(err)
	}
	var up kadm.UpsertSCRAM
	up.User, up.Mechanism, up.Iterations, up.Password = "alice", kadm.ScramSha256, 4096, "alice-secret"
	if res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{up}); err != nil || res.AllFailed() {
		t.Fatalf("create alice: %v %+v", err, res)
	}

	alice := secureClient(t, n, ca, scram256("alice", "alice-secret"), kgo.RecordRetries(1), kgo.DisableIdempotentWrite())
	produce := func(topic string) error {
		return alice.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
	}
	if err := produce("orders"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice without an ACL: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	// Someone else's grant is not alice's.
	grant := func(principal string) {
		t.Helper()
		b := kadm.NewACLs().Allow(principal).Topics("orders").Operations(kadm.OpWrite, kadm.OpRead).
			ResourcePatternType(kadm.ACLPatternLiteral)
		res, err := adm.CreateACLs(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
	grant("User:bob")
	if err := produce("orders"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice with bob's ACL: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	grant("User:alice")
	if err := produce("orders"); err != nil {
		t.Fatalf("alice after her grant: %v", err)
	}
	if err := produce("payroll"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice on another topic: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	// Metadata shows alice only what she may describe.
	aliceAdm := kadm.NewClient(alice)
	topics, err := aliceAdm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := topics.Names(); len(names) != 1 || names[0] != "orders" {
		t.Fatalf("alice lists %v, want [orders]", names)
	}
	// Managing users needs ALTER on the cluster, which alice lacks.
	up.User = "mallory"
	if _, err := aliceAdm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{up}); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice creating a user: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	if users := mustDescribe(t, adm); len(users) != 2 {
		t.Fatalf("users after alice's refused change: %v, want admin and alice", users)
	}
}

// TestSecurityHTTPAuthAndACLs: on a node with a SASL listener the HTTP listener serves TLS and asks
// for a weir user's credentials (HTTP Basic) everywhere but the probes, and the HTTP API decides as
// the Kafka listener does for that user.
func TestSecurityHTTPAuthAndACLs(t *testing.T) {
	ca := tlstest.NewCA(t)
	cfg := secureConfig(t, ca)
	cfg.Authorizer = "acl"
	cfg.SuperUsers = []string{"User:admin"}
	n := start(t, cfg)
	ctx := testCtx(t)
	adm := kadm.NewClient(secureClient(t, n, ca, scram256("admin", "admin-secret")))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "payroll"); err != nil {
		t.Fatal(err)
	}
	var up kadm.UpsertSCRAM
	up.User, up.Mechanism, up.Iterations, up.Password = "alice", kadm.ScramSha512, 4096, "alice-secret"
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{up}); err != nil {
		t.Fatal(err)
	}
	// The HTTP API is a Kafka client of the node's internal PLAINTEXT listener (docs/security.md).
	mustACLs(t, adm, kadm.NewACLs().Allow(wire.AnonymousPrincipal).AllowHosts("127.0.0.1").
		Topics("*").Groups("*").Clusters().Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternLiteral))

	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, ServerName: "localhost"}}}
	base := "https://" + n.HTTPAddr()
	do := func(method, path, user, pass, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	publish := `{"records":[{"value":"v"}]}`
	for _, tc := range []struct {
		method, path, user, pass, body string
		status                         int
		has                            string
	}{
		{"GET", "/healthz", "", "", "", http.StatusOK, "ok"},
		{"GET", "/metrics", "", "", "", http.StatusUnauthorized, "authentication required"},
		{"POST", "/v1/topics/orders/records", "", "", publish, http.StatusUnauthorized, "authentication required"},
		{"POST", "/v1/topics/orders/records", "alice", "wrong", publish, http.StatusUnauthorized, "authentication required"},
		{"POST", "/v1/topics/orders/records", "nobody", "alice-secret", publish, http.StatusUnauthorized, "authentication required"},
		{"POST", "/v1/topics/orders/records", "alice", "alice-secret", publish, http.StatusForbidden, "TOPIC_AUTHORIZATION_FAILED"},
		{"POST", "/v1/topics/orders/records", "admin", "admin-secret", publish, http.StatusOK, `"offset":0`},
		{"GET", "/metrics", "admin", "admin-secret", "", http.StatusOK, "weir_"},
	} {
		if status, body := do(tc.method, tc.path, tc.user, tc.pass, tc.body); status != tc.status || !strings.Contains(body, tc.has) {
			t.Fatalf("%s %s as %q: %d %s, want %d with %q", tc.method, tc.path, tc.user, status, body, tc.status, tc.has)
		}
	}
	mustACLs(t, adm, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpWrite).
		ResourcePatternType(kadm.ACLPatternLiteral))
	if status, body := do("POST", "/v1/topics/orders/records", "alice", "alice-secret", publish); status != http.StatusOK || !strings.Contains(body, `"offset":1`) {
		t.Fatalf("alice publishing after her grant: %d %s", status, body)
	}
	if status, body := do("POST", "/v1/topics/payroll/records", "alice", "alice-secret", publish); status != http.StatusForbidden {
		t.Fatalf("alice publishing to payroll: %d %s, want 403", status, body)
	}
	// Listings leave out what alice may not describe (WRITE implies DESCRIBE on orders).
	if status, body := do("GET", "/v1/topics", "alice", "alice-secret", ""); status != http.StatusOK ||
		!strings.Contains(body, `"orders"`) || strings.Contains(body, `"payroll"`) {
		t.Fatalf("alice listing topics: %d %s, want orders only", status, body)
	}
	if end, err := adm.ListEndOffsets(ctx, "payroll"); err != nil || end["payroll"][0].Offset != 0 {
		t.Fatalf("payroll's end offset after refused publishes: %v %v, want 0", end, err)
	}
}

// mustACLs creates the ACLs of b.
func mustACLs(t *testing.T, adm *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	res, err := adm.CreateACLs(testCtx(t), b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
}
