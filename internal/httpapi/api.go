// Package httpapi is weir's HTTP API (docs/http.md): publish, poll and commit through consumer
// groups, reads by offset, an SSE tail of a partition, and administration of topics, groups and the
// cluster, all as JSON.
//
// The API is a Kafka client of its own node. A publish appends the records of the partitions the node
// leads in process, through the node's Kafka produce path (Options.Produce), and produces the others
// with franz-go clients connected over loopback to the node's Kafka listener: a producer at acks=all
// with kgo's default partitioner for a topic yet to be created, and one with the manual partitioner
// for records whose partition is chosen (murmur2 of the key, as every Kafka client's default
// partitioner, or named by the record). It also holds a pool of clients for Fetch requests, and one
// kgo group consumer per HTTP group member, so that the coordinator cannot tell an HTTP member from a
// Kafka one. What must be known
// before a request body is read (does the topic exist, how large may the body be) comes from the node's
// metadata image through Metadata, without a round trip.
//
// Resources are bounded: HTTP group members and SSE streams per node, the body of a publish by the
// topic's max.message.bytes, every request by a timeout. Close, which the node calls inside its drain,
// ends the streams, makes every member leave its group and closes the clients.
package httpapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/weir-mq/weir/internal/acl"
	"github.com/weir-mq/weir/internal/clock"
)

const (
	// requestTimeout bounds every request but the SSE streams; timeout_ms may lower it.
	requestTimeout = 30 * time.Second
	// waitMax bounds the wait parameter of polls and reads.
	waitMax = 30 * time.Second
	// recordsMax bounds the max parameter of polls and reads; recordsDefault is its default.
	recordsMax     = 10000
	recordsDefault = 500
	// bodyMax bounds the bodies of the requests other than publish.
	bodyMax = 1 << 20
	// DefaultMembersMax and DefaultStreamsMax are the per-node caps on HTTP group members and SSE
	// streams.
	DefaultMembersMax = 256
	DefaultStreamsMax = 256
	// fetchersMax bounds the reads by offset served at once, each on a Fetch connection of its own (a
	// parked Fetch delays the answers behind it on its connection).
	fetchersMax = 32
)

// TopicInfo is what the API reads about a topic from the node's metadata image.
type TopicInfo struct {
	Partitions      int32
	MaxMessageBytes int
}

// LocalReplica is a replica the answering node hosts: its log end offset and its size on disk.
type LocalReplica struct {
	LogEndOffset int64
	SizeBytes    int64
}

// Metadata is the node's metadata image and replicas, as the API reads them without a round trip.
type Metadata interface {
	// ClusterID is the cluster's id.
	ClusterID() string
	// Topic is the topic as the image holds it; false for a topic it does not hold.
	Topic(name string) (TopicInfo, bool)
	// AutoCreate reports whether a produce to an unknown topic creates it (auto.create.topics.enable),
	// and the max.message.bytes such a topic gets.
	AutoCreate() (maxMessageBytes int, ok bool)
	// Leads reports whether the image names this node the partition's leader.
	Leads(topic string, partition int32) bool
	// Local is the node's own replica of a partition; false when it hosts none.
	Local(topic string, partition int32) (LocalReplica, bool)
	// TopicBytes is the node's count, since it started, of the record batch bytes it appended to
	// the topic as leader and sent of it in Fetch answers (/metrics' weir_topic_bytes_in_total and
	// weir_topic_bytes_out_total).
	TopicBytes(topic string) (in, out uint64)
}

// Clock is the API's time source, clock.System on a node: HTTP members' idle time and the read
// deadline of a request's body read Now, and the loop that expires members and an SSE stream's retry
// wait on After. The read deadline is set on the connection, which the operating system's clock
// times, so a test's clock must not put Now behind it.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// Options configure the API.
type Options struct {
	// Brokers are the seed addresses of the node's own Kafka listener.
	Brokers []string
	// Metadata reads the node's image.
	Metadata Metadata
	// Ready reports whether the node serves Kafka clients; before, every request answers 503
	// not_ready.
	Ready func() bool
	// Clock is the API's time; clock.System when nil.
	Clock Clock
	// Logger receives the API's logs; slog.Default() when nil.
	Logger *slog.Logger
	// MembersMax and StreamsMax cap HTTP group members and SSE streams; zero means
	// DefaultMembersMax and DefaultStreamsMax.
	MembersMax int
	StreamsMax int
	// Authorize, when set, decides for each request what its principal may do; nil allows
	// everything (a node without an authenticating HTTP listener).
	Authorize Authorizer
	// TLS and SASL, when set, are how the API's Kafka clients connect to Brokers: the node's
	// inter-broker listener and its credentials (docs/security.md, Node to node).
	TLS  *tls.Config
	SASL sasl.Mechanism
	// Produce serves a Produce request in the node's own process, as its Kafka listener serves a
	// client's at acks=all, without the Kafka ACLs (the API authorizes its callers itself). Publishes
	// use it for the partitions the node leads (produce.go, "Publishes in process").
	Produce func(ctx context.Context, req *kmsg.ProduceRequest) *kmsg.ProduceResponse
}

// newClient is a Kafka client of Brokers with the Options' TLS and SASL, and extra.
func (o *Options) newClient(extra ...kgo.Opt) (*kgo.Client, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(o.Brokers...)}
	if o.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(o.TLS))
	}
	if o.SASL != nil {
		opts = append(opts, kgo.SASL(o.SASL))
	}
	return kgo.NewClient(append(opts, extra...)...)
}

// API serves the HTTP API. Its clients connect lazily, on the first request that needs them.
type API struct {
	opts   Options
	log    *slog.Logger
	cl     *kgo.Client // producer (default partitioner), admin, metadata
	manual *kgo.Client // producer of records whose partition is chosen
	// keyless turns, one publish after another, the partition of a publish's records without a key.
	keyless atomic.Uint32
	adm     *kadm.Client
	members *members
	fetch   *fetchPool
	streams chan struct{} // one token per open SSE stream

	// ctx ends on Close: polls and streams watch it.
	ctx    context.Context
	cancel context.CancelFunc
	closed atomic.Bool
	wg     sync.WaitGroup
}

// New builds the API; Close releases it.
func New(opts Options) (*API, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Clock == nil {
		opts.Clock = clock.System{}
	}
	if opts.MembersMax <= 0 {
		opts.MembersMax = DefaultMembersMax
	}
	if opts.StreamsMax <= 0 {
		opts.StreamsMax = DefaultStreamsMax
	}
	a := &API{opts: opts, log: opts.Logger, streams: make(chan struct{}, opts.StreamsMax)}
	producer := func(extra ...kgo.Opt) (*kgo.Client, error) {
		return a.opts.newClient(append([]kgo.Opt{
			kgo.ClientID("weir-http"), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerLinger(0), kgo.AllowAutoTopicCreation(), kgo.RecordDeliveryTimeout(requestTimeout),
			kgo.ProducerBatchMaxBytesFn(a.batchMaxBytes),
		}, extra...)...)
	}
	var err error
	if a.cl, err = producer(); err != nil {
		return nil, err
	}
	if a.manual, err = producer(kgo.RecordPartitioner(kgo.ManualPartitioner())); err != nil {
		a.cl.Close()
		return nil, err
	}
	a.adm = kadm.NewClient(a.cl)
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.fetch = newFetchPool(fetchersMax, func() (*kgo.Client, error) {
		return a.opts.newClient(kgo.ClientID("weir-http-read"))
	})
	a.members = newMembers(a, opts.MembersMax)
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		a.members.expireLoop(a.ctx)
	}()
	return a, nil
}

// batchMaxBytes bounds the shared producers' record batches of topic by its max.message.bytes, so
// that records of concurrent publishes, each within the limit, are not put together in a batch the
// broker refuses (kgo's default is about 1 MB for every topic). kgo asks once per partition, when it
// first produces to it: a later change of the config applies after the node restarts.
func (a *API) batchMaxBytes(topic string) int32 {
	const lo, hi = 512, 1 << 30
	limit := 1000012 // kgo's default
	if t, ok := a.opts.Metadata.Topic(topic); ok {
		limit = t.MaxMessageBytes
	} else if auto, ok := a.opts.Metadata.AutoCreate(); ok {
		limit = auto
	}
	return int32(min(max(limit, lo), hi))
}

// Close ends the SSE streams and the polls in progress, makes every HTTP member leave its group and
// closes the clients. Requests after it answer 503 shutting_down.
func (a *API) Close() {
	if a.closed.Swap(true) {
		return
	}
	a.cancel()
	a.wg.Wait()
	a.members.closeAll()
	a.fetch.close()
	a.manual.Close()
	a.cl.Close()
}

// Handler is the API's routes, to be mounted under /v1/ and /v3/ of the node's HTTP mux.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	route := func(pattern string, h func(http.ResponseWriter, *http.Request) error, needs ...need) {
		mux.HandleFunc(pattern, a.serve(h, needs))
	}
	topic := func(op acl.Operation) need { return need{op, acl.ResourceTopic, "topic"} }
	group := func(op acl.Operation) need { return need{op, acl.ResourceGroup, "group"} }
	cluster := func(op acl.Operation) need { return need{op, acl.ResourceCluster, ""} }
	// The permissions are those Kafka asks of the requests each endpoint makes (docs/security.md).
	route("POST /v1/topics/{topic}/records", a.publish, topic(acl.OpWrite))
	route("POST /v3/clusters/{cluster}/topics/{topic}/records", a.publishV3, topic(acl.OpWrite))
	route("GET /v3/clusters", a.listClustersV3, cluster(acl.OpDescribe))

	route("GET /v1/groups/{group}/records", a.poll, group(acl.OpRead), need{acl.OpRead, acl.ResourceTopic, "?topic"})
	route("POST /v1/groups/{group}/offsets", a.commit, group(acl.OpRead))
	route("DELETE /v1/groups/{group}/members/{member}", a.leave, group(acl.OpRead))

	route("GET /v1/topics/{topic}/partitions/{partition}/records", a.read, topic(acl.OpRead))
	route("GET /v1/topics/{topic}/partitions/{partition}/stream", a.stream, topic(acl.OpRead))

	route("GET /v1/topics", a.listTopics)
	route("POST /v1/topics", a.createTopic, cluster(acl.OpCreate))
	route("GET /v1/topics/{topic}", a.describeTopic, topic(acl.OpDescribe))
	route("DELETE /v1/topics/{topic}", a.deleteTopic, topic(acl.OpDelete))
	route("GET /v1/topics/{topic}/configs", a.topicConfigs, topic(acl.OpDescribeConfigs))
	route("PATCH /v1/topics/{topic}/configs", a.alterTopicConfigs, topic(acl.OpAlterConfigs))

	route("GET /v1/groups", a.listGroups)
	route("GET /v1/groups/{group}", a.describeGroup, group(acl.OpDescribe))
	route("DELETE /v1/groups/{group}", a.deleteGroup, group(acl.OpDelete))
	route("POST /v1/groups/{group}/reset-offsets", a.resetOffsets, group(acl.OpRead))

	route("GET /v1/cluster", a.cluster, cluster(acl.OpDescribe))
	route("GET /v1/openapi.json", a.openAPI)
	notFound := func(w http.ResponseWriter, r *http.Request) error {
		if allow := allowed(mux, r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			return errorf(http.StatusMethodNotAllowed, "method_not_allowed", "%s %s: the endpoint takes %s",
				r.Method, r.URL.Path, strings.Join(allow, ", "))
		}
		return errorf(http.StatusNotFound, "not_found", "no endpoint %s %s (docs/http.md lists them)", r.Method, r.URL.Path)
	}
	route("/v1/", notFound)
	route("/v3/", notFound)
	return mux
}

// allowed lists the methods mux routes r's path for other than through the catch-all patterns /v1/
// and /v3/: empty when no endpoint has the path.
func allowed(mux *http.ServeMux, r *http.Request) []string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "/v1/" && pattern != "/v3/" && pattern != "" {
			allow = append(allow, m)
		}
	}
	return allow
}

// serve runs h after the checks every request passes (the node serves, the API is not closed), and
// answers the error h returns.
func (a *API) serve(h func(http.ResponseWriter, *http.Request) error, needs []need) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var err error
		switch {
		case a.closed.Load():
			err = errorf(http.StatusServiceUnavailable, "shutting_down", "the node is shutting down")
		case a.opts.Ready != nil && !a.opts.Ready():
			err = errorf(http.StatusServiceUnavailable, "not_ready", "the node does not serve yet")
		default:
			if err = a.authorize(r, needs); err == nil {
				err = h(w, r)
			}
		}
		if err != nil {
			writeError(w, err)
		}
	}
}

// requestContext is the request's context bounded by its timeout (timeout_ms, at most
// requestTimeout) and ended by Close; the body must be read within it too.
func (a *API) requestContext(w http.ResponseWriter, r *http.Request) (context.Context, context.CancelFunc, error) {
	timeout := requestTimeout
	if s := r.URL.Query().Get("timeout_ms"); s != "" {
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil || ms <= 0 {
			return nil, nil, errorf(http.StatusBadRequest, "invalid_parameter", "timeout_ms %q: want a positive number of milliseconds", s)
		}
		timeout = min(timeout, time.Duration(ms)*time.Millisecond)
	}
	_ = http.NewResponseController(w).SetReadDeadline(a.opts.Clock.Now().Add(timeout))
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	stop := context.AfterFunc(a.ctx, cancel)
	return ctx, func() { stop(); cancel() }, nil
}

// readBody reads the request body, at most limit bytes (413 body_too_large past it).
func readBody(w http.ResponseWriter, r *http.Request, limit int) ([]byte, error) {
	return readBodyInto(new(bytes.Buffer), w, r, limit)
}

// readBodyInto is readBody into buf, grown first to hold the body's Content-Length when it gives one
// within the limit (and the room bytes.Buffer wants to see the end of the body without growing).
func readBodyInto(buf *bytes.Buffer, w http.ResponseWriter, r *http.Request, limit int) ([]byte, error) {
	buf.Grow(int(min(max(r.ContentLength, 0), int64(limit))) + bytes.MinRead)
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, int64(limit)))
	body := buf.Bytes()
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, errorf(http.StatusRequestEntityTooLarge, "body_too_large", "the body is over its limit of %d bytes; nothing was written", limit)
	case err != nil:
		return nil, errorf(http.StatusBadRequest, "invalid_json", "reading the body: %v", err)
	}
	return body, nil
}

// queryInt reads an integer query parameter within [lo, hi]; def when absent.
func queryInt(r *http.Request, name string, def, lo, hi int64) (int64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < lo || v > hi {
		return 0, errorf(http.StatusBadRequest, "invalid_parameter", "%s %q: want an integer from %d to %d", name, s, lo, hi)
	}
	return v, nil
}

// queryWait reads the wait parameter: milliseconds, at most waitMax.
func queryWait(r *http.Request) (time.Duration, error) {
	ms, err := queryInt(r, "wait", 0, 0, waitMax.Milliseconds())
	return time.Duration(ms) * time.Millisecond, err
}

// pathPartition reads the partition path element.
func pathPartition(r *http.Request) (int32, error) {
	s := r.PathValue("partition")
	p, err := strconv.ParseInt(s, 10, 32)
	if err != nil || p < 0 {
		return 0, errorf(http.StatusBadRequest, "invalid_parameter", "partition %q: want a partition number", s)
	}
	return int32(p), nil
}
