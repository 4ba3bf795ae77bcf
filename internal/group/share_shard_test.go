package group

import (
	"bytes"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/share"
)

func shareJoin(member string) share.HeartbeatRequest {
	return share.HeartbeatRequest{MemberID: member, MemberEpoch: share.JoinEpoch, Subscribed: []string{"t"}}
}

// shareListed returns the share groups of c's listing, by id, with their state names.
func shareListed(t *testing.T, c *Coordinator) map[string]string {
	t.Helper()
	ls, err := c.List(coordCtx(t))
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	out := map[string]string{}
	for _, l := range ls {
		if l.Type == TypeShare {
			out[l.Group] = l.StateName
		}
	}
	return out
}

// loadedCoordinator starts a coordinator of e and waits for it to serve group.
func loadedCoordinator(t *testing.T, e *coordEnv, group string) *Coordinator {
	t.Helper()
	c := e.start()
	eventually(t, "the coordinator loads", func() bool {
		_, err := c.FetchOffsets(coordCtx(t), group, nil)
		return err == nil
	})
	return c
}

// TestShareGroupRestoredAfterLoad: a share group is written to __consumer_offsets, so a new coordinator
// knows it, empty, at its recorded epoch: it is listed, described, holds its id against classic and
// KIP-848 joins and commits, and is deleted for good by ShareDelete; its members are not restored and
// rejoin.
func TestShareGroupRestoredAfterLoad(t *testing.T) {
	e := newCoordEnv(t, CoordinatorConfig{OffsetsPartitions: 2})
	c := e.start()
	ctx := coordCtx(t)
	if _, err := c.Locate(ctx, "left"); err != nil {
		t.Fatal(err)
	}
	r := c.ShareHeartbeat(ctx, "left", shareJoin("m1"), share.GroupConfig{})
	if r.Err != nil {
		t.Fatalf("join: %+v", r)
	}
	if r = c.ShareHeartbeat(ctx, "left", share.HeartbeatRequest{MemberID: "m1", MemberEpoch: share.LeaveEpoch}, share.GroupConfig{}); r.Err != nil {
		t.Fatalf("leave: %+v", r)
	}
	live := c.ShareHeartbeat(ctx, "live", shareJoin("m2"), share.GroupConfig{})
	if live.Err != nil {
		t.Fatalf("join live: %+v", live)
	}
	before, err := c.ShareDescribe(ctx, "left")
	if err != nil || before.GroupEpoch != 2 {
		t.Fatalf("describe before the restart: %+v, %v; want epoch 2", before, err)
	}
	c.Close()

	c2 := loadedCoordinator(t, e, "left")
	if got := shareListed(t, c2); len(got) != 2 || got["left"] != "Empty" || got["live"] != "Empty" {
		t.Fatalf("share groups after the load: %v, want left and live, both Empty", got)
	}
	d, err := c2.ShareDescribe(ctx, "left")
	if err != nil || d.State != share.GroupEmpty || d.GroupEpoch != before.GroupEpoch || d.AssignmentEpoch != before.GroupEpoch || len(d.Members) != 0 {
		t.Fatalf("describe after the load: %+v, %v; want Empty at epoch %d", d, err, before.GroupEpoch)
	}
	if r := c2.ShareHeartbeat(ctx, "live", share.HeartbeatRequest{MemberID: "m2", MemberEpoch: live.MemberEpoch}, share.GroupConfig{}); !errors.Is(r.Err, share.ErrUnknownMemberID) {
		t.Fatalf("a member's heartbeat after the load: %+v, want UNKNOWN_MEMBER_ID", r)
	}
	if r := c2.ShareHeartbeat(ctx, "live", shareJoin("m2"), share.GroupConfig{}); r.Err != nil || r.MemberEpoch <= live.MemberEpoch {
		t.Fatalf("the member's rejoin: %+v, want an epoch past %d", r, live.MemberEpoch)
	}
	if jr := c2.Join(ctx, "left", JoinRequest{Version: 3, ProtocolType: "consumer", Protocols: []Protocol{{Name: "range"}},
		SessionTimeout: testSession, RebalanceTimeout: testRebalance}); !errors.Is(jr.Err, ErrGroupNotFound) {
		t.Fatalf("a classic join of the empty share group: %+v, want GROUP_ID_NOT_FOUND", jr)
	}
	if cr := c2.ConsumerHeartbeat(ctx, "left", ConsumerHeartbeat{MemberID: "c1", SubscribedTopics: []string{"t"}}, noTopics{}); !errors.Is(cr.Err, ErrGroupNotFound) {
		t.Fatalf("a KIP-848 join of the empty share group: %+v, want GROUP_ID_NOT_FOUND", cr)
	}
	tp := TopicPartition{Topic: "t", Partition: 0}
	if _, err := c2.Commit(ctx, "left", CommitRequest{Generation: -1}, []OffsetCommit{{TopicPartition: tp, Offset: 1, LeaderEpoch: -1}}); !errors.Is(err, ErrGroupNotFound) {
		t.Fatalf("a commit with the empty share group's id: %v, want GROUP_ID_NOT_FOUND", err)
	}
	if err := c2.ShareDelete(ctx, "live"); !errors.Is(err, ErrNonEmptyGroup) {
		t.Fatalf("delete of a share group with a member: %v, want NON_EMPTY_GROUP", err)
	}
	if err := c2.ShareDelete(ctx, "left"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if err := c2.ShareDelete(ctx, "left"); !errors.Is(err, ErrGroupNotFound) {
		t.Fatalf("a second delete: %v, want GROUP_ID_NOT_FOUND", err)
	}
	c2.Close()

	c3 := loadedCoordinator(t, e, "left")
	if got := shareListed(t, c3); len(got) != 1 || got["live"] == "" {
		t.Fatalf("share groups after the delete and a load: %v, want live alone", got)
	}
	if _, err := c3.ShareDescribe(ctx, "left"); !errors.Is(err, ErrGroupNotFound) {
		t.Fatalf("describe of the deleted group: %v, want GROUP_ID_NOT_FOUND", err)
	}
	if jr := joinStable(t, c3, "left"); jr.Err != nil {
		t.Fatalf("a classic join once the share group is deleted: %+v", jr)
	}
}

// TestShareGroupNamespace: a share join and the admin's ShareEnsure refuse the id of a classic group
// known by its offsets; ShareEnsure makes an id nobody holds an empty share group, recorded.
func TestShareGroupNamespace(t *testing.T) {
	e := newCoordEnv(t, CoordinatorConfig{OffsetsPartitions: 1})
	c := e.start()
	ctx := coordCtx(t)
	if _, err := c.Locate(ctx, "classic"); err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{Topic: "t", Partition: 0}
	if errs, err := c.Commit(ctx, "classic", CommitRequest{Generation: -1}, []OffsetCommit{{TopicPartition: tp, Offset: 1, LeaderEpoch: -1}}); err != nil || errs[0] != nil {
		t.Fatalf("commit: %v %v", err, errs)
	}
	if r := c.ShareHeartbeat(ctx, "classic", shareJoin("m1"), share.GroupConfig{}); !errors.Is(r.Err, ErrGroupNotFound) {
		t.Fatalf("a share join of a classic group: %+v, want GROUP_ID_NOT_FOUND", r)
	}
	if err := c.ShareEnsure(ctx, "classic"); !errors.Is(err, ErrGroupNotFound) {
		t.Fatalf("ShareEnsure of a classic group: %v, want GROUP_ID_NOT_FOUND", err)
	}
	if known, err := c.ShareEmpty(ctx, "made"); known || err != nil {
		t.Fatalf("ShareEmpty of an unknown id: %v, %v", known, err)
	}
	if err := c.ShareEnsure(ctx, "made"); err != nil {
		t.Fatalf("ShareEnsure: %v", err)
	}
	if r := c.ShareHeartbeat(ctx, "made", shareJoin("m1"), share.GroupConfig{}); r.Err != nil {
		t.Fatalf("join: %+v", r)
	}
	if err := c.ShareEnsure(ctx, "made"); !errors.Is(err, ErrNonEmptyGroup) {
		t.Fatalf("ShareEnsure with a member: %v, want NON_EMPTY_GROUP", err)
	}
	if known, err := c.ShareEmpty(ctx, "made"); !known || !errors.Is(err, ErrNonEmptyGroup) {
		t.Fatalf("ShareEmpty with a member: %v, %v", known, err)
	}
	if r := c.ShareHeartbeat(ctx, "refused", share.HeartbeatRequest{MemberEpoch: share.JoinEpoch, Subscribed: []string{"t"}}, share.GroupConfig{}); !errors.Is(r.Err, share.ErrInvalidRequest) {
		t.Fatalf("a join without a member id: %+v, want INVALID_REQUEST", r)
	}
	if known, err := c.ShareEmpty(ctx, "refused"); known || err != nil {
		t.Fatalf("a refused join made a share group: %v, %v", known, err)
	}
	if r := c.ShareHeartbeat(ctx, "", shareJoin("m1"), share.GroupConfig{}); !errors.Is(r.Err, ErrInvalidGroupID) {
		t.Fatalf("a join with an empty id: %+v, want INVALID_GROUP_ID", r)
	}
	c.Close()
	c2 := loadedCoordinator(t, e, "made")
	if got := shareListed(t, c2); len(got) != 1 || got["made"] != "Empty" {
		t.Fatalf("share groups after the load: %v", got)
	}
}

// goneLog records what the coordinator reports of expired share members.
type goneLog struct {
	mu   sync.Mutex
	gone map[string][]string
}

func (g *goneLog) record(group string, members []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gone[group] = append(g.gone[group], members...)
}

func (g *goneLog) of(group string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.gone[group])
}

// TestShareGroupExpiresOnTimer: a member whose session ends is removed by the shard's timer, with no
// request for the group, reported to OnShareMembersGone, and the group's new epoch is recorded; a
// member that heartbeats stays.
func TestShareGroupExpiresOnTimer(t *testing.T) {
	e := newCoordEnv(t, CoordinatorConfig{OffsetsPartitions: 1})
	c := e.start()
	gone := &goneLog{gone: map[string][]string{}}
	c.OnShareMembersGone(gone.record)
	ctx := coordCtx(t)
	if _, err := c.Locate(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	cfg := share.GroupConfig{SessionTimeout: 5 * time.Second, HeartbeatInterval: time.Second}
	if r := c.ShareHeartbeat(ctx, "g", shareJoin("quiet"), cfg); r.Err != nil {
		t.Fatalf("join: %+v", r)
	}
	busy := c.ShareHeartbeat(ctx, "g", shareJoin("busy"), cfg)
	if busy.Err != nil {
		t.Fatalf("join: %+v", busy)
	}
	e.clock.Advance(4 * time.Second)
	if r := c.ShareHeartbeat(ctx, "g", share.HeartbeatRequest{MemberID: "busy", MemberEpoch: busy.MemberEpoch}, cfg); r.Err != nil {
		t.Fatalf("heartbeat: %+v", r)
	}
	if got := gone.of("g"); len(got) != 0 {
		t.Fatalf("members reported gone before their session ended: %v", got)
	}
	e.clock.Advance(time.Second)
	eventually(t, "the quiet member is reported gone", func() bool { return slices.Equal(gone.of("g"), []string{"quiet"}) })
	d, err := c.ShareDescribe(ctx, "g")
	if err != nil || len(d.Members) != 1 || d.Members[0].MemberID != "busy" {
		t.Fatalf("after the expiry: %+v, %v; want busy alone", d, err)
	}
	c.Close()
	c2 := loadedCoordinator(t, e, "g")
	if d2, err := c2.ShareDescribe(ctx, "g"); err != nil || d2.GroupEpoch != d.GroupEpoch {
		t.Fatalf("after a load: %+v, %v; want the epoch of the expiry, %d", d2, err, d.GroupEpoch)
	}
}

// FuzzShareGroupRecord: a share group's record key and value, as read back from __consumer_offsets,
// never panic the decoder; what decodes encodes to the same bytes, and a load applies it.
func FuzzShareGroupRecord(f *testing.F) {
	rec := shareGroupEntry("g", 7)
	f.Add(rec.key, rec.value)
	f.Add(shareGroupKey(""), []byte(nil))
	f.Add([]byte{0, 11, 0, 5, 'a'}, []byte{0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 11}, []byte{0, 1, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		l := newLoaded()
		applied := l.apply(key, value, 0, -1)
		id, keyOK := parseShareGroupKey(key)
		if keyOK && !bytes.Equal(shareGroupKey(id), key) {
			t.Fatalf("key %x decodes to %q, which encodes to %x", key, id, shareGroupKey(id))
		}
		if !keyOK {
			return
		}
		if value == nil {
			if !applied {
				t.Fatalf("a tombstone of %q not applied", id)
			}
			return
		}
		epoch, valueOK := parseShareGroupValue(value)
		if applied != valueOK {
			t.Fatalf("value %x: applied %v, decoded %v", value, applied, valueOK)
		}
		if !valueOK {
			return
		}
		if got := shareGroupEntry(id, epoch); !bytes.Equal(got.value, value) {
			t.Fatalf("value %x decodes to epoch %d, which encodes to %x", value, epoch, got.value)
		}
		if l.shares[id] != epoch {
			t.Fatalf("load holds epoch %d for %q, want %d", l.shares[id], id, epoch)
		}
	})
}
