package api_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/server"
	"github.com/weir-mq/weir/internal/share"
)

// TestShareSessionConnClose: a member whose connection closes with its share session open (a
// consumer that crashed: no ShareFetch at epoch -1) has the records it held released at once, so
// another consumer of the group gets them long before their acquisition lock (30 s) would have
// expired, at delivery count 2; a member that reopened its session over a new connection keeps it
// when the old connection closes.
func TestShareSessionConnClose(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	const topic, group = "share-conn-close", "sg-conn-close"
	createTopic(t, adm, topic, 1, nil)
	id := topicID(t, adm, topic)
	prod := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))

	// A member that moves to a new connection keeps its session when the old one closes: its
	// next epoch is still served on the new connection.
	old, moved := newClient(t, n), newClient(t, n)
	doShareFetch(t, old, shareFetchReq(group, "mover", 0, id))
	if r := doShareFetch(t, moved, shareFetchReq(group, "mover", 0, id)); r.ErrorCode != 0 {
		t.Fatalf("reopen on a new connection: %+v", r)
	}
	old.Close()

	crasher := newClient(t, n)
	doShareFetch(t, crasher, shareFetchReq(group, "crasher", 0, id))
	produceShare(t, prod, topic, 0, "a", "b", "c")
	if acq := acquire(t, crasher, group, "crasher", id); len(acq) != 1 || acq[0].FirstOffset != 0 || acq[0].LastOffset != 2 {
		t.Fatalf("acquired %+v, want 0-2", acq)
	}
	if r := doShareFetch(t, moved, shareFetchReq(group, "mover", 1, id)); r.ErrorCode != 0 {
		t.Fatalf("the moved member's next epoch after its old connection closed: %+v", r)
	}
	crasher.Close()
	closed := time.Now()

	redelivered(t, n, group, topic, 3, "the crashed member's connection closed")
	t.Logf("released records redelivered %v after the close", time.Since(closed).Round(time.Millisecond))
}

// TestShareMemberExpiryReleases: a member whose session times out at the group coordinator while its
// connection stays open is removed on the coordinator's timer, and its share session here ends with
// its records released, as a closed connection's does: a franz-go share consumer gets them at
// delivery count 2 about the session timeout (2 s here) after the member's last heartbeat, long
// before their 30 s locks would have expired.
func TestShareMemberExpiryReleases(t *testing.T) {
	cfg := nodeConfig(t.TempDir())
	cfg.ShareGroup = share.GroupConfig{SessionTimeout: 2 * time.Second, HeartbeatInterval: 500 * time.Millisecond}
	n := startNodeWith(t, cfg)
	adm := newAdmin(t, n)
	const topic, group = "share-expiry", "sg-expiry"
	createTopic(t, adm, topic, 1, nil)
	id := topicID(t, adm, topic)
	prod := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))

	quiet := newClient(t, n)
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.MemberEpoch, hb.SubscribedTopicNames = group, "quiet-member-000000001", 0, []string{topic}
	if resp, err := hb.RequestWith(testCtx(t), quiet); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("join: %+v, %v", resp, err)
	}
	lastBeat := time.Now()
	doShareFetch(t, quiet, shareFetchReq(group, "quiet-member-000000001", 0, id))
	produceShare(t, prod, topic, 0, "a", "b", "c")
	if acq := acquire(t, quiet, group, "quiet-member-000000001", id); len(acq) != 1 || acq[0].FirstOffset != 0 || acq[0].LastOffset != 2 {
		t.Fatalf("acquired %+v, want 0-2", acq)
	}

	redelivered(t, n, group, topic, 3, "the quiet member's 2 s session ended")
	took := time.Since(lastBeat)
	if took < 1500*time.Millisecond {
		t.Fatalf("records redelivered %v after the quiet member's last heartbeat, before its 2 s session ended", took)
	}
	t.Logf("released records redelivered %v after the quiet member's last heartbeat", took.Round(time.Millisecond))
	if r := doShareFetch(t, quiet, shareFetchReq(group, "quiet-member-000000001", 1000, id)); r.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("the expired member's share session: %v, want SHARE_SESSION_NOT_FOUND (ended)", kerr.ErrorForCode(r.ErrorCode))
	}
}

// TestShareEndMemberRequest: the WriteShareGroupState a group coordinator sends every other node for
// a member whose session timed out (weir's request-level tags 10004 = 4 and 10006 = the member id)
// ends the member's share session there and releases its records: a franz-go share consumer gets
// them at delivery count 2 long before their 30 s locks expire.
func TestShareEndMemberRequest(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	const topic, group, member = "share-end-member", "sg-end-member", "ended-member-000000001"
	createTopic(t, adm, topic, 1, nil)
	id := topicID(t, adm, topic)
	prod := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	holder := newClient(t, n)
	doShareFetch(t, holder, shareFetchReq(group, member, 0, id))
	produceShare(t, prod, topic, 0, "a", "b")
	if acq := acquire(t, holder, group, member, id); len(acq) != 1 || acq[0].FirstOffset != 0 || acq[0].LastOffset != 1 {
		t.Fatalf("acquired %+v, want 0-1", acq)
	}

	end := kmsg.NewPtrWriteShareGroupStateRequest()
	end.GroupID = group
	end.UnknownTags.Set(10004, []byte{4})
	end.UnknownTags.Set(10006, []byte(member))
	if _, err := end.RequestWith(testCtx(t), newClient(t, n)); err != nil {
		t.Fatalf("end member: %v", err)
	}
	sent := time.Now()
	redelivered(t, n, group, topic, 2, "the end-member request")
	if r := doShareFetch(t, holder, shareFetchReq(group, member, 1000, id)); r.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("the ended member's share session: %v, want SHARE_SESSION_NOT_FOUND", kerr.ErrorForCode(r.ErrorCode))
	}
	t.Logf("released records redelivered %v after the request", time.Since(sent).Round(time.Millisecond))
}

// redelivered has a franz-go share consumer of group read topic until it got want records, each at
// delivery count 2: records held by a member and released when what happened (said in a failure) ended
// its session, not lost and not left to their 30 s locks.
func redelivered(t *testing.T, n *server.Node, group, topic string, want int, what string) {
	t.Helper()
	c := shareConsumer(t, n, group, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := map[string]int32{}
	for len(got) < want {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("got %v within 20 s; want %d records released when %s", got, want, what)
		}
		for _, r := range fs.Records() {
			got[string(r.Value)] = r.DeliveryCount()
		}
	}
	for v, dc := range got {
		if dc != 2 {
			t.Fatalf("record %s at delivery count %d, want 2 (released when %s)", v, dc, what)
		}
	}
}
