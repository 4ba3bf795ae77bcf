package api_test

import (
	"errors"
	"net"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/server"
)

// The ACL tests run two clients of one node with --authorizer acl. Until SASL lands, both are
// User:ANONYMOUS, told apart by the address they connect from: the admin from 127.0.0.1, holding ALL
// on every resource from that host only, and the subject from 127.0.0.2, holding only what a test
// grants it. With SASL, aclAdminHost and aclSubject become an admin user and the user under test.
const (
	aclPrincipal   = "User:ANONYMOUS"
	aclAdminHost   = "127.0.0.1"
	aclSubjectHost = "127.0.0.2"
)

// aclEnv is a node with ACLs on, its admin and the subject under test.
type aclEnv struct {
	node *server.Node
	// admin may do anything; subject only what grant gives it.
	admin, subject *kgo.Client
	adm            *kadm.Client
}

// clientFrom returns a kgo client of n that connects from the local address host.
func clientFrom(t *testing.T, n *server.Node, host string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(host)}}
	return newClient(t, n, append([]kgo.Opt{kgo.Dialer(d.DialContext)}, opts...)...)
}

// aclConfig is the config of an ACL node in dir.
func aclConfig(dir string, superUsers ...string) server.Config {
	cfg := nodeConfig(dir)
	cfg.Authorizer = server.AuthorizerACL
	cfg.SuperUsers = superUsers
	return cfg
}

// startACLNode starts a node with --authorizer acl whose admin host holds ALL on everything; setup,
// when given, runs first on the node as a super user (topics, offsets, a transactional id), which is
// then restarted without one.
func startACLNode(t *testing.T, setup func(adm *kadm.Client, cl *kgo.Client)) *aclEnv {
	t.Helper()
	dir := t.TempDir()
	first := startNodeWith(t, aclConfig(dir, aclPrincipal))
	cl := newClient(t, first)
	adm := kadm.NewClient(cl)
	all := kadm.NewACLs().Allow(aclPrincipal).AllowHosts(aclAdminHost).Topics("*").Groups("*").Clusters().
		TransactionalIDs("*").Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternLiteral)
	mustCreateACLs(t, adm, all)
	if setup != nil {
		setup(adm, cl)
	}
	cl.Close()
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	n := startNodeWith(t, aclConfig(dir))
	admin := clientFrom(t, n, aclAdminHost)
	return &aclEnv{node: n, admin: admin, adm: kadm.NewClient(admin), subject: clientFrom(t, n, aclSubjectHost)}
}

func mustCreateACLs(t *testing.T, adm *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	res, err := adm.CreateACLs(testCtx(t), b)
	if err != nil {
		t.Fatalf("create ACLs: %v", err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create ACL %+v: %v", r, r.Err)
		}
	}
}

// grant gives the subject b's bindings (Allow or Deny of the subject's principal; hosts default
// to every host) and returns a function that removes them again.
func (e *aclEnv) grant(t *testing.T, b *kadm.ACLBuilder) {
	t.Helper()
	if !b.HasHosts() {
		b.AllowHosts().DenyHosts()
	}
	mustCreateACLs(t, e.adm, b)
}

// revokeAll removes every binding but the admin's.
func (e *aclEnv) revokeAll(t *testing.T) {
	t.Helper()
	all := kadm.NewACLs().AnyResource().Allow().Deny().AllowHosts().DenyHosts().
		Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)
	res, err := e.adm.DescribeACLs(testCtx(t), all)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		for _, d := range r.Described {
			if d.Host == aclAdminHost {
				continue
			}
			del := kadm.NewACLs().ResourcePatternType(d.Pattern).Operations(d.Operation)
			switch d.Type {
			case kmsg.ACLResourceTypeTopic:
				del.Topics(d.Name)
			case kmsg.ACLResourceTypeGroup:
				del.Groups(d.Name)
			case kmsg.ACLResourceTypeCluster:
				del.Clusters()
			case kmsg.ACLResourceTypeTransactionalId:
				del.TransactionalIDs(d.Name)
			}
			if d.Permission == kmsg.ACLPermissionTypeAllow {
				del.Allow(d.Principal).AllowHosts(d.Host)
			} else {
				del.Deny(d.Principal).DenyHosts(d.Host)
			}
			if _, err := e.adm.DeleteACLs(testCtx(t), del); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// do sends req to the node as the subject, at the highest version both sides know.
func (e *aclEnv) do(t *testing.T, req kmsg.Request) kmsg.Response {
	t.Helper()
	resp, err := e.subject.Broker(1).Request(testCtx(t), req)
	if err != nil {
		t.Fatalf("%T: %v", req, err)
	}
	return resp
}

func TestACLSecurityDisabledWithoutAuthorizer(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	res, err := adm.DescribeACLs(testCtx(t), kadm.NewACLs().AnyResource().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny).Allow().Deny().AllowHosts().DenyHosts())
	if err != nil {
		t.Fatal(err)
	}
	if len(res) == 0 || !errors.Is(res[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("DescribeAcls without an authorizer: %+v, want SECURITY_DISABLED", res)
	}
	cres, err := adm.CreateACLs(testCtx(t), kadm.NewACLs().Allow("User:a").Topics("t").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || len(cres) != 1 || !errors.Is(cres[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("CreateAcls without an authorizer: %+v, %v, want SECURITY_DISABLED", cres, err)
	}
}

func TestACLAdminRoundTrip(t *testing.T) {
	e := startACLNode(t, nil)
	ctx := testCtx(t)
	// The subject holds nothing: the ACL keys answer CLUSTER_AUTHORIZATION_FAILED and change nothing.
	sub := kadm.NewClient(e.subject)
	b := kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpRead, kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral)
	cres, err := sub.CreateACLs(ctx, b)
	if err != nil || len(cres) != 2 || !errors.Is(cres[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("subject's CreateAcls: %+v, %v", cres, err)
	}
	mustCreateACLs(t, e.adm, b)
	mustCreateACLs(t, e.adm, kadm.NewACLs().Deny("User:bob").Topics("logs-").Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternPrefixed))

	match := kadm.NewACLs().Topics("orders").Allow().Deny().AllowHosts().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternMatch)
	dres, err := e.adm.DescribeACLs(ctx, match)
	if err != nil || len(dres) != 1 || dres[0].Err != nil {
		t.Fatalf("describe: %+v, %v", dres, err)
	}
	// MATCH on "orders" finds its literal bindings and the admin's literal "*", not bob's "logs-".
	var got []string
	for _, d := range dres[0].Described {
		got = append(got, d.Principal+" "+d.Name+" "+d.Operation.String())
	}
	slices.Sort(got)
	want := []string{"User:ANONYMOUS * ALL", "User:alice orders READ", "User:alice orders WRITE"}
	if !slices.Equal(got, want) {
		t.Fatalf("described %q, want %q", got, want)
	}
	sres, err := sub.DescribeACLs(ctx, match)
	if err != nil || !errors.Is(sres[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("subject's DescribeAcls: %+v, %v", sres, err)
	}

	del := kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternLiteral).AllowHosts()
	delRes, err := e.adm.DeleteACLs(ctx, del)
	if err != nil || len(delRes) != 1 || delRes[0].Err != nil || len(delRes[0].Deleted) != 2 {
		t.Fatalf("delete: %+v, %v", delRes, err)
	}
	if dres, err = e.adm.DescribeACLs(ctx, match); err != nil || len(dres[0].Described) != 1 {
		t.Fatalf("after delete: %+v, %v", dres, err)
	}

	// A filter Kafka refuses: an UNKNOWN operation is INVALID_REQUEST.
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourcePatternType, req.Operation, req.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, 0, kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, e.admin)
	if err != nil || resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("unknown operation: %+v, %v, want INVALID_REQUEST", resp, err)
	}
	// A binding Kafka refuses: a host that is no IP address.
	cr := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:a", "example.com", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	cr.Creations = append(cr.Creations, c)
	cresp, err := cr.RequestWith(ctx, e.admin)
	if err != nil || cresp.Results[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("bad host: %+v, %v, want INVALID_REQUEST", cresp, err)
	}
}
