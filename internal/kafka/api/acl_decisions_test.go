package api_test

import (
	"bytes"
	"errors"
	"log/slog"
	"regexp"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceAs produces one record to topic with cl and returns the error.
func produceAs(t *testing.T, cl *kgo.Client, topic string) error {
	t.Helper()
	return cl.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
}

// fetchErr reads topic's partition 0 from the start with a fresh consumer of cl's kind and returns
// the first fetch error, or nil once a record arrived.
func fetchErr(t *testing.T, e *aclEnv, topic string) error {
	t.Helper()
	cl := clientFrom(t, e.node, aclSubjectHost, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	ctx := testCtx(t)
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := fs.Err(); err != nil {
			return err
		}
		if len(fs.Records()) > 0 {
			return nil
		}
	}
}

func TestACLPrefixedDenyHostAndMetadata(t *testing.T) {
	e := startACLNode(t, nil)
	for _, name := range []string{"logs-a", "logs-secret", "other"} {
		createTopic(t, e.adm, name, 1, nil)
		if err := produceAs(t, e.admin, name); err != nil {
			t.Fatal(err)
		}
	}
	// A fresh client per listing: kgo answers a Metadata request from its cache when it can.
	subjectTopics := func() ([]string, error) {
		td, err := kadm.NewClient(clientFrom(t, e.node, aclSubjectHost)).ListTopics(testCtx(t))
		return td.Names(), err
	}

	// Nothing granted: Metadata of every topic lists none, a produce is refused.
	if names, err := subjectTopics(); err != nil || len(names) != 0 {
		t.Fatalf("topics seen without ACLs: %v, %v", names, err)
	}
	if err := produceAs(t, e.subject, "logs-a"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce without ACLs: %v", err)
	}

	// A grant for another host does not apply.
	e.grant(t, allow().Topics("logs-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite, kadm.OpRead).AllowHosts("127.0.0.3"))
	if err := produceAs(t, e.subject, "logs-a"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce under another host's grant: %v", err)
	}

	// The prefixed grant from the subject's host: every logs- topic, and no other.
	e.grant(t, allow().Topics("logs-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite, kadm.OpRead).AllowHosts(aclSubjectHost))
	if err := produceAs(t, e.subject, "logs-a"); err != nil {
		t.Fatalf("produce under a prefixed grant: %v", err)
	}
	if err := fetchErr(t, e, "logs-a"); err != nil {
		t.Fatalf("fetch under a prefixed grant: %v", err)
	}
	if names, err := subjectTopics(); err != nil || !slices.Equal(names, []string{"logs-a", "logs-secret"}) {
		t.Fatalf("topics seen with the prefixed grant: %v, %v (READ and WRITE imply DESCRIBE)", names, err)
	}
	other := clientFrom(t, e.node, aclSubjectHost)
	if err := produceAs(t, other, "other"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce outside the prefix: %v", err)
	}

	// Deny wins over allow: a literal DENY of READ on one topic under the prefix.
	e.grant(t, kadm.NewACLs().Deny(aclPrincipal).DenyHosts().Topics("logs-secret").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	if err := fetchErr(t, e, "logs-secret"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("fetch under a deny: %v", err)
	}
	if err := fetchErr(t, e, "logs-a"); err != nil {
		t.Fatalf("fetch beside the deny: %v", err)
	}
	// DENY of READ does not deny WRITE.
	if err := produceAs(t, other, "logs-secret"); err != nil {
		t.Fatalf("produce beside a deny of READ: %v", err)
	}

	// Revoked, the topics disappear again.
	e.revokeAll(t)
	if names, err := subjectTopics(); err != nil || len(names) != 0 {
		t.Fatalf("topics seen after revoking: %v, %v", names, err)
	}

	// The decisions are counted.
	denied, allowed := aclDecisions(t, e.node.HTTPAddr(), "denied"), aclDecisions(t, e.node.HTTPAddr(), "allowed")
	if denied == 0 || allowed == 0 {
		t.Fatalf("weir_acl_decisions_total: allowed %d, denied %d", allowed, denied)
	}
}

// aclDecisions reads weir_acl_decisions_total{result} from the node's /metrics.
func aclDecisions(t *testing.T, httpAddr, result string) int {
	t.Helper()
	return int(metricValue(t, httpAddr, `weir_acl_decisions_total{result="`+result+`"}`))
}

func TestACLSuperUserAndAllowEveryone(t *testing.T) {
	// A super user needs no ACL.
	n := startNodeWith(t, aclConfig(t.TempDir(), aclPrincipal))
	adm := newAdmin(t, n)
	createTopic(t, adm, "s", 1, nil)
	if err := produceAs(t, newClient(t, n), "s"); err != nil {
		t.Fatalf("super user's produce: %v", err)
	}

	// allow.everyone.if.no.acl.found: a topic no ACL names is open, one that an ACL names is not.
	cfg := aclConfig(t.TempDir(), "User:admin")
	cfg.AllowEveryoneIfNoACLFound = true
	n = startNodeWith(t, cfg)
	cl := newClient(t, n)
	adm = kadm.NewClient(cl)
	createTopic(t, adm, "open", 1, nil)
	createTopic(t, adm, "named", 1, nil)
	mustCreateACLs(t, adm, kadm.NewACLs().Allow("User:alice").Topics("named").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral))
	if err := produceAs(t, cl, "open"); err != nil {
		t.Fatalf("produce to a topic no ACL names: %v", err)
	}
	if err := produceAs(t, newClient(t, n), "named"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to a topic an ACL names for another user: %v", err)
	}
}

// TestACLDeniedAcksZeroProduceIsNotAnswered: a produce with acks=0 gets no response, denied or not,
// so the connection's next response is the next request's.
func TestACLDeniedAcksZeroProduceIsNotAnswered(t *testing.T) {
	n := startNodeWith(t, aclConfig(t.TempDir()))
	rc := dialRaw(t, n)
	for _, txnID := range []*string{kmsg.StringPtr("tx"), nil} {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis, req.TransactionID = 9, 0, 1000, txnID
		tp := kmsg.NewProduceRequestTopic()
		tp.Topic = "t"
		p := kmsg.NewProduceRequestTopicPartition()
		p.Records = testBatch(batchSpec{values: []string{"x"}})
		tp.Partitions = append(tp.Partitions, p)
		req.Topics = append(req.Topics, tp)
		rc.send(req)
		av := kmsg.NewPtrApiVersionsRequest()
		av.Version = 0
		if resp := rc.do(av).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
			t.Fatalf("ApiVersions after a denied acks=0 produce: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
	}
}

// lockedBuffer is a log destination the node's goroutines share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestACLDecisionsLoggedAtDebug: a denial is logged at debug with who asked, from where, for what.
func TestACLDecisionsLoggedAtDebug(t *testing.T) {
	var logs lockedBuffer
	cfg := aclConfig(t.TempDir())
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	n := startNodeWith(t, cfg)
	if err := produceAs(t, newClient(t, n, kgo.AllowAutoTopicCreation()), "denied-topic"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce: %v", err)
	}
	want := regexp.MustCompile(`msg="acl decision" principal=User:ANONYMOUS host=127\.0\.0\.1 key=\d+ operation=(DESCRIBE|WRITE) resource=TOPIC name=denied-topic allowed=false`)
	if !want.MatchString(logs.String()) {
		t.Fatalf("no debug line for the denial in:\n%s", logs.String())
	}
}
