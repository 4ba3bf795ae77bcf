package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// sessionTimeoutDefault is an HTTP member's session timeout unless its first poll says otherwise
	// (Kafka's session.timeout.ms default).
	sessionTimeoutDefault = 45 * time.Second
	// expireEvery is how often idle members are looked for.
	expireEvery = time.Second
)

// member is one HTTP group member: a kgo group consumer and what the API tracks of it.
type member struct {
	id             string
	group          string
	topics         []string
	sessionTimeout time.Duration
	cl             *kgo.Client
	// busy is held by the poll or commit in progress; lastUsed (Unix nanoseconds) is when the last one
	// ended.
	busy     sync.Mutex
	lastUsed atomic.Int64

	mu       sync.Mutex
	assigned map[string][]int32
	// pending are records taken from the client but not answered yet, in the order polled: a poll
	// takes all the client holds (up to a bound), so that the client fetches again while the member
	// answers, and answers from them first. A revoke drops those of the partitions revoked.
	pending      []*kgo.Record
	pendingBytes int
	// fetchErr is the first error of the fetches taken without waiting since the last poll that
	// waited; the poll in progress (busy) owns it.
	fetchErr error
}

const (
	// pendingMax and pendingBytesMax bound a member's pending records: it takes more from its client
	// only while it holds fewer than these. A take is at most pendingMax records (besides the client's
	// own buffer, which a Fetch's size bounds).
	pendingMax      = recordsMax
	pendingBytesMax = 16 << 20
)

// recordBytes is about what r takes in memory besides its Record.
func recordBytes(r *kgo.Record) int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// room is how many records the member takes from its client now: none while its pending records
// reach either bound.
func (m *member) room() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pendingBytes >= pendingBytesMax {
		return 0
	}
	return pendingMax - len(m.pending)
}

// hold adds the records of fetches to the pending records.
func (m *member) hold(fetches kgo.Fetches) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fetches.EachRecord(func(r *kgo.Record) {
		m.pending = append(m.pending, r)
		m.pendingBytes += recordBytes(r)
	})
}

// take removes and returns the first n pending records, or all when fewer.
func (m *member) take(n int) []*kgo.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	n = min(n, len(m.pending))
	out := m.pending[:n:n]
	for _, r := range out {
		m.pendingBytes -= recordBytes(r)
	}
	if m.pending = m.pending[n:]; len(m.pending) == 0 {
		m.pending = nil
	}
	return out
}

// assignment is the partitions the group assigned to the member, sorted.
func (m *member) assignment() []topicPartitions {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]topicPartitions, 0, len(m.assigned))
	for t, ps := range m.assigned {
		ps = slices.Clone(ps)
		slices.Sort(ps)
		out = append(out, topicPartitions{Topic: t, Partitions: ps})
	}
	slices.SortFunc(out, func(a, b topicPartitions) int { return strings.Compare(a.Topic, b.Topic) })
	return out
}

// assign and revoke follow the group's rebalances.
func (m *member) assign(add map[string][]int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for t, ps := range add {
		for _, p := range ps {
			if !slices.Contains(m.assigned[t], p) {
				m.assigned[t] = append(m.assigned[t], p)
			}
		}
	}
}

// revoke also drops the pending records of the partitions revoked, so that no answer carries a
// record of a partition the member no longer holds.
func (m *member) revoke(drop map[string][]int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for t, ps := range drop {
		m.assigned[t] = slices.DeleteFunc(m.assigned[t], func(p int32) bool { return slices.Contains(ps, p) })
		if len(m.assigned[t]) == 0 {
			delete(m.assigned, t)
		}
	}
	m.pending = slices.DeleteFunc(m.pending, func(r *kgo.Record) bool {
		if slices.Contains(drop[r.Topic], r.Partition) {
			m.pendingBytes -= recordBytes(r)
			return true
		}
		return false
	})
}

// topicPartitions is a topic and some of its partitions.
type topicPartitions struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// members is the node's table of HTTP members, capped at max.
type members struct {
	a   *API
	max int

	mu   sync.Mutex
	byID map[string]*member
}

func newMembers(a *API, max int) *members {
	return &members{a: a, max: max, byID: map[string]*member{}}
}

// join starts a new member of group subscribed to topics.
func (ms *members) join(group string, topics []string, sessionTimeout time.Duration, reset kgo.Offset) (*member, error) {
	var raw [12]byte
	_, _ = rand.Read(raw[:])
	m := &member{id: "m-" + hex.EncodeToString(raw[:]), group: group, topics: topics, sessionTimeout: sessionTimeout,
		assigned: map[string][]int32{}}
	full := errorf(http.StatusTooManyRequests, "too_many_members", "this node serves %d HTTP group members, its most", ms.max)
	if ms.count() >= ms.max {
		return nil, full
	}
	cl, err := ms.a.opts.newClient(
		kgo.ClientID("weir-http-"+m.id),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topics...),
		kgo.DisableAutoCommit(),
		kgo.SessionTimeout(sessionTimeout),
		kgo.HeartbeatInterval(min(3*time.Second, sessionTimeout/3)),
		kgo.ConsumeResetOffset(reset),
		// A rebalance waits from a poll's return until its records are pending (AllowRebalance), so
		// that a revoke finds them there.
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, add map[string][]int32) { m.assign(add) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, drop map[string][]int32) { m.revoke(drop) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, drop map[string][]int32) { m.revoke(drop) }),
	)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "invalid_parameter", "joining %q: %v", group, err)
	}
	m.cl = cl
	m.lastUsed.Store(ms.a.opts.Clock.Now().UnixNano())
	ms.mu.Lock()
	if len(ms.byID) >= ms.max {
		ms.mu.Unlock()
		cl.Close()
		return nil, full
	}
	ms.byID[m.id] = m
	ms.mu.Unlock()
	return m, nil
}

// count is the number of members.
func (ms *members) count() int {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return len(ms.byID)
}

// get is the member id of group, or member_not_found.
func (ms *members) get(group, id string) (*member, error) {
	ms.mu.Lock()
	m, ok := ms.byID[id]
	ms.mu.Unlock()
	if !ok || m.group != group {
		return nil, kafkaErrorf(http.StatusNotFound, "member_not_found", "UNKNOWN_MEMBER_ID",
			"group %q has no HTTP member %q on this node (it left, expired after its session timeout, or never joined): poll without member to join again", group, id)
	}
	return m, nil
}

// remove takes m out of the table; false if it was not there.
func (ms *members) remove(m *member) bool {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.byID[m.id] != m {
		return false
	}
	delete(ms.byID, m.id)
	return true
}

// leave takes m out of the table and makes it leave its group.
func (ms *members) leave(m *member) {
	if ms.remove(m) {
		m.cl.Close()
	}
}

// expireLoop makes the members idle for longer than their session timeout leave, until ctx ends.
func (ms *members) expireLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-ms.a.opts.Clock.After(expireEvery):
			for _, m := range ms.idle(now) {
				ms.a.log.Info("httpapi: an HTTP group member expired", "group", m.group, "member", m.id)
				ms.leave(m)
			}
		}
	}
}

// idle lists the members not used within their session timeout and not busy at now.
func (ms *members) idle(now time.Time) []*member {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	var out []*member
	for _, m := range ms.byID {
		if now.Sub(time.Unix(0, m.lastUsed.Load())) <= m.sessionTimeout {
			continue
		}
		if m.busy.TryLock() {
			m.busy.Unlock()
			out = append(out, m)
		}
	}
	return out
}

// closeAll makes every member leave, in parallel.
func (ms *members) closeAll() {
	ms.mu.Lock()
	all := make([]*member, 0, len(ms.byID))
	for _, m := range ms.byID {
		all = append(all, m)
	}
	ms.mu.Unlock()
	var wg sync.WaitGroup
	for _, m := range all {
		wg.Go(func() { ms.leave(m) })
	}
	wg.Wait()
}

// poll serves GET /v1/groups/{group}/records.
func (a *API) poll(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel, err := a.requestContext(w, r)
	if err != nil {
		return err
	}
	defer cancel()
	q := r.URL.Query()
	group := r.PathValue("group")
	var topics []string
	for _, t := range q["topic"] {
		for s := range strings.SplitSeq(t, ",") {
			if s != "" && !slices.Contains(topics, s) {
				topics = append(topics, s)
			}
		}
	}
	slices.Sort(topics)
	maxRecords, err := queryInt(r, "max", recordsDefault, 1, recordsMax)
	if err != nil {
		return err
	}
	wait, err := queryWait(r)
	if err != nil {
		return err
	}
	enc, err := parseEncoding(q.Get("encoding"))
	if err != nil {
		return err
	}
	var m *member
	if id := q.Get("member"); id != "" {
		if m, err = a.members.get(group, id); err != nil {
			return err
		}
		if len(topics) > 0 && !slices.Equal(topics, m.topics) {
			return errorf(http.StatusConflict, "member_topics_mismatch", "member %s is subscribed to %s, not %s: join as a new member to change topics",
				m.id, strings.Join(m.topics, ","), strings.Join(topics, ","))
		}
	} else {
		if len(topics) == 0 {
			return errorf(http.StatusBadRequest, "invalid_parameter", "a first poll names its topics: topic=T")
		}
		for _, t := range topics {
			if _, ok := a.opts.Metadata.Topic(t); !ok {
				return kafkaErrorf(http.StatusNotFound, "topic_not_found", "UNKNOWN_TOPIC_OR_PARTITION", "topic %q does not exist", t)
			}
		}
		st, err := queryInt(r, "session_timeout_ms", sessionTimeoutDefault.Milliseconds(), 1, int64(time.Hour/time.Millisecond))
		if err != nil {
			return err
		}
		reset := kgo.NewOffset().AtEnd()
		switch q.Get("from") {
		case "", "latest":
		case "earliest":
			reset = kgo.NewOffset().AtStart()
		default:
			return errorf(http.StatusBadRequest, "invalid_parameter", "from %q: want earliest or latest", q.Get("from"))
		}
		if m, err = a.members.join(group, topics, time.Duration(st)*time.Millisecond, reset); err != nil {
			return err
		}
	}
	if !m.busy.TryLock() {
		return errorf(http.StatusConflict, "member_busy", "member %s is serving another poll or commit", m.id)
	}
	defer func() {
		m.lastUsed.Store(a.opts.Clock.Now().UnixNano())
		m.busy.Unlock()
	}()
	recs, fetchErr := m.poll(ctx, int(maxRecords), wait)
	if fetchErr != nil && len(recs) == 0 {
		if q.Get("member") == "" {
			// The client never learns the id of a member whose first poll failed: it leaves now.
			a.members.leave(m)
		}
		return fromErr(fetchErr)
	}
	kafkaID, gen := m.cl.GroupMetadata()
	head, _ := json.Marshal(struct {
		MemberID      string            `json:"member_id"`
		KafkaMemberID string            `json:"kafka_member_id"`
		Generation    int32             `json:"generation"`
		Assignment    []topicPartitions `json:"assignment"`
		Commit        []offsetIn        `json:"commit"`
	}{m.id, kafkaID, gen, m.assignment(), nextOffsets(recs)})
	writeRecords(w, head, recs, enc)
	return nil
}

// poll answers up to n records, pending ones first, waiting up to wait for some when none is pending.
// It takes from the client all it holds up to the pending bounds, waiting only when nothing is
// pending, so that the client's next Fetch runs while this answer and the next are written. The error
// is the first of the fetches since the last poll that waited, but for the poll's own end (its wait
// passed, or the request went away); as before read-ahead, the caller reports it only when there
// are no records.
func (m *member) poll(ctx context.Context, n int, wait time.Duration) ([]*kgo.Record, error) {
	if recs := m.take(n); len(recs) > 0 {
		if room := m.room(); room > 0 {
			// A nil context takes what the client holds without waiting.
			fetches := m.cl.PollRecords(nil, room)
			m.hold(fetches)
			if m.fetchErr == nil {
				m.fetchErr = fetchError(fetches)
			}
		}
		m.cl.AllowRebalance()
		return recs, nil
	}
	pctx, cancel := context.WithTimeout(ctx, max(wait, time.Millisecond))
	fetches := m.cl.PollRecords(pctx, max(m.room(), n))
	cancel()
	m.hold(fetches)
	m.cl.AllowRebalance()
	err := m.fetchErr
	if m.fetchErr = nil; err == nil {
		err = fetchError(fetches)
	}
	return m.take(n), err
}

// fetchError is the first error of fetches but for a poll's own end (its wait passed, or the request
// went away), or nil.
func fetchError(fetches kgo.Fetches) error {
	var first error
	fetches.EachError(func(_ string, _ int32, err error) {
		if first == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			first = err
		}
	})
	return first
}

// answerBufs holds the buffers that poll and read answers are built in, reused from one answer to the
// next: an answer of 1000 records of 1 KiB is a megabyte, which a new buffer clears before it is
// written (a sixth of a poll's CPU). A buffer grown past answerBufMax is let go.
var answerBufs = sync.Pool{New: func() any { return new([]byte) }}

const answerBufMax = 16 << 20

// writeRecords answers head, a JSON object, with recs as its records field, appended by hand after
// the other fields since they are the bulk of the answer.
func writeRecords(w http.ResponseWriter, head []byte, recs []*kgo.Record, enc encoding) {
	buf := answerBufs.Get().(*[]byte)
	b := append((*buf)[:0], head[:len(head)-1]...)
	b = append(b, `,"records":`...)
	b = append(appendRecords(b, recs, enc), "}\n"...)
	// With its length given the answer is sent as it is, not cut into chunks the client has to parse.
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
	if cap(b) <= answerBufMax {
		*buf = b
		answerBufs.Put(buf)
	}
}

// recordJSONBytes is about what a record's JSON takes besides its topic, key, value and headers; a
// header takes about a quarter of it besides its key and value.
const recordJSONBytes = 120

// appendRecords appends recs as a JSON array, into a buffer grown once to about the size it needs
// (base64 and escapes make a value at most a third longer, and text values are the common case).
func appendRecords(b []byte, recs []*kgo.Record, enc encoding) []byte {
	n := 0
	for _, rec := range recs {
		n += recordJSONBytes + len(rec.Topic) + len(rec.Key) + len(rec.Value)
		for _, h := range rec.Headers {
			n += recordJSONBytes/4 + len(h.Key) + len(h.Value)
		}
	}
	b = slices.Grow(b, n+n/8)
	b = append(b, '[')
	for i, rec := range recs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendRecord(b, rec, enc)
	}
	return append(b, ']')
}

// nextOffsets is, per partition of recs, the offset to commit once they are processed.
func nextOffsets(recs []*kgo.Record) []offsetIn {
	out := []offsetIn{}
	type tp struct {
		topic     string
		partition int32
	}
	idx := map[tp]int{}
	for _, rec := range recs {
		key := tp{rec.Topic, rec.Partition}
		i, ok := idx[key]
		if !ok {
			i = len(out)
			idx[key] = i
			out = append(out, offsetIn{Topic: rec.Topic, Partition: rec.Partition})
		}
		out[i].Offset = max(out[i].Offset, rec.Offset+1)
	}
	return out
}

// offsetIn is one offset of a commit.
type offsetIn struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Metadata  string `json:"metadata,omitempty"`
}

// commitBody is the body of POST /v1/groups/{group}/offsets.
type commitBody struct {
	MemberID string     `json:"member_id"`
	Offsets  []offsetIn `json:"offsets"`
}

// commit serves POST /v1/groups/{group}/offsets: as the member when member_id is given (with its
// generation), else as an admin client.
func (a *API) commit(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel, err := a.requestContext(w, r)
	if err != nil {
		return err
	}
	defer cancel()
	group := r.PathValue("group")
	var in commitBody
	if err := decodeBody(w, r, &in); err != nil {
		return err
	}
	if len(in.Offsets) == 0 {
		return errorf(http.StatusBadRequest, "invalid_parameter", "no offsets")
	}
	for _, o := range in.Offsets {
		if o.Topic == "" || o.Partition < 0 || o.Offset < 0 {
			return errorf(http.StatusBadRequest, "invalid_parameter", "offset %+v: want a topic, a partition and an offset, none negative", o)
		}
	}
	if in.MemberID == "" {
		offsets := kadm.Offsets{}
		for _, o := range in.Offsets {
			offsets.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Offset, LeaderEpoch: -1, Metadata: o.Metadata})
		}
		resps, err := a.adm.CommitOffsets(ctx, group, offsets)
		if err == nil {
			err = resps.Error()
		}
		if err != nil {
			return fromErr(err)
		}
	} else {
		m, err := a.members.get(group, in.MemberID)
		if err != nil {
			return err
		}
		if !m.busy.TryLock() {
			return errorf(http.StatusConflict, "member_busy", "member %s is serving another poll or commit", m.id)
		}
		err = m.commit(ctx, in.Offsets)
		m.lastUsed.Store(a.opts.Clock.Now().UnixNano())
		m.busy.Unlock()
		if err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"offsets": in.Offsets})
	return nil
}

// commit commits offsets as the member, with its generation.
func (m *member) commit(ctx context.Context, offsets []offsetIn) error {
	uncommitted := map[string]map[int32]kgo.EpochOffset{}
	for _, o := range offsets {
		if uncommitted[o.Topic] == nil {
			uncommitted[o.Topic] = map[int32]kgo.EpochOffset{}
		}
		uncommitted[o.Topic][o.Partition] = kgo.EpochOffset{Epoch: -1, Offset: o.Offset}
	}
	var commitErr error
	m.cl.CommitOffsetsSync(ctx, uncommitted, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			commitErr = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kafkaCode(p.ErrorCode); err != nil && commitErr == nil {
					commitErr = err
				}
			}
		}
	})
	if commitErr != nil {
		return fromErr(commitErr)
	}
	return nil
}

// leave serves DELETE /v1/groups/{group}/members/{member}.
func (a *API) leave(w http.ResponseWriter, r *http.Request) error {
	m, err := a.members.get(r.PathValue("group"), r.PathValue("member"))
	if err != nil {
		return err
	}
	a.members.leave(m)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// decodeBody reads a JSON body of at most bodyMax bytes into v, refusing unknown fields.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := readBody(w, r, bodyMax)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errorf(http.StatusBadRequest, "invalid_json", "%v", err)
	}
	if dec.More() {
		return errorf(http.StatusBadRequest, "invalid_json", "the body holds more than one JSON value")
	}
	return nil
}
