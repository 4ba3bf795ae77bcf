package partition

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/storage"
	"github.com/weir-mq/weir/internal/vfs"
)

var (
	simSeeds = flag.Int("seeds", 1000, "how many seeds TestSimulatedCluster runs")
	simSeed  = flag.Uint64("seed", 0, "run TestSimulatedCluster for this one seed, logging every step")
)

// TestSimulatedCluster runs three replicas of one partition — each a core on a storage.Log on its own
// in-memory disk — with a controller applying controller.Apply, on simulated time and a simulated
// network that delays, reorders and drops messages and cuts links, while nodes lose power (only synced
// bytes survive) and restart. A producer sends acks=all records to whichever node the controller names
// leader. A seed reproduces a run exactly. The invariants, checked at every step:
//   - an acknowledged record is never lost nor moved: every replica's log below its high watermark
//     agrees with every other's, and acknowledged records are part of that agreed prefix; after the
//     faults stop, the leader's high watermark covers every acknowledged record;
//   - a leader's high watermark never goes backwards within its leadership;
//   - no two nodes accept writes in one leader epoch.
func TestSimulatedCluster(t *testing.T) {
	if *simSeed != 0 {
		if err := runSimulation(*simSeed, t.Logf); err != nil {
			t.Fatal(err)
		}
		return
	}
	n := *simSeeds
	if testing.Short() {
		n = min(n, 100)
	}
	for seed := uint64(1); seed <= uint64(n); seed++ {
		if err := runSimulation(seed, nil); err != nil {
			t.Fatalf("seed %d: %v\nreplay: go test ./internal/partition/ -run TestSimulatedCluster -seed %d -v", seed, err, seed)
		}
	}
}

const (
	simNodes      = 3
	simStep       = 10 * time.Millisecond
	simFaultSteps = 400 // 4 s of faults
	simHealSteps  = 600 // then 6 s with every link up and every node running
	simSession    = 500 * time.Millisecond
	// simLeaseMargin is the heartbeat interval: a lease lasts a session timeout less one interval.
	simLeaseMargin = 50 * time.Millisecond
	simTopic       = "t"
)

// simMsg is a message in flight; deliver runs it at the receiver.
type simMsg struct {
	at       time.Duration
	seq      int
	from, to int32
	deliver  func()
}

// controllerID addresses the controller on the simulated network.
const controllerID = 0

type sim struct {
	rng   *rand.Rand
	logf  func(string, ...any)
	now   time.Duration
	seq   int
	msgs  []simMsg
	cut   map[[2]int32]bool
	nodes map[int32]*simNode2
	ctl   simController
	// acked maps an acknowledged record's id to its offset; committed holds the agreed prefix (the
	// record id at each offset below some replica's high watermark).
	acked     map[int64]int64
	committed []int64
	// writers is the node that accepted writes in each leader epoch; writeEpoch the latest epoch in
	// which one did.
	writers    map[int32]int32
	writeEpoch int32
	nextID     int64
	// producers send the records; each keeps one request outstanding.
	producers [2]simProducer
}

// simWait is an acks=all wait of a leader: the producer and the record it answers.
type simWait struct {
	pr *simProducer
	id int64
}

// simProducer is one producer: the request it has in flight (its record id, 0 when none), and the image
// it last refreshed its metadata from, every refresh.
type simProducer struct {
	inflight int64
	refresh  time.Duration
	view     *controller.Image
}

type simController struct {
	img    *controller.Image
	lastHB map[int32]time.Duration
}

// simNode2 is one broker of the simulation: its disk, its log and the core of its replica.
type simNode2 struct {
	id   int32
	fs   *vfs.Mem
	log  *storage.Log
	c    *core
	up   bool
	boot int
	// version is the image version the node applied; hwCheckpoint the high watermark it last persisted.
	version      int64
	hwCheckpoint int64
	// inflight is set while a follower's request to the leader is outstanding; request numbers it.
	inflight bool
	request  int
	// leaderHW is the high watermark seen while leading at leaderEpoch, for the monotonicity check.
	leaderEpoch int32
	leaderHW    int64
	// lease is when the node's controller lease ends; pendingLease the lease of the latest heartbeat
	// answer, which counts once the node has applied image pendingVersion.
	lease          time.Duration
	pendingLease   time.Duration
	pendingVersion int64
	// alters numbers the ISR proposals, so that each gets one outcome.
	alters int
	// waits maps the core's acks=all wait ids to the records they acknowledge.
	waits map[uint64]simWait
	// agreed is how far below its high watermark this node's log was checked against committed.
	agreed int64
}

func (s *sim) say(format string, args ...any) {
	if s.logf != nil {
		s.logf("%6s "+format, append([]any{s.now}, args...)...)
	}
}

func runSimulation(seed uint64, logf func(string, ...any)) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v\n%s", p, debug.Stack())
		}
	}()
	s := &sim{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), logf: logf, cut: map[[2]int32]bool{},
		nodes: map[int32]*simNode2{}, acked: map[int64]int64{}, writers: map[int32]int32{},
		producers: [2]simProducer{{refresh: 100 * time.Millisecond}, {refresh: time.Second}}}
	s.ctl = simController{img: controller.NewImage("sim", 1), lastHB: map[int32]time.Duration{}}
	defer func() {
		for _, nd := range s.nodes {
			if nd.log != nil {
				_ = nd.log.Close()
			}
		}
	}()
	for id := int32(1); id <= simNodes; id++ {
		fs := vfs.NewMem()
		// The data directory exists durably before the broker starts, as the Manager makes it.
		if err := fs.MkdirAll("/data"); err != nil {
			return err
		}
		if err := fs.SyncDir("/"); err != nil {
			return err
		}
		s.nodes[id] = &simNode2{id: id, fs: fs}
		if err := s.start(s.nodes[id]); err != nil {
			return err
		}
	}
	if err := s.apply(controller.CreateTopic{Name: simTopic, ID: controller.TopicID{1}, Partitions: 1, ReplicationFactor: simNodes,
		Replicas: [][]int32{{1, 2, 3}}, Configs: map[string]string{controller.ConfigMinInsyncReplicas: "2"}}); err != nil {
		return err
	}
	for step := 0; step < simFaultSteps+simHealSteps; step++ {
		if step < simFaultSteps {
			if err := s.fault(); err != nil {
				return err
			}
		} else if step == simFaultSteps {
			s.say("healing")
			clear(s.cut)
			for _, nd := range s.nodes {
				if !nd.up {
					if err := s.start(nd); err != nil {
						return err
					}
				}
			}
		}
		if err := s.step(step < simFaultSteps); err != nil {
			return fmt.Errorf("at %v: %w", s.now, err)
		}
		s.now += simStep
	}
	return s.settled()
}

// fault injects at most one fault this step.
func (s *sim) fault() error {
	id := int32(1 + s.rng.IntN(simNodes))
	nd := s.nodes[id]
	switch p := s.rng.Float64(); {
	case p < 0.006 && nd.up:
		s.say("node %d loses power", id)
		s.crash(nd)
	case p < 0.03 && !nd.up:
		return s.start(nd)
	case p < 0.04:
		other := int32(s.rng.IntN(simNodes + 1))
		if other != id {
			s.say("cut %d-%d", id, other)
			s.cut[link(id, other)] = true
		}
	case p < 0.06 && len(s.cut) > 0:
		s.say("heal links")
		clear(s.cut)
	}
	return nil
}

func link(a, b int32) [2]int32 { return [2]int32{min(a, b), max(a, b)} }

// send puts a message on the network: delayed 1-30 ms, dropped 2% of the time while faults run, and
// lost if the link is cut when it arrives.
func (s *sim) send(from, to int32, faults bool, deliver func()) {
	if faults && s.rng.Float64() < 0.02 {
		return
	}
	s.seq++
	s.msgs = append(s.msgs, simMsg{at: s.now + time.Duration(1+s.rng.IntN(30))*time.Millisecond, seq: s.seq,
		from: from, to: to, deliver: deliver})
}

// start boots a node: recovers its log from its disk and registers with a new incarnation.
func (s *sim) start(nd *simNode2) error {
	nd.boot++
	log, err := storage.Open("/data/"+simTopic+"-0", storage.Config{SegmentBytes: 1 << 30, SegmentAge: 24 * time.Hour,
		IndexIntervalBytes: 4096, MaxBatchBytes: 1 << 20, Flush: storage.FlushNever, RetentionBytes: -1, RetentionAge: -1},
		storage.Options{FS: nd.fs, Clock: s, Logger: quiet})
	if err != nil {
		return fmt.Errorf("node %d recovery: %w", nd.id, err)
	}
	p := newProducers()
	for h := range scanHeaders(log) {
		p.update(h, nil)
	}
	nd.log, nd.up, nd.inflight, nd.version, nd.waits, nd.agreed = log, true, false, 0, map[uint64]simWait{}, 0
	nd.c = newCore(log, nd.id, time.Second, true, p, log.DurableEndOffset(), min(nd.hwCheckpoint, log.EndOffset()))
	nd.leaderEpoch = -1
	nd.lease, nd.pendingLease, nd.pendingVersion = 0, 0, 0
	s.say("node %d starts: log end %d, high watermark %d", nd.id, log.EndOffset(), nd.c.hw)
	return s.apply(controller.RegisterBroker{Broker: controller.Broker{NodeID: nd.id, Host: "n", Port: nd.id,
		Incarnation: strconv.Itoa(nd.boot)}})
}

func scanHeaders(log *storage.Log) func(func(record.Header) bool) {
	return func(yield func(record.Header) bool) {
		_ = log.ScanBatches(log.StartOffset(), yield)
	}
}

// crash cuts a node's power: its disk keeps only what was synced.
func (s *sim) crash(nd *simNode2) {
	nd.up = false
	_ = nd.log.Close()
	nd.log = nil
	nd.fs = nd.fs.CrashClone(s.rng, vfs.CrashOptions{KeepUnsyncedProbability: 0.5})
}

// Now is the simulated time, as the logs' clock.
func (s *sim) Now() time.Time { return time.UnixMilli(1e12).Add(s.now) }

// apply changes the controller's image and pushes it to every node.
func (s *sim) apply(cmd controller.Command) error {
	img, err := controller.Apply(s.ctl.img, cmd)
	if err != nil {
		return fmt.Errorf("apply %T: %w", cmd, err)
	}
	s.ctl.img = img
	for id := int32(1); id <= simNodes; id++ {
		s.send(controllerID, id, false, func() { s.learn(s.nodes[id], img) })
	}
	return nil
}

// simPartition is the simulated partition's state in img.
func simPartition(img *controller.Image) (*controller.PartitionState, bool) {
	t, ok := img.Topics[simTopic]
	if !ok {
		return nil, false
	}
	return t.Partition(0)
}

// learn hands a node a newer image.
func (s *sim) learn(nd *simNode2, img *controller.Image) {
	if !nd.up || img.Version <= nd.version {
		return
	}
	nd.version = img.Version
	st, ok := simPartition(img)
	if !ok {
		return
	}
	s.say("node %d learns image %d: leader %d epoch %d isr %v", nd.id, img.Version, st.Leader, st.LeaderEpoch, st.ISR)
	nd.c.setState(State{Partition: st, MinISR: 2, Live: func(id int32) bool {
		b, ok := img.Broker(id)
		return ok && !b.Fenced
	}}, s.Now())
	nd.c.durableAt(nd.log.DurableEndOffset())
	s.carryOut(nd)
}

// leased reports whether a node holds its controller lease, as the Replica asks controller.Store.Lease.
func (s *sim) leased(nd *simNode2) bool {
	if nd.pendingLease > nd.lease && nd.version >= nd.pendingVersion {
		nd.lease = nd.pendingLease
	}
	return s.now < nd.lease
}

// carryOut does what the node's core decided, as the owner does.
func (s *sim) carryOut(nd *simNode2) {
	rd := nd.c.takeReady()
	if rd.alter != nil {
		req := *rd.alter
		req.Topic = simTopic
		nd.alters++
		n, boot := nd.alters, nd.boot
		// The proposal's outcome, once: the controller's answer, or a timeout like the RPC's.
		outcome := func(st *controller.PartitionState, err error) {
			if nd.up && nd.boot == boot && nd.alters == n {
				nd.alters++
				nd.c.altered(req.ISR, st, err)
				s.carryOut(nd)
			}
		}
		s.seq++
		s.msgs = append(s.msgs, simMsg{at: s.now + time.Second, seq: s.seq, from: nd.id, to: nd.id, deliver: func() {
			outcome(nil, errors.New("AlterPartition timed out"))
		}})
		s.send(nd.id, controllerID, true, func() {
			img, err := controller.Apply(s.ctl.img, req)
			var st *controller.PartitionState
			if err == nil {
				s.ctl.img = img
				st, _ = simPartition(img)
				for id := int32(1); id <= simNodes; id++ {
					s.send(controllerID, id, false, func() { s.learn(s.nodes[id], img) })
				}
			}
			s.send(controllerID, nd.id, false, func() { outcome(st, err) })
		})
	}
	for _, a := range rd.answered {
		w, ok := nd.waits[a.id]
		if !ok {
			continue
		}
		delete(nd.waits, a.id)
		err := a.err
		s.send(nd.id, controllerID+100, true, func() { s.answered(w.pr, w.id, err) })
	}
}

// answered is the producer receiving the answer to its request for record id.
func (s *sim) answered(pr *simProducer, id int64, err error) {
	if pr.inflight == id {
		pr.inflight = 0
	}
	off, ok := s.acked[id]
	if err != nil || !ok || off >= 0 {
		return
	}
	off = -off - 1
	s.acked[id] = off
	s.say("record %d acknowledged at %d", id, off)
}

// step delivers the messages due, runs each node's periodic work and the producer.
func (s *sim) step(faults bool) error {
	slices.SortFunc(s.msgs, func(a, b simMsg) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return a.seq - b.seq
	})
	for len(s.msgs) > 0 && s.msgs[0].at <= s.now {
		m := s.msgs[0]
		s.msgs = s.msgs[1:]
		if s.cut[link(m.from, m.to)] || (m.to > controllerID && m.to <= simNodes && !s.nodes[m.to].up) {
			continue
		}
		m.deliver()
	}
	if err := s.controllerTick(); err != nil {
		return err
	}
	for id := int32(1); id <= simNodes; id++ {
		nd := s.nodes[id]
		if !nd.up {
			continue
		}
		if err := s.nodeTick(nd, faults); err != nil {
			return fmt.Errorf("node %d: %w", id, err)
		}
	}
	for i := range s.producers {
		if pr := &s.producers[i]; pr.inflight == 0 && s.rng.Float64() < 0.3 {
			s.produce(pr, faults)
		}
	}
	return s.check()
}

// controllerTick fences the brokers whose session expired.
func (s *sim) controllerTick() error {
	for id := int32(1); id <= simNodes; id++ {
		b, ok := s.ctl.img.Broker(id)
		if ok && !b.Fenced && s.now-s.ctl.lastHB[id] > simSession {
			s.say("controller fences %d", id)
			if err := s.apply(controller.FenceBroker{NodeID: id}); err != nil {
				return err
			}
		}
	}
	return nil
}

// nodeTick is one node's periodic work: heartbeat, disk sync, ISR check, and a follower's fetch.
func (s *sim) nodeTick(nd *simNode2, faults bool) error {
	if s.now%(50*time.Millisecond) == 0 {
		id := nd.id
		sent, boot := s.now, nd.boot
		s.send(id, controllerID, faults, func() {
			s.ctl.lastHB[id] = s.now
			if b, ok := s.ctl.img.Broker(id); ok && b.Fenced {
				s.say("controller unfences %d", id)
				_ = s.apply(controller.UnfenceBroker{NodeID: id})
			}
			// The answer renews the node's lease once it has applied the answer's image
			// (controller.Store.Lease); the latest image follows separately, so that a node that missed
			// an update catches up, as a broker's metadata does.
			img := s.ctl.img
			s.send(controllerID, id, faults, func() {
				if nd.boot == boot {
					nd.pendingLease, nd.pendingVersion = sent+simSession-simLeaseMargin, img.Version
				}
			})
			s.send(controllerID, id, faults, func() { s.learn(s.nodes[id], img) })
		})
	}
	if !nd.c.stated {
		// Like the Manager, a node hosts the replica only once it has an image to give it a role.
		return nil
	}
	if s.rng.Float64() < 0.5 {
		if err := nd.log.Sync(); err != nil {
			return err
		}
		nd.c.durableAt(nd.log.DurableEndOffset())
	}
	if s.now%(200*time.Millisecond) == 0 {
		nd.hwCheckpoint = nd.c.hw
		nd.c.tick(s.Now())
	}
	s.carryOut(nd)
	if nd.c.role == roleLeader {
		if nd.c.epoch == nd.leaderEpoch && nd.c.hw < nd.leaderHW {
			return fmt.Errorf("leader high watermark went back from %d to %d at epoch %d", nd.leaderHW, nd.c.hw, nd.c.epoch)
		}
		nd.leaderEpoch, nd.leaderHW = nd.c.epoch, nd.c.hw
	}
	pos, ok := nd.c.position()
	if !ok || nd.inflight {
		return nil
	}
	leader := s.nodes[pos.leader]
	if leader == nil {
		return nil
	}
	nd.inflight = true
	nd.request++
	req := nd.request
	done := func(apply func()) {
		s.send(leader.id, nd.id, faults, func() {
			// A follower talks to its leader over one connection, one request at a time: an answer to a
			// request that timed out never arrives.
			if nd.request != req {
				return
			}
			nd.inflight = false
			if nd.c.following(pos.epoch) {
				apply()
				s.carryOut(nd)
			}
		})
	}
	// A request lost on the way, or its answer, frees the follower after a timeout.
	s.seq++
	s.msgs = append(s.msgs, simMsg{at: s.now + 200*time.Millisecond, seq: s.seq, from: nd.id, to: nd.id, deliver: func() {
		if nd.request == req {
			nd.request++
			nd.inflight = false
		}
	}})
	if pos.truncate {
		if pos.lastEpoch < 0 {
			nd.inflight = false
			if point, ok := nd.c.truncation(pos.epoch, EpochEnd{Epoch: -1, EndOffset: -1}); ok {
				return s.truncateFollower(nd, point)
			}
			return nil
		}
		s.send(nd.id, leader.id, faults, func() {
			if !leader.up || !leader.c.stated || !s.leased(leader) {
				return
			}
			if err := leader.c.checkLeader(pos.epoch); err != nil {
				return
			}
			e, end := endOffsetForEpoch(leader.c.role, leader.c.epoch, leader.log, pos.lastEpoch)
			done(func() {
				if point, ok := nd.c.truncation(pos.epoch, EpochEnd{Epoch: e, EndOffset: end}); ok {
					if err := s.truncateFollower(nd, point); err != nil {
						panic(err)
					}
				}
			})
		})
		return nil
	}
	// A follower reports only durable offsets.
	if err := nd.log.Sync(); err != nil {
		return err
	}
	s.send(nd.id, leader.id, faults, func() {
		if !leader.up || !leader.c.stated || !s.leased(leader) {
			return
		}
		d, readable, err := leader.c.followerFetch(nd.id, pos.offset, pos.epoch, pos.lastEpoch, s.Now())
		s.carryOut(leader)
		if err != nil {
			if pos.offset > leader.log.EndOffset() {
				done(func() { nd.c.retruncate(pos.epoch) })
			}
			return
		}
		if !readable {
			done(func() {
				if point, ok := nd.c.truncation(pos.epoch, d); ok {
					if err := s.truncateFollower(nd, point); err != nil {
						panic(err)
					}
				}
			})
			return
		}
		recs, err := leader.log.Read(pos.offset, 64<<10, leader.log.EndOffset())
		if err != nil {
			panic(fmt.Sprintf("leader %d read at %d: %v", leader.id, pos.offset, err))
		}
		recs = slices.Clone(recs)
		hw := leader.c.hw
		done(func() {
			if nd.c.needTruncate {
				return
			}
			if len(recs) > 0 {
				if _, err := nd.log.AppendAsFollower(recs); err != nil {
					panic(fmt.Sprintf("node %d append from leader: %v", nd.id, err))
				}
			}
			nd.c.fetchedAppended(recs, hw)
		})
	})
	return nil
}

// truncateFollower cuts a follower's log as the owner does.
func (s *sim) truncateFollower(nd *simNode2, point int64) error {
	if point < nd.log.EndOffset() {
		s.say("node %d truncates from %d to %d", nd.id, nd.log.EndOffset(), point)
		if err := nd.log.Truncate(point); err != nil {
			return err
		}
		p := newProducers()
		for h := range scanHeaders(nd.log) {
			p.update(h, nil)
		}
		nd.c.truncated(p, true)
		nd.agreed = min(nd.agreed, point)
		return nil
	}
	nd.c.truncated(nil, true)
	return nil
}

// produce sends one record to the node the controller names leader.
func (s *sim) produce(pr *simProducer, faults bool) {
	// The producer's metadata lags: it sends to the leader it saw at its last refresh.
	if pr.view == nil || s.now%pr.refresh == 0 {
		pr.view = s.ctl.img
	}
	st, ok := simPartition(pr.view)
	if !ok || st.Leader == controller.NoLeader {
		return
	}
	leader := s.nodes[st.Leader]
	s.nextID++
	id := s.nextID
	pr.inflight = id
	s.send(controllerID+100, leader.id, faults, func() {
		if !leader.up || !leader.c.stated {
			return
		}
		if !s.leased(leader) {
			s.send(leader.id, controllerID+100, faults, func() { s.answered(pr, id, ErrNotLeader) })
			return
		}
		batch := plain(1, id).encode()
		ck, err := record.Check(batch)
		if err != nil {
			panic(err)
		}
		if _, err := leader.c.admit(ck.Header, AcksAll); err != nil {
			s.send(leader.id, controllerID+100, faults, func() { s.answered(pr, id, err) })
			return
		}
		res, err := leader.log.Append(batch, leader.c.epoch)
		if err != nil {
			panic(fmt.Sprintf("leader %d append: %v", leader.id, err))
		}
		if w, ok := s.writers[leader.c.epoch]; ok && w != leader.id {
			panic(fmt.Sprintf("nodes %d and %d both accepted writes at epoch %d", w, leader.id, leader.c.epoch))
		}
		if leader.c.epoch < s.writeEpoch {
			panic(fmt.Sprintf("node %d accepted a write at epoch %d after a leader of epoch %d had: two leaders accepted writes at once",
				leader.id, leader.c.epoch, s.writeEpoch))
		}
		s.writeEpoch = leader.c.epoch
		s.writers[leader.c.epoch] = leader.id
		s.say("node %d appends record %d at %d, epoch %d", leader.id, id, res.FirstOffset, leader.c.epoch)
		h := ck.Header
		h.BaseOffset = res.FirstOffset
		leader.c.appended(h, nil)
		wid, done, err := leader.c.awaitCommit(res.LastOffset+1, leader.c.gen)
		if done {
			s.send(leader.id, controllerID+100, faults, func() { s.answered(pr, id, err) })
			return
		}
		leader.waits[wid] = simWait{pr: pr, id: id}
		s.acked[id] = -res.FirstOffset - 1 // not yet acknowledged: remembered for answered
		s.carryOut(leader)
	})
	// A lost request or answer frees the producer after its timeout.
	s.seq++
	s.msgs = append(s.msgs, simMsg{at: s.now + 300*time.Millisecond, seq: s.seq, deliver: func() {
		if pr.inflight == id {
			pr.inflight = 0
		}
	}})
}

// check verifies the invariants after a step.
func (s *sim) check() error {
	for id := int32(1); id <= simNodes; id++ {
		nd := s.nodes[id]
		if !nd.up {
			continue
		}
		hw := nd.c.hw
		if nd.agreed >= hw {
			continue
		}
		for off := nd.agreed; off < hw; off++ {
			recs, err := nd.log.Read(off, 1, hw)
			if err != nil {
				return fmt.Errorf("node %d read %d below its high watermark %d: %w", id, off, hw, err)
			}
			h, err := record.ParseHeader(recs)
			if err != nil {
				return fmt.Errorf("node %d offset %d: %w", id, off, err)
			}
			rid := h.MaxTimestamp
			switch {
			case off < int64(len(s.committed)) && s.committed[off] != rid:
				return fmt.Errorf("node %d holds record %d at offset %d below its high watermark %d; record %d was committed there",
					id, rid, off, hw, s.committed[off])
			case off == int64(len(s.committed)):
				s.say("node %d commits record %d at %d (high watermark %d)", id, rid, off, hw)
				s.committed = append(s.committed, rid)
			case off > int64(len(s.committed)):
				return fmt.Errorf("node %d high watermark %d passes the agreed prefix %d", id, hw, len(s.committed))
			}
		}
		nd.agreed = hw
	}
	return nil
}

// settled checks, after the healing phase, that every acknowledged record is in the agreed prefix at
// its offset and that the leader's high watermark covers them all.
func (s *sim) settled() error {
	st, ok := simPartition(s.ctl.img)
	if !ok || st.Leader == controller.NoLeader {
		return fmt.Errorf("no leader after healing: %+v", st)
	}
	leader := s.nodes[st.Leader]
	for id, off := range s.acked {
		if off < 0 {
			continue
		}
		if off >= leader.c.hw {
			return fmt.Errorf("record %d acknowledged at %d; leader %d high watermark %d after healing", id, off, leader.id, leader.c.hw)
		}
		if s.committed[off] != id {
			return fmt.Errorf("record %d acknowledged at %d, where record %d is committed", id, off, s.committed[off])
		}
	}
	return nil
}
