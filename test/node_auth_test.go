package test

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/tlstest"
)

// nodeCertArgs writes a node certificate of ca named cn, and the certificates of ca and of the
// other trusted CAs, to a new directory and returns the serve flags that use them: mutual TLS on
// the controller listener and on the SSL Kafka listener.
func nodeCertArgs(t *testing.T, ca *tlstest.CA, cn string, trusted ...*tlstest.CA) []string {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile := ca.Node(t, pkix.Name{CommonName: cn}).Write(t, dir, "node")
	caFile := filepath.Join(dir, "ca.pem")
	pems := slices.Clone(ca.PEM)
	for _, other := range trusted {
		pems = append(pems, other.PEM...)
	}
	tlstest.WriteFile(t, caFile, pems)
	return []string{"--tls-cert", certFile, "--tls-key", keyFile, "--tls-ca", caFile, "--tls-client-auth", "required",
		"--controller-tls"}
}

// brokerIDs are the brokers a Metadata response lists.
func brokerIDs(resp *kmsg.MetadataResponse) []int32 {
	var ids []int32
	for _, b := range resp.Brokers {
		ids = append(ids, b.NodeID)
	}
	slices.Sort(ids)
	return ids
}

// TestNodeAuthMutualTLS runs three nodes whose controller listener is under mutual TLS and whose one
// Kafka listener, the inter-broker one, is SSL with client certificates required, under ACLs with
// the nodes' certificate subjects as super users: the quorum forms, the brokers register, and a
// topic of replication factor 3 takes acks=all writes that every replica holds (a follower fetching
// as anyone else would be refused CLUSTER_ACTION). A fourth process with a certificate from another CA (trusting the cluster's CA
// too), and a fifth with no TLS at all, can neither join the quorum nor register; their attempts
// are refused and logged by the voters, a follower's fetch with the foreign certificate is refused
// at the handshake, and the cluster keeps taking writes, from a Kafka client and through the HTTP
// API (whose own client connects to the SSL listener with its node's certificate).
func TestNodeAuthMutualTLS(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	ca := tlstest.NewCA(t)
	ports := pickPorts(t, 5)
	voters := voterList(ports[:3])
	nodes := make([]*node, 3)
	for i := range nodes {
		nodes[i] = newNode(t, nodeOptions{
			NodeID: int32(i + 1), Ports: ports[i], Voters: voters, KafkaProtocol: "SSL",
			Args: append(append(nodeCertArgs(t, ca, fmt.Sprintf("node-%d", i+1)), "--authorizer", "acl",
				"--super-users", "User:CN=node-1;User:CN=node-2;User:CN=node-3;User:CN=test-client"), clusterArgs...),
		})
	}
	for _, n := range nodes {
		n.launch()
	}
	for _, n := range nodes {
		n.waitHealthy()
	}

	clientCert := ca.Client(t, pkix.Name{CommonName: "test-client"}).TLS(t)
	clientTLS := &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{clientCert}, MinVersion: tls.VersionTLS12}
	cl := nodes[0].client(t, kgo.DialTLSConfig(clientTLS), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
	adm := kadm.NewClient(cl)
	waitFor(ctx, t, "three registered brokers", func() bool {
		m, err := adm.BrokerMetadata(ctx)
		return err == nil && len(m.Brokers) == 3
	})
	const topic = "node-auth"
	waitFor(ctx, t, "the topic created", func() bool {
		resp, err := adm.CreateTopic(ctx, 1, 3, nil, topic)
		return err == nil && resp.Err == nil
	})
	produce := func(prefix string, count int) {
		t.Helper()
		for i := range count {
			r := &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s-%d", prefix, i)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce acks=all: %v", err)
			}
		}
	}
	produce("before", 50)
	// Every replica is in the ISR and holds the 50 records: followers fetched over the SSL listener
	// with their node certificates.
	waitFor(ctx, t, "three in-sync replicas at offset 50", func() bool {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return false
		}
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return false
		}
		p := md.Topics[topic].Partitions[0]
		end, _ := ends.Lookup(topic, 0)
		return end.Offset == 50 && len(p.ISR) == 3
	})

	foreign := tlstest.NewCA(t)
	intruders := []*node{
		newNode(t, nodeOptions{NodeID: 4, Ports: ports[3], Voters: voters, KafkaProtocol: "SSL",
			Args: append(nodeCertArgs(t, foreign, "node-4", ca), clusterArgs...)}),
		newNode(t, nodeOptions{NodeID: 5, Ports: ports[4], Voters: voters, Args: clusterArgs}),
	}
	for _, in := range intruders {
		in.launch()
	}
	// The foreign node trusts the cluster's CA as well as its own, so it is the voters that refuse
	// its certificate; the plain node's first byte is not a TLS handshake.
	refused := func(reason string) bool {
		for _, n := range nodes {
			for line := range strings.Lines(n.output.String()) {
				if strings.Contains(line, "controller: refused a connection: TLS handshake failed") && strings.Contains(line, reason) {
					return true
				}
			}
		}
		return false
	}
	waitFor(ctx, t, "the voters refusing both intruders", func() bool {
		return refused("certificate signed by unknown authority") && refused("first record does not look like a TLS handshake")
	})
	// The intruders have had several heartbeat intervals to register: the brokers are still three
	// and neither intruder serves.
	time.Sleep(3 * time.Second)
	if m, err := adm.BrokerMetadata(ctx); err != nil || len(m.Brokers) != 3 {
		t.Fatalf("brokers after the intruders tried to join: %+v, %v", m, err)
	}
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil || !slices.Equal(brokerIDs(resp), []int32{1, 2, 3}) {
		t.Fatalf("metadata brokers: %v, %v", brokerIDs(resp), err)
	}
	for _, in := range intruders {
		if healthy(in) {
			t.Fatalf("node %d serves without the cluster's credentials", in.id)
		}
	}

	// A follower's fetch with the foreign node's certificate does not get past the handshake.
	foreignCert := foreign.Node(t, pkix.Name{CommonName: "node-4"}).TLS(t)
	foreignTLS := &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{foreignCert}, MinVersion: tls.VersionTLS12}
	before := strings.Count(nodes[0].output.String(), "wire: TLS handshake failed")
	fetched := func() error {
		c, err := wire.Dialer{ClientID: "weir-replica", Credentials: wire.Credentials{TLS: foreignTLS}}.Dial(ctx, nodes[0].kafkaAddr())
		if err != nil {
			return err
		}
		defer c.Close()
		req := kmsg.NewPtrFetchRequest()
		req.Version = 12
		req.ReplicaID = 4
		req.MaxWaitMillis = 10
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = topic
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		_, err = c.RoundTrip(ctx, req)
		return err
	}()
	if fetched == nil {
		t.Fatal("a replica fetch with a certificate of another CA was answered")
	}
	waitFor(ctx, t, "node 1 logging the refused fetch", func() bool {
		return strings.Count(nodes[0].output.String(), "wire: TLS handshake failed") > before
	})

	produce("after", 50)
	// The HTTP API publishes through its own client of the SSL listener, with node 2's certificate
	// (a super user). Its HTTP listener is not secured, so its callers are User:ANONYMOUS, whom the
	// authorizer lets write to the topic.
	grant := kadm.NewACLs().Allow("User:ANONYMOUS").Topics(topic).Operations(kadm.OpWrite, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	if results, err := adm.CreateACLs(ctx, grant); err != nil || len(results) == 0 || results[0].Err != nil {
		t.Fatalf("grant ANONYMOUS WRITE: %v %+v", err, results)
	}
	// Node 2 sees the grant once its image has it: until then the publish is refused, and writes
	// nothing.
	// A publish that hangs fails the test saying so, rather than at the test's deadline.
	hc := &http.Client{Timeout: 20 * time.Second}
	waitFor(ctx, t, "the HTTP publish", func() bool {
		resp, err := hc.Post("http://"+nodes[1].ports.HTTP+"/v1/topics/"+topic+"/records", "application/json",
			strings.NewReader(`{"records":[{"value":"over-http"}]}`))
		if err != nil {
			t.Fatalf("HTTP publish: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusForbidden {
			t.Fatalf("HTTP publish: %s %s", resp.Status, body)
		}
		return resp.StatusCode == http.StatusOK
	})
	waitFor(ctx, t, "the cluster at offset 101 with three in-sync replicas", func() bool {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return false
		}
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return false
		}
		end, _ := ends.Lookup(topic, 0)
		return end.Offset == 101 && len(md.Topics[topic].Partitions[0].ISR) == 3
	})
}

// healthy reports whether n's /healthz answers 200.
func healthy(n *node) bool {
	client := &http.Client{Timeout: time.Second}
	resp, err := client.Get("http://" + n.ports.HTTP + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// waitFor polls ok every 100 ms until it holds, failing t with what when ctx ends first.
func waitFor(ctx context.Context, t *testing.T, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestNodeAuthSASLInterBroker runs three nodes whose one Kafka listener, the inter-broker one, is
// SASL_SSL: each authenticates to the others as the SCRAM-SHA-512 user broker (created at start
// as the bootstrap user), so followers replicate acks=all writes, and the HTTP API, a client of
// the same listener with the same credentials, publishes; a transaction over partitions the three
// nodes lead commits (KIP-890 verification and the markers go between the nodes). A replica
// connection with a wrong password is refused and logged.
func TestNodeAuthSASLInterBroker(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	ca := tlstest.NewCA(t)
	ports := pickPorts(t, 3)
	voters := voterList(ports[:3])
	const password = "broker-secret"
	nodes := make([]*node, 3)
	for i := range nodes {
		nodes[i] = newNode(t, nodeOptions{
			NodeID: int32(i + 1), Ports: ports[i], Voters: voters, KafkaProtocol: "SASL_SSL",
			Env: []string{"WEIR_BOOTSTRAP_USER=broker:" + password, "WEIR_INTER_BROKER_PASSWORD=" + password},
			Args: append(append(nodeCertArgs(t, ca, fmt.Sprintf("node-%d", i+1)),
				"--tls-client-auth", "none", "--inter-broker-sasl-user", "broker", "--sasl-failure-delay", "10ms"), clusterArgs...),
		})
	}
	for _, n := range nodes {
		n.launch()
	}
	for _, n := range nodes {
		n.waitHealthy()
	}
	clientTLS := &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12,
		Certificates: []tls.Certificate{ca.Client(t, pkix.Name{CommonName: "test-client"}).TLS(t)}}
	login := scram.Auth{User: "broker", Pass: password}.AsSha512Mechanism()
	cl := nodes[0].client(t, kgo.DialTLSConfig(clientTLS), kgo.SASL(login), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
	adm := kadm.NewClient(cl)
	const topic = "node-auth-sasl"
	waitFor(ctx, t, "the topic created", func() bool {
		resp, err := adm.CreateTopic(ctx, 1, 3, nil, topic)
		return err == nil && resp.Err == nil
	})
	for i := range 20 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "r-%d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce acks=all: %v", err)
		}
	}

	// The HTTP API is served over HTTPS with Basic credentials, and reaches the partition leader
	// through its own SASL_SSL clients.
	httpClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: clientTLS}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+nodes[1].ports.HTTP+"/v1/topics/"+topic+"/records",
		strings.NewReader(`{"records":[{"value":"over-http"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("broker", password)
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("HTTP publish: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP publish: %s %s", resp.Status, body)
	}
	waitFor(ctx, t, "21 records on three in-sync replicas", func() bool {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return false
		}
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return false
		}
		end, _ := ends.Lookup(topic, 0)
		return end.Offset == 21 && len(md.Topics[topic].Partitions[0].ISR) == 3
	})

	// A transaction over partitions led by the three nodes: the leaders verify with the coordinator
	// (KIP-890) and the coordinator writes its markers to every leader, all as broker.
	const txnTopic = "node-auth-txn"
	waitFor(ctx, t, "the transactional topic created", func() bool {
		resp, err := adm.CreateTopic(ctx, 3, 3, nil, txnTopic)
		return err == nil && resp.Err == nil
	})
	txnCl := nodes[0].client(t, kgo.DialTLSConfig(clientTLS), kgo.SASL(login), kgo.TransactionalID("node-auth-txn"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := txnCl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		for i := range 3 {
			r := &kgo.Record{Topic: txnTopic, Partition: p, Value: fmt.Appendf(nil, "txn-%d-%d", p, i)}
			if err := txnCl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("transactional produce: %v", err)
			}
		}
	}
	if err := txnCl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	// Each partition's last stable offset passes its three records and the commit marker.
	waitFor(ctx, t, "the commit markers on every partition", func() bool {
		stable, err := adm.ListCommittedOffsets(ctx, txnTopic)
		if err != nil || stable.Error() != nil {
			return false
		}
		ok := true
		for p := range int32(3) {
			o, found := stable.Lookup(txnTopic, p)
			ok = ok && found && o.Offset == 4
		}
		return ok
	})

	wrong := scram.Auth{User: "broker", Pass: "guess"}.AsSha512Mechanism()
	_, err = wire.Dialer{ClientID: "weir-replica", Credentials: wire.Credentials{TLS: clientTLS, SASL: wrong}}.Dial(ctx, nodes[0].kafkaAddr())
	if !errors.Is(err, wire.ErrAuthentication) {
		t.Fatalf("a replica connection with a wrong password: %v, want %v", err, wire.ErrAuthentication)
	}
	waitFor(ctx, t, "node 1 logging the failed authentication", func() bool {
		out := nodes[0].output.String()
		return strings.Contains(out, "authentication failed") && strings.Contains(out, "broker")
	})
}
