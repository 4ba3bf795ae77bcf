package partition

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/record"
)

var updateScripts = flag.Bool("update", false, "rewrite the expected output of testdata/core scripts")

// scriptLog is the log a core script's owner keeps: the epoch each record was appended in. It stands
// for storage.Log's offsets and leader-epoch cache, which the core only reads.
type scriptLog struct {
	start  int64
	epochs []int32 // epochs[i] is the epoch of offset start+i
}

func (l *scriptLog) StartOffset() int64 { return l.start }
func (l *scriptLog) EndOffset() int64   { return l.start + int64(len(l.epochs)) }
func (l *scriptLog) LatestEpoch() int32 {
	if len(l.epochs) == 0 {
		return -1
	}
	return l.epochs[len(l.epochs)-1]
}

func (l *scriptLog) EndOffsetForEpoch(epoch int32) (int32, int64) {
	best := int32(-1)
	for _, e := range l.epochs {
		if e <= epoch {
			best = max(best, e)
		}
	}
	if best < 0 {
		return -1, -1
	}
	if best == l.LatestEpoch() {
		return best, l.EndOffset()
	}
	for i, e := range l.epochs {
		if e > best {
			return best, l.start + int64(i)
		}
	}
	return best, l.EndOffset()
}

// TestCoreScripts runs the scripts in testdata/core: each is a sequence of events handed to one core
// (with the owner's part — appending to and cutting the log — done by the script), each followed by
// "----" and the output expected from it. go test ./internal/partition/ -run TestCoreScripts -update
// rewrites the expected outputs.
func TestCoreScripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "core", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			runScript(t, file)
		})
	}
}

// scriptCase is one event of a script and its expected output.
type scriptCase struct {
	line int
	cmd  string
	want string
}

func parseScript(t *testing.T, text string) (cases []scriptCase, comments map[int]string) {
	comments = map[int]string{}
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "#") {
			comments[len(cases)] += lines[i] + "\n"
			continue
		}
		c := scriptCase{line: i + 1, cmd: l}
		if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "----" {
			t.Fatalf("line %d: %q is not followed by ----", i+1, l)
		}
		i += 2
		var want []string
		for ; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			want = append(want, lines[i])
		}
		c.want = strings.Join(want, "\n")
		cases = append(cases, c)
		i--
	}
	return cases, comments
}

func runScript(t *testing.T, file string) {
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cases, comments := parseScript(t, string(raw))
	s := &script{t: t, log: &scriptLog{}, now: time.UnixMilli(0)}
	var out strings.Builder
	for i, c := range cases {
		out.WriteString(comments[i])
		got := s.run(c.cmd)
		if !*updateScripts && got != c.want {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", file, c.line, c.cmd, got, c.want)
		}
		fmt.Fprintf(&out, "%s\n----\n%s\n", c.cmd, got)
	}
	if *updateScripts {
		text := strings.TrimRight(out.String()+comments[len(cases)], "\n") + "\n"
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// script drives one core.
type script struct {
	t   *testing.T
	c   *core
	log *scriptLog
	now time.Time
	// alter is the ISR proposal in flight, as the owner would have sent it.
	alter *controller.AlterPartition
}

// args are a command's key=value arguments.
type args map[string]string

func (a args) int(t *testing.T, k string, def int64) int64 {
	v, ok := a[k]
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%s: %v", k, v, err)
	}
	return n
}

func (a args) ids(k string) []int32 {
	var out []int32
	for _, f := range strings.Split(a[k], ",") {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, int32(n))
		}
	}
	return out
}

func (s *script) run(cmd string) string {
	fields := strings.Fields(cmd)
	a := args{}
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(f, "=")
		a[k] = v
	}
	t := s.t
	var out []string
	say := func(format string, v ...any) { out = append(out, fmt.Sprintf(format, v...)) }
	if d, ok := a["at"]; ok {
		at, err := time.ParseDuration(d)
		if err != nil {
			t.Fatalf("at=%s: %v", d, err)
		}
		s.now = time.UnixMilli(0).Add(at)
	}
	switch fields[0] {
	case "open":
		// open self=N log=E,E,E... [durable=N] [hw=N]: a core on a log holding one record per epoch listed.
		s.log = &scriptLog{}
		for _, e := range a.ids("log") {
			s.log.epochs = append(s.log.epochs, e)
		}
		s.log.start = a.int(t, "start", 0)
		end := s.log.EndOffset()
		s.c = newCore(s.log, int32(a.int(t, "self", 1)), 30*time.Second, true, newProducers(),
			a.int(t, "durable", end), a.int(t, "hw", -1))
		if a["hw"] == "" {
			s.c.hw = s.c.durable
		}
	case "state":
		// state leader=N epoch=N isr=... [replicas=...] [pepoch=N] [minisr=N] [dead=...]
		replicas := a.ids("replicas")
		if replicas == nil {
			replicas = a.ids("isr")
		}
		dead := a.ids("dead")
		st := State{
			Partition: &controller.PartitionState{Leader: int32(a.int(t, "leader", -1)), LeaderEpoch: int32(a.int(t, "epoch", 0)),
				PartitionEpoch: int32(a.int(t, "pepoch", 0)), Replicas: replicas, ISR: a.ids("isr")},
			MinISR: int32(a.int(t, "minisr", 1)),
			Live:   func(id int32) bool { return !slices.Contains(dead, id) },
		}
		if s.c.setState(st, s.now) {
			say("truncate first")
		}
	case "append":
		// append [n=N] [acks=all|1] [pid=N seq=N pepoch=N]: the owner appends what the core admits.
		h := record.Header{ProducerID: a.int(t, "pid", -1), ProducerEpoch: int16(a.int(t, "pepoch", 0)),
			BaseSequence: int32(a.int(t, "seq", -1)), LastOffsetDelta: int32(a.int(t, "n", 1) - 1)}
		acks := AcksAll
		if a["acks"] == "1" {
			acks = AcksLeader
		}
		dup, err := s.c.admit(h, acks)
		switch {
		case err != nil:
			say("refused: %s", errName(err))
		case dup != nil:
			say("duplicate of %d-%d", dup.firstOffset, dup.lastOffset)
		default:
			h.BaseOffset = s.log.EndOffset()
			for range h.LastOffsetDelta + 1 {
				s.log.epochs = append(s.log.epochs, s.c.epoch)
			}
			s.c.appended(h, nil)
			say("appended %d-%d at epoch %d", h.BaseOffset, h.LastOffset(), s.c.epoch)
			if acks == AcksAll {
				id, done, err := s.c.awaitCommit(h.NextOffset(), s.c.gen)
				if done {
					say("committed at once: %s", errName(err))
				} else {
					say("wait %d", id)
				}
			}
		}
	case "durable":
		s.c.durableAt(a.int(t, "end", 0))
	case "fetch":
		// fetch from=N offset=N [epoch=N] [last=N]: a follower's fetch at the leader.
		d, ok, err := s.c.followerFetch(int32(a.int(t, "from", 0)), a.int(t, "offset", 0),
			int32(a.int(t, "epoch", -1)), int32(a.int(t, "last", -1)), s.now)
		switch {
		case err != nil:
			say("refused: %s", errName(err))
		case !ok:
			say("diverging: epoch %d ends at %d", d.Epoch, d.EndOffset)
		}
	case "tick":
		s.c.tick(s.now)
	case "altered":
		// altered [isr=...] [leader=N epoch=N] | altered refused: the controller's answer to the proposal in
		// flight.
		if s.alter == nil {
			t.Fatalf("%s: no proposal in flight", cmd)
		}
		req := *s.alter
		s.alter = nil
		if _, refused := a["refused"]; refused {
			s.c.altered(req.ISR, nil, errors.New("refused"))
			break
		}
		isr := req.ISR
		if _, ok := a["isr"]; ok {
			isr = a.ids("isr")
		}
		// leader=N epoch=N: the change also moved leadership, as a move's completion does
		leader, epoch := req.Leader, req.LeaderEpoch
		if _, ok := a["leader"]; ok {
			leader, epoch = int32(a.int(t, "leader", -1)), int32(a.int(t, "epoch", -1))
		}
		s.c.altered(req.ISR, &controller.PartitionState{Leader: leader, LeaderEpoch: epoch,
			PartitionEpoch: req.PartitionEpoch + 1, ISR: isr}, nil)
	case "answer":
		// answer epoch=N end=N: the leader's answer about the follower's latest epoch; the owner cuts.
		point, ok := s.c.truncation(s.c.epoch, EpochEnd{Epoch: int32(a.int(t, "epoch", -1)), EndOffset: a.int(t, "end", -1)})
		if !ok {
			say("not following")
			break
		}
		if point < s.log.EndOffset() {
			say("cut to %d", point)
			s.log.epochs = s.log.epochs[:point-s.log.start]
		}
		s.c.truncated(newProducers(), true)
	case "leader-fetched":
		// leader-fetched n=N epoch=N hw=N: a follower appends n records of the leader's epoch.
		for range a.int(t, "n", 0) {
			s.log.epochs = append(s.log.epochs, int32(a.int(t, "epoch", 0)))
		}
		s.c.fetchedAppended(nil, a.int(t, "hw", 0))
	case "end-for":
		e, end := endOffsetForEpoch(s.c.role, s.c.epoch, s.log, int32(a.int(t, "epoch", 0)))
		say("epoch %d ends at %d", e, end)
	case "close":
		s.c.close()
	default:
		t.Fatalf("unknown command %q", cmd)
	}
	rd := s.c.takeReady()
	if rd.alter != nil {
		s.alter = rd.alter
		say("propose isr %v at partition epoch %d", rd.alter.ISR, rd.alter.PartitionEpoch)
	}
	for _, an := range rd.answered {
		say("answer %d: %s", an.id, errName(an.err))
	}
	for _, n := range rd.notes {
		if n.level >= 0 {
			say("log %s", n.msg)
		}
	}
	say("%s", s.summary())
	return strings.Join(out, "\n")
}

// summary is the core's state in one line.
func (s *script) summary() string {
	c := s.c
	line := fmt.Sprintf("%s epoch=%d leo=%d hw=%d isr=%v", c.role, c.epoch, s.log.EndOffset(), c.hw, c.isr)
	if c.role == roleLeader && len(c.followers) > 0 {
		ids := make([]int32, 0, len(c.followers))
		for id := range c.followers {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		var parts []string
		for _, id := range ids {
			parts = append(parts, fmt.Sprintf("%d:%d", id, c.followers[id].leo))
		}
		line += " followers=" + strings.Join(parts, ",")
	}
	if c.needTruncate {
		line += " needs-truncation"
	}
	return line
}

// errName names an error by the sentinel it wraps.
func errName(err error) string {
	for _, e := range []error{ErrNotLeader, ErrFencedLeaderEpoch, ErrUnknownLeaderEpoch, ErrNotEnoughReplicas,
		ErrNotEnoughReplicasAfterAppend, ErrOutOfOrderSequence, ErrInvalidProducerEpoch, ErrClosed} {
		if errors.Is(err, e) {
			return strings.TrimPrefix(e.Error(), "partition: ")
		}
	}
	if err == nil {
		return "ok"
	}
	return err.Error()
}
