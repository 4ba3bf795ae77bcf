package server_test

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

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
