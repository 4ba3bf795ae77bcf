package api

import (
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/share"
)

// withGroupConfigs returns img with set applied to group's configs (and remove removed).
func withGroupConfigs(t *testing.T, img *controller.Image, group string, set map[string]string, remove ...string) *controller.Image {
	t.Helper()
	out, err := controller.Apply(img, controller.AlterGroupConfigs{Group: group, Set: set, Remove: remove})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestShareGroupSettingsFromConfigs: a share-partition's owner takes the group's window cap and RENEW
// switch over the node's settings, and a group that sets nothing gets the node's cap and no RENEW.
func TestShareGroupSettingsFromConfigs(t *testing.T) {
	s := &shareGroups{cfg: share.Config{RecordLocksMax: 500}}
	img := controller.NewImage("c", 1)
	if got := s.settings(img, "g").cfg; got.RecordLocksMax != 500 || got.RenewEnabled {
		t.Fatalf("a group without configs: %+v, want the node's cap and no RENEW", got)
	}
	img = withGroupConfigs(t, img, "g", map[string]string{
		controller.GroupConfigShareRecordLocksMax: "100", controller.GroupConfigShareRenewEnable: "true"})
	if got := s.settings(img, "g").cfg; got.RecordLocksMax != 100 || !got.RenewEnabled {
		t.Fatalf("the group's configs: %+v, want cap 100 and RENEW", got)
	}
	if got := s.settings(img, "h").cfg; got.RecordLocksMax != 500 || got.RenewEnabled {
		t.Fatalf("another group: %+v", got)
	}
	if s.settings(img, "g") == s.settings(withGroupConfigs(t, img, "g", nil, controller.GroupConfigShareRenewEnable), "g") {
		t.Fatal("turning RENEW off does not change the owner's settings, so the owner would not restart")
	}
}

// TestShareGroupMembershipConfigs: ShareGroupHeartbeat answers the group's share.heartbeat.interval.ms,
// else the node's; a member is removed once share.session.timeout.ms passes without a heartbeat, and a
// changed timeout runs from the member's next heartbeat.
func TestShareGroupMembershipConfigs(t *testing.T) {
	clk := &fixedClock{now: time.Unix(1000, 0)}
	s := &shareGroups{groupCfg: share.GroupConfig{HeartbeatInterval: 6 * time.Second}, clock: clk,
		groups: map[string]*share.Group{}}
	img := controller.NewImage("c", 1)
	join := share.HeartbeatRequest{MemberID: "m1", MemberEpoch: share.JoinEpoch, Subscribed: []string{"t"}}
	if r := s.heartbeat("g", join, img); r.Err != nil || r.HeartbeatInterval != 6*time.Second {
		t.Fatalf("join: %+v, want the node's 6s", r)
	}
	img = withGroupConfigs(t, img, "g", map[string]string{
		controller.GroupConfigShareHeartbeatIntervalMs: "7000", controller.GroupConfigShareSessionTimeoutMs: "50000"})
	beat := share.HeartbeatRequest{MemberID: "m1", MemberEpoch: 1}
	r := s.heartbeat("g", beat, img)
	if r.Err != nil || r.HeartbeatInterval != 7*time.Second {
		t.Fatalf("heartbeat after the change: %+v, want the group's 7s", r)
	}
	members := func() int {
		d, ok := s.describe("g", img)
		if !ok {
			t.Fatal("group g unknown")
		}
		return len(d.Members)
	}
	clk.now = clk.now.Add(50*time.Second - time.Millisecond)
	if n := members(); n != 1 {
		t.Fatalf("%d members before the group's 50s passed", n)
	}
	clk.now = clk.now.Add(time.Millisecond)
	if n := members(); n != 0 {
		t.Fatalf("%d members once the group's 50s passed", n)
	}
	if r := s.heartbeat("g", beat, img); r.Err == nil {
		t.Fatalf("the expired member's heartbeat: %+v, want UNKNOWN_MEMBER_ID", r)
	}
	img = withGroupConfigs(t, img, "g", nil, controller.GroupConfigShareHeartbeatIntervalMs, controller.GroupConfigShareSessionTimeoutMs)
	if r := s.heartbeat("g", join, img); r.Err != nil || r.HeartbeatInterval != 6*time.Second {
		t.Fatalf("join after the configs were deleted: %+v, want the node's 6s", r)
	}
	clk.now = clk.now.Add(share.DefaultSessionTimeout)
	if n := members(); n != 0 {
		t.Fatalf("%d members after the node's session timeout", n)
	}
}

// TestShareGroupHoldsIDWhileMembersLive: a share group holds its id against classic and
// consumer-protocol joins while it has members, and gives it up once its last member's session timed
// out, without a share request in between.
func TestShareGroupHoldsIDWhileMembersLive(t *testing.T) {
	clk := &fixedClock{now: time.Unix(1000, 0)}
	s := &shareGroups{clock: clk, groups: map[string]*share.Group{}}
	img := controller.NewImage("c", 1)
	join := share.HeartbeatRequest{MemberID: "m1", MemberEpoch: share.JoinEpoch, Subscribed: []string{"t"}}
	if r := s.heartbeat("g", join, img); r.Err != nil {
		t.Fatalf("join: %+v", r)
	}
	if !s.hasMembers("g", img) {
		t.Fatal("a share group with a member does not hold its id")
	}
	clk.now = clk.now.Add(share.DefaultSessionTimeout)
	if s.hasMembers("g", img) {
		t.Fatal("a share group whose only member timed out still holds its id")
	}
}
