// Package server builds a weir node from its Config and owns its lifecycle and shutdown order.
//
// Every node runs the Raft-backed metadata store (internal/controller): a node named in
// --controller-voters is a voter, any other node a non-voter; with no voters the node is the one
// voter of its own cluster (the embedded single-node default runs the same code).
//
// Start order: the data directory; the Kafka and HTTP listeners (so that the advertised port is known
// when the port is 0, and a port in use ends the start before anything else runs); the metadata store
// under <data-dir>/controller, which listens on --controller-addr, joins the quorum and registers this
// node as a broker; the HTTP server (/healthz answers 503 until the node serves, /v1/cluster/status
// answers at once); then Start
// waits, for as long as its ctx allows, until the store is ready (a controller leader is known,
// this start's registration is applied locally and the broker is unfenced), so that nothing below
// acts on an image that is not yet caught up. Then meta.properties is checked or written; Start hands
// the image to the partition Manager's reconciler and waits for its pass, which opens the replicas the
// image places here (recovering the logs not shut down cleanly); the group coordinator starts loading
// the partitions of __consumer_offsets this node leads, and the transaction coordinator those of
// __transaction_state (writing markers through the api package's MarkerWriter, taking producer ids from
// the blocks the broker's InitProducerId takes them from); the loop that hands every metadata change to
// the Manager and the coordinators starts; the API handlers and the Kafka protocol server start; the
// preferred-leader rebalancer starts; /healthz answers 200.
//
// Shutdown order (Run on a cancelled context, or Node.Shutdown):
//  1. /healthz turns 503, so load balancers stop sending clients here.
//  2. The HTTP API closes (internal/httpapi: its SSE streams end, its group members leave their
//     groups, its requests answer 503). Parked fetches answer at once with what they have (api.Broker.Drain) and the group coordinator
//     closes (parked JoinGroup and SyncGroup requests get NOT_COORDINATOR; offset commits being
//     written are answered once durable), then the transaction coordinator closes (its markers in
//     flight stop; the next leader of each __transaction_state partition writes them again), then
//     the Kafka server
//     stops accepting, lets every request already read get its reply (produces acknowledged), and
//     closes the connections. If the drain outlasts the shutdown context (Config.DrainTimeout for
//     Run and Close), the remaining connections are cut and Shutdown returns ErrDrainTimeout.
//  3. The rebalancer and the reconciler that follows metadata changes stop.
//  4. The partition Manager closes every log: synced, with a clean-shutdown marker.
//  5. The metadata store closes: heartbeats stop, Raft shuts down, the controller listener closes.
//  6. The HTTP server closes.
//
// Shutdown is bounded whatever state the node is in: once the drain deadline has passed, the steps
// still running get closeTimeout more; past that, Shutdown gives up on them (a Reply that ignores its
// cancelled context, an fsync that never returns), logs the step it was in and returns
// ErrShutdownStuck, so that `weir serve` exits non-zero instead of hanging.
//
// A failed data directory (docs/architecture.md, durability contract rule 4; docs/storage.md, "A failed
// data directory"): when the partition Manager reports that a write or fsync failed
// (partition.ErrDirFailed), the failed log is already offline and acknowledges nothing more. The
// node logs the cause at Error, asks the controller to fence it at once (controller.Store.FenceSelf),
// so every partition it led gets a new leader where another replica can lead, logs how many moved and
// how many (all of them on a single node) are offline until it is back, then shuts down in the order
// above; the failed log is closed without a clean-shutdown marker. Node.Done is closed, Node.Err and
// Run return ErrStorageFailed wrapping the cause and saying where the partitions went, and `weir
// serve` exits non-zero. Restarted once the disk is repaired, the node recovers the log's tail on open
// and rejoins as a follower (on a single node, its partitions serve again).
package server

import (
	"cmp"
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-mq/weir/internal/clock"
	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/group"
	"github.com/weir-mq/weir/internal/httpapi"
	"github.com/weir-mq/weir/internal/kafka/api"
	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/sharestate"
	"github.com/weir-mq/weir/internal/txn"
	"github.com/weir-mq/weir/internal/vfs"
)

// DefaultShutdownTimeout is the default Config.DrainTimeout: how long Run and Node.Close wait for
// in-flight requests to drain.
const DefaultShutdownTimeout = 30 * time.Second

var (
	// ErrBadConfig is returned by Start for a Config it cannot run (a malformed address or voter
	// list).
	ErrBadConfig = errors.New("server: bad config")
	// ErrBadDataDir is returned by Start when the data directory belongs to another node or cluster,
	// its meta.properties is unreadable, or it was written by the single-node metadata store of an
	// earlier weir (which the Raft store does not import: start such a node on a fresh directory).
	ErrBadDataDir = errors.New("server: data directory does not belong to this node")
	// ErrNotReady is returned by Start when its context ended before the controller quorum was
	// ready (no leader elected, or this broker not registered).
	ErrNotReady = errors.New("server: controller quorum not ready")
	// ErrClosed is returned by Node.Shutdown after the first call, and after the node stopped itself.
	ErrClosed = errors.New("server: node closed")
	// ErrStorageFailed is returned by Run and Node.Err when the node stopped itself because a write
	// or fsync in its data directory failed; it wraps partition.ErrDirFailed and the cause.
	ErrStorageFailed = errors.New("server: node stopped after its data directory failed")
)

// fenceTimeout bounds the fence request of a node whose data directory failed; past it, the
// node's session timeout moves its leaderships instead.
const fenceTimeout = 5 * time.Second

// Run starts a node and serves until ctx is cancelled (SIGTERM/SIGINT in `weir serve`), then shuts
// it down in the documented order, draining in-flight requests for up to Config.DrainTimeout.
// A node waiting for its controller quorum waits until the quorum is ready or ctx is cancelled.
func Run(ctx context.Context, cfg Config) error {
	n, err := Start(ctx, cfg)
	if errors.Is(err, ErrNotReady) && ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		n.logger.Info("shutting down", "reason", context.Cause(ctx))
	case err := <-n.failed:
		n.logger.Error("a server failed; shutting down", "err", err)
	case <-n.stopped:
		return n.Err()
	}
	if err := n.Close(); !errors.Is(err, ErrClosed) {
		return err
	}
	return n.Err()
}

// Node is a running weir node.
type Node struct {
	cfg      Config
	logger   *slog.Logger
	clock    Clock
	store    *controller.Store
	replicas *partition.Manager
	groups   *group.Coordinator
	txn      *txn.Coordinator
	shares   *sharestate.Coordinator
	markers  *api.MarkerWriter
	broker   *api.Broker
	metrics  *metrics
	kafka    *wire.Server
	http     *http.Server
	api      *httpapi.API
	// kafkaLn is the inter-broker listener's socket, one of kafkaLns, every Kafka listener's.
	kafkaLn  net.Listener
	kafkaLns []boundListener
	tls      *tlsReloader
	// interBroker is how the node's own clients authenticate to the inter-broker listeners.
	interBroker wire.Credentials
	httpLn      net.Listener

	ready      atomic.Bool
	failed     chan error
	serveStop  context.CancelFunc
	wg         sync.WaitGroup
	unsubStore func()

	// dirFailed receives the partition Manager's report of a failed data directory; the lifecycle
	// goroutine takes it, or a shutdown request from stopReq, and closes stopped when the node is
	// down, err set.
	dirFailed chan error
	stopReq   chan shutdownRequest
	stopped   chan struct{}
	err       error
	// bgStop ends the background loops (the rebalancer); bgWG waits for them.
	bgStop context.CancelFunc
	bgWG   sync.WaitGroup
	// step names the shutdown step running, for the log line of a shutdown that gives up; stepsDone
	// is closed once the steps have all ended, even after Shutdown gave up on them.
	step      atomic.Pointer[string]
	stepsDone chan struct{}

	// delays runs the releasers of the delay-topic partitions this node leads.
	delays *api.DelayReleasers
}

// Start builds and starts a node. ctx bounds the start, including the wait for the controller
// quorum; the node runs until Close or Shutdown.
func Start(ctx context.Context, cfg Config) (_ *Node, err error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	voters, err := controller.ParseVoters(cfg.ControllerVoters)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	fsys := cfg.FS
	if fsys == nil {
		fsys = vfs.OS
	}
	if err := fsys.MkdirAll(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("server: create data dir: %w", err)
	}
	if err := fsys.SyncDir(filepath.Dir(filepath.Clean(cfg.DataDir))); err != nil {
		return nil, fmt.Errorf("server: sync data dir parent: %w", err)
	}
	if err := checkMetaNode(fsys, cfg.DataDir, cfg.NodeID); err != nil {
		return nil, err
	}
	if err := checkNoLocalStore(fsys, cfg.DataDir); err != nil {
		return nil, err
	}
	n := &Node{
		cfg: cfg, logger: logger, failed: make(chan error, 2), metrics: newMetrics(clock.System{}), clock: cfg.Clock,
		dirFailed: make(chan error, 1), stopReq: make(chan shutdownRequest), stopped: make(chan struct{}),
	}
	if err := cfg.CheckListeners(); err != nil {
		return nil, err
	}
	ib, _ := cfg.interBroker()
	var lc net.ListenConfig
	defer func() {
		if err != nil {
			n.abortStart()
		}
	}()
	if err = n.listenKafka(ctx, &lc, ib); err != nil {
		return nil, err
	}
	// Both client listeners are bound before the controller starts, so a port in use ends the start
	// before Raft has logged anything.
	if n.httpLn, err = lc.Listen(ctx, "tcp", cfg.HTTPAddr); err != nil {
		return nil, fmt.Errorf("server: http listener: %w", err)
	}
	self := n.kafkaLns[ib].endpoint
	n.interBroker = n.interBrokerCredentials(n.kafkaLns[ib].Listener)
	ctrlAddr, err := advertisedController(cfg, voters)
	if err != nil {
		return nil, err
	}
	ctrlServerTLS, ctrlClientTLS := n.controllerTLS()
	n.store, err = controller.OpenRaft(controller.RaftConfig{
		Self:              controller.Broker{NodeID: cfg.NodeID, Host: self.Host, Port: self.Port, Rack: cfg.Rack, Listeners: n.endpoints()},
		Dir:               filepath.Join(cfg.DataDir, "controller"),
		Addr:              cfg.ControllerAddr,
		ServerTLS:         ctrlServerTLS,
		ClientTLS:         ctrlClientTLS,
		AdvertisedAddr:    ctrlAddr,
		Voters:            voters,
		Clock:             n.clock,
		Logger:            logger,
		HeartbeatInterval: cfg.BrokerHeartbeatInterval,
		SessionTimeout:    cfg.BrokerSessionTimeout,
		RaftTimeout:       cfg.ControllerRaftTimeout,
	})
	if err != nil {
		if errors.Is(err, controller.ErrInvalidConfig) {
			return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
		}
		return nil, err
	}
	if n.api, err = n.newHTTPAPI(self.Host); err != nil {
		return nil, err
	}
	n.http = &http.Server{Handler: n.httpAuth(n.httpHandler()), ReadHeaderTimeout: 10 * time.Second}
	httpLn := n.httpLn
	if tc := n.httpTLS(); tc != nil {
		httpLn = tls.NewListener(httpLn, tc)
	}
	n.goServe("http", func() error { return n.http.Serve(httpLn) })

	if len(voters) == 0 {
		logger.Info("starting as a single node: this node is the controller quorum's only voter and elects itself",
			"node_id", cfg.NodeID, "controller_addr", cfg.ControllerAddr)
	} else {
		voter := slices.ContainsFunc(voters, func(v controller.Voter) bool { return v.NodeID == cfg.NodeID })
		logger.Info("waiting for the controller quorum", "node_id", cfg.NodeID, "controller_addr", cfg.ControllerAddr,
			"voters", len(voters), "voter", voter)
	}
	if err = n.store.WaitReady(ctx); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotReady, err)
	}
	if err = n.bootstrapUser(ctx); err != nil {
		return nil, err
	}
	img := n.store.Image()
	if err = ensureMeta(fsys, cfg.DataDir, metaProperties{version: metaFormatVersion, nodeID: cfg.NodeID, clusterID: img.ClusterID}); err != nil {
		return nil, err
	}
	// Every node, the single-node default included, hosts the replicas the image assigns to it,
	// leading or following as the image says: ISR changes go to the controller, follower fetches
	// reach leaders over the Kafka protocol.
	n.replicas, err = partition.NewManager(cfg.DataDir, partition.ManagerOptions{
		FS: fsys, Logger: logger, NodeID: cfg.NodeID, ISR: n.store, Transport: api.ReplicaTransport{Credentials: n.interBroker},
		ReplicaLagMax: cfg.ReplicaLagMax, OnDirFailure: n.reportDirFailure, Latest: n.store.Image,
		Lease: n.store.Lease, Clock: n.clock, Journal: cfg.StorageJournal,
	})
	if err != nil {
		return nil, err
	}
	n.metrics.replicas.Store(n.replicas)
	n.metrics.meta.Store(n.store)
	n.replicas.Submit(img)
	if err = n.replicas.WaitReconciled(ctx, img.Version); err != nil {
		return nil, fmt.Errorf("server: open replicas: %w", err)
	}
	if n.groups, err = newGroupCoordinator(cfg, n.store, n.replicas, n.clock, logger); err != nil {
		return nil, err
	}
	n.groups.Reconcile(img)
	n.metrics.groups.Store(n.groups)
	pids := api.NewProducerIDs(n.store)
	if n.markers, err = api.NewMarkerWriter(api.MarkerWriterOptions{
		NodeID: cfg.NodeID, Metadata: n.store, Replicas: n.replicas, Groups: n.groups, InterBroker: n.interBroker,
	}); err != nil {
		return nil, err
	}
	if n.txn, err = txn.NewCoordinator(txn.Options{
		NodeID: cfg.NodeID, Metadata: n.store, Replicas: n.replicas, Clock: n.clock, Markers: n.markers,
		ProducerIDs: pids.Take, Config: cfg.Txn, Logger: logger,
	}); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	n.txn.Reconcile(img)
	if cfg.ShareGroups {
		if n.shares, err = sharestate.NewCoordinator(sharestate.Options{
			NodeID: cfg.NodeID, Metadata: n.store, Replicas: n.replicas, Clock: n.clock, Config: cfg.ShareState, Logger: logger,
		}); err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		n.shares.Reconcile(img)
	}
	n.broker, err = api.New(api.Options{
		NodeID:   cfg.NodeID,
		Metadata: n.store, Replicas: n.replicas, Groups: n.groups, GroupMarkers: n.groups, Txn: n.txn, ProducerIDs: pids,
		ShareState: n.shares, SharePartition: cfg.SharePartition, ShareGroup: cfg.ShareGroup,
		DeadLetterTopicPrefix: cfg.DeadLetterTopicPrefix, ShareOwnerIdle: cfg.ShareOwnerIdle,
		DisableTxnVerification: cfg.TxnVerificationDisabled,
		InterBroker:            n.interBroker,
		TransactionVersion:     cmp.Or(cfg.TransactionVersion, DefaultTransactionVersion),
		StaticConfigs:          staticBrokerConfigs(cfg, n.kafkaLns),
		SASL:                   n.saslOptions(),
		ACL:                    aclConfig(cfg),
		QuotaWindowNum:         cfg.QuotaWindowNum,
		QuotaWindowSize:        cfg.QuotaWindowSize,
		Clock:                  n.clock, Logger: logger,
	})
	if err != nil {
		return nil, err
	}
	n.metrics.broker.Store(n.broker)
	n.delays = api.NewDelayReleasers(n.broker)
	n.metrics.delays.Store(n.delays)
	n.delays.Reconcile(img)
	n.startReconciler()
	n.kafka = &wire.Server{Handler: n.metrics.wrap(n.broker), Logger: logger}
	serveCtx, stop := context.WithCancel(context.Background())
	n.serveStop = stop
	n.serveKafka(serveCtx)
	n.startRebalancer()
	go n.lifecycle()
	n.ready.Store(true)
	logger.Info("weir node serving", "node_id", cfg.NodeID, "cluster_id", img.ClusterID,
		"controller_id", img.ControllerID, "brokers", len(img.Brokers),
		"kafka_addr", n.kafkaLn.Addr().String(), "advertised", net.JoinHostPort(self.Host, strconv.Itoa(int(self.Port))),
		"listeners", len(n.kafkaLns),
		"http_addr", n.httpLn.Addr().String(), "data_dir", cfg.DataDir, "topics", len(img.Topics))
	return n, nil
}

// abortStart releases what a failed Start had opened.
func (n *Node) abortStart() {
	if n.bgStop != nil {
		n.bgStop()
		n.bgWG.Wait()
	}
	if n.serveStop != nil {
		n.serveStop()
	}
	if n.unsubStore != nil {
		n.unsubStore()
	}
	if n.delays != nil {
		n.delays.Close()
	}
	if n.groups != nil {
		n.groups.Close()
	}
	if n.txn != nil {
		n.txn.Close()
	}
	if n.shares != nil {
		n.shares.Close()
	}
	if n.markers != nil {
		n.markers.Close()
	}
	if n.broker != nil {
		n.broker.Close()
	}
	if n.replicas != nil {
		_ = n.replicas.Close()
	}
	if n.store != nil {
		_ = n.store.Close()
	}
	switch {
	case n.http != nil:
		_ = n.http.Close()
	case n.httpLn != nil:
		_ = n.httpLn.Close()
	}
	if n.api != nil {
		n.api.Close()
	}
	for _, l := range n.kafkaLns {
		_ = l.ln.Close()
	}
	n.wg.Wait()
}

// goServe runs a server loop; an unexpected end is reported on n.failed so Run can stop.
func (n *Node) goServe(name string, serve func() error) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		err := serve()
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.failed <- fmt.Errorf("server: %s: %w", name, err)
		}
	}()
}

// startReconciler follows metadata changes, from the image of the moment it subscribes: every change is
// handed to the partition Manager's reconciler, the one place that opens and deletes replicas (it logs a
// pass that fails), and once that pass is done, to the group coordinator, which then finds the replicas
// it is to lead in their new state. The API handlers hand their own changes to the Manager too and wait
// a moment for its pass (api.Broker.reconcile). The coordinators stop the shards of partitions whose
// replicas do not lead for want of the broker's lease, so while the lease is lapsed the loop also
// wakes when it comes back, and passes over the same image again (waitImage).
func (n *Node) startReconciler() {
	changes, unsub := n.store.Subscribe()
	ctx, cancel := context.WithCancel(context.Background())
	n.unsubStore = func() {
		unsub()
		cancel()
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for {
			img := n.store.Image()
			n.replicas.Submit(img)
			err := n.replicas.WaitReconciled(ctx, img.Version)
			if ctx.Err() != nil || errors.Is(err, partition.ErrClosed) {
				return
			}
			n.groups.Reconcile(img)
			n.txn.Reconcile(img)
			if n.shares != nil {
				n.shares.Reconcile(img)
			}
			n.delays.Reconcile(img)
			n.broker.ReconcileShares(img)
			if !waitImage(ctx, changes, n.store.LeaseHeld, n.clock) {
				return
			}
		}
	}()
}

// leaseRecheck is how often the reconciler looks whether a lapsed lease is back.
const leaseRecheck = 100 * time.Millisecond

// waitImage waits for the next metadata change, or, while leaseHeld is false, for it to turn true,
// looking every leaseRecheck: a coordinator shard stopped because its replica did not lead without the
// lease starts again then, on the image the node already has, instead of at the next change, which a
// quiet cluster may not make for a long time. It returns false once ctx ends.
func waitImage(ctx context.Context, changes <-chan struct{}, leaseHeld func() bool, clk Clock) bool {
	for {
		var back <-chan time.Time
		if !leaseHeld() {
			back = clk.After(leaseRecheck)
		}
		select {
		case <-ctx.Done():
			return false
		case <-changes:
			return true
		case <-back:
			if leaseHeld() {
				return true
			}
		}
	}
}

// KafkaAddr is the address the Kafka protocol listens on (its real port when Config asked for 0).
func (n *Node) KafkaAddr() string { return n.kafkaLn.Addr().String() }

// HTTPAddr is the address the HTTP server listens on.
func (n *Node) HTTPAddr() string { return n.httpLn.Addr().String() }

// Close shuts the node down as Shutdown does, draining for up to Config.DrainTimeout.
func (n *Node) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.drainTimeout())
	defer cancel()
	return n.Shutdown(ctx)
}

// Shutdown stops the node in the order the package comment gives. When ctx ends before in-flight
// requests have drained, their connections are cut, the logs are closed anyway and Shutdown returns
// ErrDrainTimeout; steps still running closeTimeout after that are given up on (ErrShutdownStuck).
// Later calls, and calls once the node has stopped itself after a data directory failure, return
// ErrClosed.
func (n *Node) Shutdown(ctx context.Context) error {
	req := shutdownRequest{ctx: ctx, done: make(chan error, 1)}
	select {
	case n.stopReq <- req:
		err := <-req.done
		<-n.stopped
		return err
	case <-n.stopped:
		return ErrClosed
	}
}

// Done is closed once the node has stopped: after Shutdown, or by itself after its data directory
// failed.
func (n *Node) Done() <-chan struct{} { return n.stopped }

// Err is ErrStorageFailed, wrapping the cause, once the node has stopped itself after its data
// directory failed; nil otherwise.
func (n *Node) Err() error {
	select {
	case <-n.stopped:
		return n.err
	default:
		return nil
	}
}

// shutdownRequest is one Shutdown call handed to the lifecycle goroutine.
type shutdownRequest struct {
	ctx  context.Context
	done chan error
}

// reportDirFailure is the partition Manager's OnDirFailure: it never blocks, and the first report
// wins.
func (n *Node) reportDirFailure(err error) {
	select {
	case n.dirFailed <- err:
	default:
	}
}

// lifecycle owns the node's stop: it runs the one shutdown, asked for by Shutdown or forced by a
// failed data directory, and then closes stopped.
func (n *Node) lifecycle() {
	defer close(n.stopped)
	select {
	case req := <-n.stopReq:
		err := n.shutdown(req.ctx)
		if err == nil {
			n.logger.Info("weir node stopped cleanly")
		}
		req.done <- err
	case cause := <-n.dirFailed:
		n.err = n.stopAfterDirFailure(cause)
	}
}

// stopAfterDirFailure fences this broker through the controller, so its leaderships move at once,
// then shuts the node down, and returns the error the node stops with.
func (n *Node) stopAfterDirFailure(cause error) error {
	n.logger.Error("a write or fsync in the data directory failed: the log is offline and this node stops; "+
		"repair the disk and restart the node (its logs recover on open)", "data_dir", n.cfg.DataDir, "err", cause)
	n.ready.Store(false)
	fctx, cancel := context.WithTimeout(context.Background(), fenceTimeout)
	fenceErr := n.store.FenceSelf(fctx)
	cancel()
	outcome := fenceOutcomeOf(n.store.Image(), n.cfg.NodeID)
	switch {
	case fenceErr != nil:
		n.logger.Warn("could not fence this broker through the controller; once its session expires, "+outcome.String(),
			"err", fenceErr)
	case outcome.offline > 0:
		n.logger.Warn("this broker is fenced; " + outcome.String())
	default:
		n.logger.Info("this broker is fenced; " + outcome.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.drainTimeout())
	defer cancel()
	if err := n.shutdown(ctx); err != nil {
		n.logger.Warn("shutting down after the data directory failed", "err", err)
	}
	n.logger.Error("weir node stopped after its data directory failed", "err", cause)
	return fmt.Errorf("%w (%s): %w", ErrStorageFailed, outcome, cause)
}

// shutdownSteps runs the shutdown order of the package comment; shutdown bounds it.
func (n *Node) shutdownSteps(ctx context.Context) error {
	n.ready.Store(false)
	var errs []error
	n.setStep("draining the kafka connections")
	n.api.Close()
	n.broker.Drain()
	n.delays.Close()
	n.groups.Close()
	n.txn.Close()
	if n.shares != nil {
		n.shares.Close()
	}
	n.markers.Close()
	n.broker.Close()
	if err := n.kafka.Shutdown(ctx); err != nil {
		n.logger.Error("in-flight requests outlasted the drain deadline; their kafka connections were cut", "err", err)
		errs = append(errs, fmt.Errorf("%w: %w", ErrDrainTimeout, err))
	}
	n.serveStop()
	n.setStep("stopping the rebalancer and the reconciler")
	n.bgStop()
	n.bgWG.Wait()
	n.unsubStore()
	n.setStep("closing the partition logs")
	if err := n.replicas.Close(); err != nil {
		errs = append(errs, fmt.Errorf("server: close logs: %w", err))
	}
	n.setStep("closing the metadata store")
	if err := n.store.Close(); err != nil {
		errs = append(errs, fmt.Errorf("server: close metadata: %w", err))
	}
	n.setStep("closing the http server")
	if err := n.http.Shutdown(ctx); err != nil {
		_ = n.http.Close()
	}
	n.setStep("waiting for the servers' goroutines")
	n.wg.Wait()
	return errors.Join(errs...)
}

// advertisedController is the controller address other nodes dial to reach this one: a voter's own
// entry in the voter list (the store's choice when this returns ""), else --controller-addr with an
// empty or wildcard host replaced by the machine's host name. A port of 0 is left to the store,
// which then uses the listener's real port.
func advertisedController(cfg Config, voters []controller.Voter) (string, error) {
	for _, v := range voters {
		if v.NodeID == cfg.NodeID {
			return "", nil
		}
	}
	host, port, err := net.SplitHostPort(cfg.ControllerAddr)
	if err != nil {
		return "", fmt.Errorf("%w: controller address %q: %w", ErrBadConfig, cfg.ControllerAddr, err)
	}
	if port == "0" {
		return "", nil
	}
	return net.JoinHostPort(routableHost(host), port), nil
}

// routableHost turns an empty or wildcard listen host into the machine's host name.
func routableHost(host string) string {
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		h, err := os.Hostname()
		if err != nil {
			return "localhost"
		}
		return h
	}
	return host
}

// checkNoLocalStore refuses a data directory whose metadata was kept by the single-node file store
// of an earlier weir (controller/metadata.json without a Raft log): the Raft store would start from
// an empty image, and the partition Manager would then delete every replica the image does not name.
func checkNoLocalStore(fsys vfs.FS, dataDir string) error {
	dir := filepath.Join(dataDir, "controller")
	if _, err := fsys.Stat(filepath.Join(dir, "metadata.json")); err != nil {
		return nil
	}
	if _, err := fsys.Stat(filepath.Join(dir, "raft.db")); err == nil {
		return nil
	}
	return fmt.Errorf("%w: %s holds metadata of the single-node store of an earlier weir, which the "+
		"Raft controller does not import; start this node on a fresh data directory", ErrBadDataDir, dir)
}

// newGroupCoordinator builds the node's group coordinator, its member ids seeded from crypto/rand.
func newGroupCoordinator(cfg Config, meta group.MetadataStore, replicas group.Replicas, clock group.Clock, logger *slog.Logger) (*group.Coordinator, error) {
	var seed [16]byte
	if _, err := crand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("server: seed: %w", err)
	}
	c, err := group.NewCoordinator(group.Options{
		NodeID: cfg.NodeID, Metadata: meta, Replicas: replicas, Clock: clock, Logger: logger, Config: cfg.Groups,
		Rand: rand.New(rand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:]))),
	})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	return c, nil
}
