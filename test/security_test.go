package test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/weir-mq/weir/internal/tlstest"
)

// adminPassword is the bootstrap user's password of secureNode.
const adminPassword = "admin-secret"

// secure is a node with a SASL_SSL listener beside its PLAINTEXT one, and what clients need to
// reach it: the CA's file and the address of the listener.
type secure struct {
	*node
	ca     *tlstest.CA
	caFile string
	addr   string
}

// secureNode starts a node whose SASL_SSL listener has a certificate of a fresh CA, with the
// bootstrap user admin (from WEIR_BOOTSTRAP_USER) and args added.
func secureNode(t *testing.T, args ...string) *secure {
	t.Helper()
	ca := tlstest.NewCA(t)
	dir := t.TempDir()
	certFile, keyFile := ca.Server(t, "weir").Write(t, dir, "server")
	caFile := filepath.Join(dir, "ca.pem")
	tlstest.WriteFile(t, caFile, ca.PEM)
	addr := freeAddrs(t, 1)[0]
	n := startNode(t, nodeOptions{
		SASLSSL: addr,
		Env:     []string{"WEIR_BOOTSTRAP_USER=admin:" + adminPassword},
		Args: append([]string{"--tls-cert", certFile, "--tls-key", keyFile, "--sasl-failure-delay", "10ms",
			"--group-initial-rebalance-delay", "0s"}, args...),
	})
	return &secure{node: n, ca: ca, caFile: caFile, addr: addr}
}

// weirCLI runs the weir binary with args, environment env and stdin, and returns its stdout; a
// non-zero exit fails the test.
func weirCLI(ctx context.Context, t *testing.T, env []string, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, weirBin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("weir %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// kcatSecure runs kcat against the SASL_SSL listener as user with mechanism; it returns stdout and
// kcat's error (a non-zero exit).
func kcatSecure(ctx context.Context, t *testing.T, s *secure, mechanism, user, password, stdin string, args ...string) (string, error) {
	t.Helper()
	bin := requireTool(t, "kcat")
	all := append([]string{"-b", s.addr, "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=" + mechanism,
		"-X", "sasl.username=" + user, "-X", "sasl.password=" + password, "-X", "ssl.ca.location=" + s.caFile}, args...)
	cmd := exec.CommandContext(ctx, bin, all...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%w\nstderr:\n%s", err, stderr.String())
	}
	return stdout.String(), err
}

// TestSecurityKcatSCRAM512 drives librdkafka over SASL_SSL with SCRAM-SHA-512: a user made with
// `weir user create` produces, consumes and consumes in a group; a wrong password and an unknown
// user are refused and logged with the user and address.
func TestSecurityKcatSCRAM512(t *testing.T) {
	requireTool(t, "kcat")
	ctx := testContext(t, 2*time.Minute)
	s := secureNode(t)
	cli := []string{"--brokers", s.addr, "--tls-ca", s.caFile, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "admin"}
	env := []string{"WEIR_SASL_PASSWORD=" + adminPassword}
	weirCLI(ctx, t, env, "carol-secret\n", append([]string{"user", "create", "carol", "--password-stdin"}, cli...)...)
	if list := weirCLI(ctx, t, env, "", append([]string{"user", "list"}, cli...)...); !strings.Contains(list, "carol\tSCRAM-SHA-512(8192)") ||
		!strings.Contains(list, "admin\tSCRAM-SHA-256(8192),SCRAM-SHA-512(8192)") {
		t.Fatalf("weir user list:\n%s", list)
	}
	weirCLI(ctx, t, env, "", append([]string{"topic", "create", "kcat-secure", "--partitions", "2"}, cli...)...)

	if _, err := kcatSecure(ctx, t, s, "SCRAM-SHA-512", "carol", "carol-secret", seqLines(20), "-P", "-t", "kcat-secure"); err != nil {
		t.Fatalf("kcat produce: %v", err)
	}
	out, err := kcatSecure(ctx, t, s, "SCRAM-SHA-512", "carol", "carol-secret", "", "-C", "-t", "kcat-secure", "-e", "-q")
	if err != nil || len(strings.Fields(out)) != 20 {
		t.Fatalf("kcat consume: %v\n%s", err, out)
	}
	out, err = kcatSecure(ctx, t, s, "SCRAM-SHA-512", "carol", "carol-secret", "", "-G", "kcat-secure-group", "kcat-secure",
		"-X", "auto.offset.reset=earliest", "-e", "-q")
	if err != nil || len(strings.Fields(out)) != 20 {
		t.Fatalf("kcat group consume: %v\n%s", err, out)
	}

	for _, bad := range []struct{ user, password string }{{"carol", "wrong"}, {"mallory", "carol-secret"}} {
		_, err := kcatSecure(ctx, t, s, "SCRAM-SHA-512", bad.user, bad.password, "", "-L", "-m", "5")
		if err == nil || !strings.Contains(err.Error(), "authentication failed: invalid credentials") {
			t.Fatalf("kcat as %s with a wrong password: %v", bad.user, err)
		}
		if log := s.output.String(); !strings.Contains(log, "SASL authentication failed") || !strings.Contains(log, "user="+bad.user) {
			t.Fatalf("no log line of %s's failed authentication:\n%s", bad.user, log)
		}
	}

	weirCLI(ctx, t, env, "", append([]string{"user", "delete", "carol"}, cli...)...)
	if _, err := kcatSecure(ctx, t, s, "SCRAM-SHA-512", "carol", "carol-secret", "", "-L", "-m", "5"); err == nil {
		t.Fatal("kcat as a deleted user was served")
	}
}

// TestSecuritySaramaPLAIN produces and consumes with sarama over SASL_SSL with PLAIN.
func TestSecuritySaramaPLAIN(t *testing.T) {
	ctx := testContext(t, time.Minute)
	s := secureNode(t)
	s.createTopic(ctx, t, "sarama-plain", 1, nil)
	cfg := saramaConfig()
	cfg.Net.TLS.Enable = true
	cfg.Net.TLS.Config = &tls.Config{RootCAs: s.ca.Pool, MinVersion: tls.VersionTLS12}
	cfg.Net.SASL.Enable = true
	cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	cfg.Net.SASL.User, cfg.Net.SASL.Password = "admin", adminPassword
	cfg.Producer.Return.Successes = true
	p, err := sarama.NewSyncProducer([]string{s.addr}, cfg)
	if err != nil {
		t.Fatalf("sarama producer over SASL_SSL/PLAIN: %v", err)
	}
	defer p.Close()
	for i := range 10 {
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "sarama-plain", Value: sarama.StringEncoder(fmt.Sprint(i))}); err != nil {
			t.Fatalf("sarama produce: %v", err)
		}
	}
	c, err := sarama.NewConsumer([]string{s.addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition("sarama-plain", 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	for i := range 10 {
		select {
		case m := <-pc.Messages():
			if string(m.Value) != fmt.Sprint(i) {
				t.Fatalf("record %d is %q", i, m.Value)
			}
		case err := <-pc.Errors():
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatalf("sarama read %d of 10", i)
		}
	}
	cfg.Net.SASL.Password = "wrong"
	if _, err := sarama.NewSyncProducer([]string{s.addr}, cfg); err == nil {
		t.Fatal("sarama with a wrong PLAIN password connected")
	}
}

// TestSecurityPythonSCRAM runs kafka-python 2.0.2's round trip over SASL_SSL with SCRAM-SHA-256,
// which hand-shakes with SaslHandshake v0 and sends bare tokens.
func TestSecurityPythonSCRAM(t *testing.T) {
	requireKafkaPython(t)
	ctx := testContext(t, 90*time.Second)
	s := secureNode(t)
	s.createTopic(ctx, t, "py-secure", 1, nil)
	conf, err := json.Marshal(map[string]any{
		"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-256",
		"sasl_plain_username": "admin", "sasl_plain_password": adminPassword, "ssl_cafile": s.caFile,
	})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, debianPython, "testdata/kafka_python_roundtrip.py", s.addr, "py-secure")
	cmd.Env = append(os.Environ(), "KAFKA_PYTHON_CONFIG="+string(conf))
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kafka-python over SASL_SSL: %v\nstderr:\n%s", err, stderr.String())
	}
	if lines := strings.Split(strings.TrimSpace(stdout.String()), "\n"); len(lines) != 100 || lines[99] != "99 py-099" {
		t.Fatalf("kafka-python read back %d lines:\n%s", len(lines), stdout.String())
	}
}

// TestSecurityJavaSCRAM runs the Java client's copy (weir.e2e.TxnCopy, transactional, with a
// group) over SASL_SSL with SCRAM-SHA-512, its truststore the CA's PEM file.
func TestSecurityJavaSCRAM(t *testing.T) {
	javaClasspath(t)
	ctx := testContext(t, 2*time.Minute)
	s := secureNode(t)
	in, out := "java-secure-in", "java-secure-out"
	s.createTopic(ctx, t, in, 3, nil)
	s.createTopic(ctx, t, out, 3, nil)
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Topic: in, Value: fmt.Appendf(nil, "v%d", i)})
	}
	if err := s.client(t).ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	props := filepath.Join(t.TempDir(), "client.properties")
	tlstest.WriteFile(t, props, []byte(strings.Join([]string{
		"security.protocol=SASL_SSL",
		"sasl.mechanism=SCRAM-SHA-512",
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="` + adminPassword + `";`,
		"ssl.truststore.type=PEM",
		"ssl.truststore.location=" + s.caFile,
	}, "\n")+"\n"))
	cmd := javaCommand(ctx, javaClasspath(t), "TxnCopy", s.addr, in, out, "java-secure", "txn", "20")
	cmd.Env = append(os.Environ(), "WEIR_CLIENT_CONFIG="+props)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("java TxnCopy over SASL_SSL: %v\nstderr:\n%s\nstdout:\n%s", err, stderr.String(), stdout.String())
	}
	copied := strings.Count(stdout.String(), "out copied-")
	if copied != 20 || !strings.HasSuffix(strings.TrimSpace(stdout.String()), "done") {
		t.Fatalf("java TxnCopy over SASL_SSL copied %d of 20:\n%s", copied, stdout.String())
	}
}

// TestSecurityCluster runs three voters, each with a SASL_SSL listener beside the PLAINTEXT
// inter-broker one: Metadata on the secure listener gives every broker's secure endpoint, and a
// SCRAM client over TLS produces with acks=all (followers replicating over the inter-broker listener)
// and consumes in a group.
func TestSecurityCluster(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	ca := tlstest.NewCA(t)
	dir := t.TempDir()
	certFile, keyFile := ca.Server(t, "weir").Write(t, dir, "server")
	ports := pickPorts(t, 3)
	secureAddrs := freeAddrs(t, 3)
	voters := voterList(ports[:3])
	nodes := make([]*node, 3)
	for i := range nodes {
		nodes[i] = newNode(t, nodeOptions{
			NodeID: int32(i + 1), Ports: ports[i], Voters: voters, SASLSSL: secureAddrs[i],
			Env:  []string{"WEIR_BOOTSTRAP_USER=admin:" + adminPassword},
			Args: append([]string{"--tls-cert", certFile, "--tls-key", keyFile, "--group-initial-rebalance-delay", "0s"}, clusterArgs...),
		})
	}
	for _, n := range nodes {
		n.launch()
	}
	for _, n := range nodes {
		n.waitHealthy()
	}
	waitAgree(ctx, t, nodes, hasBrokers(1, 2, 3))
	if err := createTopicRF(ctx, t, nodes[0], "secure-rf3", 3, 3); err != nil {
		t.Fatal(err)
	}

	opts := []kgo.Opt{
		kgo.SeedBrokers(secureAddrs[1]),
		kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}),
		kgo.SASL(scram.Auth{User: "admin", Pass: adminPassword}.AsSha512Mechanism()),
	}
	cl := nodes[1].newClient(t, append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))...)
	defer cl.Close()
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range meta.Brokers {
		if want := secureAddrs[b.NodeID-1]; net.JoinHostPort(b.Host, fmt.Sprint(b.Port)) != want {
			t.Fatalf("broker %d on the secure listener at %s:%d, want %s", b.NodeID, b.Host, b.Port, want)
		}
	}
	var recs []*kgo.Record
	for i := range 100 {
		recs = append(recs, &kgo.Record{Topic: "secure-rf3", Value: fmt.Appendf(nil, "r%d", i)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("acks=all produce over SASL_SSL to a three-replica topic: %v", err)
	}
	cons := nodes[1].newClient(t, append(opts, kgo.ConsumeTopics("secure-rf3"), kgo.ConsumerGroup("secure-cluster"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	defer cons.Close()
	for got := 0; got < 100; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		got += fs.NumRecords()
	}
	for _, tp := range topicOf(t, metadata(ctx, t, nodes[0]), "secure-rf3").Partitions {
		if len(tp.ISR) != 3 {
			t.Errorf("partition %d ISR %v, want all three replicas", tp.Partition, tp.ISR)
		}
	}
}
