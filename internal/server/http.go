package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/console"
	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/httpapi"
	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/vfs"
)

// statusTimeout bounds how long /v1/cluster/status waits for the controller leader's answer. A node
// without its controller lease does not ask: it answers with its own part at once.
const statusTimeout = 5 * time.Second

// ClusterStatus is the JSON body of GET /v1/cluster/status, what `weir cluster status` prints. The
// node that answers fills Node, ClusterID, Ready, ImageVersion and Brokers from its own image, and
// Controller from the controller leader (through the controller RPC); when no leader answers,
// Controller is absent and Error says why.
type ClusterStatus struct {
	// Node is the id of the node that answered.
	Node int32 `json:"node"`
	// ClusterID is empty while the node has not applied the first controller's election.
	ClusterID string `json:"cluster_id"`
	// Ready is true once the node serves Kafka clients.
	Ready bool `json:"ready"`
	// LeaseHeld is true while the node holds its controller lease and so may lead partitions; a node
	// that lost it (the controller quorum is unreachable) serves as no partition's leader.
	LeaseHeld bool `json:"lease_held"`
	// ImageVersion is the number of metadata commands the answering node has applied.
	ImageVersion int64 `json:"image_version"`
	// ImageControllerID is the controller leader as the answering node's image names it.
	ImageControllerID int32 `json:"image_controller_id"`
	// Brokers are the registered brokers of the answering node's image.
	Brokers []BrokerStatus `json:"brokers"`
	// Controller is the controller leader's view: Raft membership, sessions, partition problems.
	Controller *controller.Status `json:"controller,omitempty"`
	// Error says why Controller is absent.
	Error string `json:"error,omitempty"`
	// Replicas are the replicas the answering node hosts, with each follower's progress on the ones
	// it leads; empty before its replicas are open.
	Replicas []partition.ReplicaStatus `json:"replicas"`
	// LocalUnderReplicated counts the partitions the answering node leads whose ISR is smaller than
	// their replica set.
	LocalUnderReplicated int `json:"local_under_replicated"`
}

// BrokerStatus is one registered broker in a ClusterStatus.
type BrokerStatus struct {
	NodeID int32  `json:"node_id"`
	Host   string `json:"host"`
	Port   int32  `json:"port"`
	Rack   string `json:"rack,omitempty"`
	Fenced bool   `json:"fenced"`
}

// httpHandler serves /healthz (200 while the node serves and holds its controller lease, 503 before,
// while it shuts down and without the lease), /readyz (as /healthz, and 503 too until every partition
// the node hosts has it back in its ISR),
// /metrics (Prometheus text format) and /v1/cluster/status (200 with the controller's view, 503 with
// the local view when no controller leader answers), Go's profiles under /debug/pprof/ (the HTTP
// listener binds localhost unless the operator says otherwise), the rest of /v1/ and /v3/: the
// HTTP API of internal/httpapi (docs/http.md), and the web console of internal/console at /.
func (n *Node) httpHandler() http.Handler {
	mux := http.NewServeMux()
	api := n.api.Handler()
	mux.Handle("/v1/", api)
	mux.Handle("/v3/", api)
	mux.Handle("/", console.Handler())
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if reason := n.unhealthy(); reason != "" {
			http.Error(w, reason, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		reason := n.unhealthy()
		if reason == "" {
			reason = outOfSync(n.store.Image(), n.cfg.NodeID)
		}
		if reason != "" {
			http.Error(w, reason, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", n.metrics.handler())
	mux.HandleFunc("GET /v1/cluster/status", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), statusTimeout)
		defer cancel()
		st := n.clusterStatus(ctx)
		w.Header().Set("Content-Type", "application/json")
		if st.Controller == nil {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(st)
	})
	return mux
}

// unhealthy says why /healthz answers 503: the node does not serve yet (or drains), or it lost its
// controller lease; "" when it is healthy.
func (n *Node) unhealthy() string {
	if !n.ready.Load() {
		return "not serving"
	}
	if until, held := n.store.Lease(); !held {
		return fmt.Sprintf("no controller lease since %s: the controller quorum is unreachable, so this node leads nothing",
			until.UTC().Format(time.RFC3339Nano))
	}
	return ""
}

// outOfSync says which partitions hosted on node are not back in their ISR in img (the node has not
// caught up with their leaders yet, or they have no leader), naming the first few; "" when there are
// none. /readyz waits for this, so that a rolling restart moves to the next node only once this one
// holds a full copy of its partitions again.
func outOfSync(img *controller.Image, node int32) string {
	const named = 3
	var n int
	var first []string
	for _, name := range img.TopicNames() {
		t := img.Topics[name]
		for p, st := range t.States {
			if !slices.Contains(st.Replicas, node) || slices.Contains(st.ISR, node) {
				continue
			}
			if n++; n <= named {
				first = append(first, fmt.Sprintf("%s-%d", name, p))
			}
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d partitions hosted here are not back in their ISR yet (%s)", n, strings.Join(first, ", "))
}

// clusterStatus builds the answer of /v1/cluster/status.
func (n *Node) clusterStatus(ctx context.Context) ClusterStatus {
	img := n.store.Image()
	st := ClusterStatus{
		Node: n.cfg.NodeID, ClusterID: img.ClusterID, Ready: n.ready.Load(), LeaseHeld: n.store.LeaseHeld(),
		ImageVersion: img.Version, ImageControllerID: img.ControllerID,
		Brokers: make([]BrokerStatus, 0, len(img.Brokers)),
	}
	for _, b := range img.Brokers {
		st.Brokers = append(st.Brokers, BrokerStatus{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack, Fenced: b.Fenced})
	}
	if mgr := n.metrics.replicas.Load(); mgr != nil {
		st.Replicas = mgr.ReplicaStatus()
		st.LocalUnderReplicated = mgr.UnderReplicated()
	}
	if !st.LeaseHeld {
		st.Error = "no controller lease: the controller quorum has not acknowledged this node's heartbeats"
		return st
	}
	cs, err := n.store.Status(ctx)
	if err != nil {
		st.Error = err.Error()
		return st
	}
	st.Controller = &cs
	return st
}

// newHTTPAPI builds the node's HTTP API, a Kafka client of the node's own inter-broker listener
// with the node's credentials. It dials the loopback address, and verifies a TLS listener's
// certificate for the host the listener advertises, which is what the certificate names.
func (n *Node) newHTTPAPI(advertisedHost string) (*httpapi.API, error) {
	tlsConfig := n.interBroker.TLS
	if tlsConfig != nil {
		tlsConfig = tlsConfig.Clone()
		tlsConfig.ServerName = advertisedHost
	}
	return httpapi.New(httpapi.Options{
		Brokers: []string{loopback(n.kafkaLn.Addr())}, Metadata: httpMetadata{n}, Ready: n.ready.Load, Clock: n.clock,
		Logger: n.logger, Authorize: n.httpAuthorize, TLS: tlsConfig, SASL: n.interBroker.SASL,
		MembersMax: n.cfg.HTTPMembersMax, Produce: n.produceHere,
	})
}

// produceHere serves the HTTP API's produce to partitions this node leads, counted in the topics' bytes
// in as the Kafka listener counts a client's. The API serves nothing before the node is ready, which is
// after the broker is set.
func (n *Node) produceHere(ctx context.Context, req *kmsg.ProduceRequest) *kmsg.ProduceResponse {
	resp := n.broker.ProduceHere(ctx, req)
	n.metrics.countProduced(req, resp)
	return resp
}

// loopback is the address to dial a listener bound at addr from the same machine: a wildcard host
// becomes the loopback address.
func loopback(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return addr.String()
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(tcp.Port))
}

// httpMetadata is the node's image and replicas as the HTTP API reads them.
type httpMetadata struct{ n *Node }

func (m httpMetadata) ClusterID() string { return m.n.store.Image().ClusterID }

func (m httpMetadata) Topic(name string) (httpapi.TopicInfo, bool) {
	img := m.n.store.Image()
	t, ok := img.Topic(name)
	if !ok {
		return httpapi.TopicInfo{}, false
	}
	return httpapi.TopicInfo{Partitions: t.Partitions, MaxMessageBytes: int(img.LogConfigOn(t, m.n.cfg.NodeID).MaxMessageBytes)}, true
}

func (m httpMetadata) Leads(topic string, p int32) bool {
	t, ok := m.n.store.Image().Topic(topic)
	if !ok {
		return false
	}
	st, ok := t.Partition(p)
	return ok && st.Leader == m.n.cfg.NodeID
}

func (m httpMetadata) AutoCreate() (int, bool) {
	img := m.n.store.Image()
	return int(img.LogConfigOn(nil, m.n.cfg.NodeID).MaxMessageBytes), img.AutoCreateTopics()
}

// Local is the node's replica's log end offset and the size of its directory's files.
func (m httpMetadata) Local(topic string, p int32) (httpapi.LocalReplica, bool) {
	if m.n.replicas == nil {
		return httpapi.LocalReplica{}, false
	}
	r, ok := m.n.replicas.Replica(topic, p)
	if !ok {
		return httpapi.LocalReplica{}, false
	}
	fsys := m.n.cfg.FS
	if fsys == nil {
		fsys = vfs.OS
	}
	dir := filepath.Join(m.n.cfg.DataDir, topic+"-"+strconv.Itoa(int(p)))
	names, _ := fsys.ReadDir(dir)
	var size int64
	for _, name := range names {
		if fi, err := fsys.Stat(filepath.Join(dir, name)); err == nil && fi.Mode().IsRegular() {
			size += fi.Size()
		}
	}
	return httpapi.LocalReplica{LogEndOffset: r.LogEndOffset(), SizeBytes: size}, true
}

func (m httpMetadata) TopicBytes(topic string) (in, out uint64) {
	tb, ok := m.n.metrics.topics.Load(topic)
	if !ok {
		return 0, 0
	}
	return tb.(*topicBytes).in.Load(), tb.(*topicBytes).out.Load()
}
