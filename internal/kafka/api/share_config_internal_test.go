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
		t.Fatal("turning RENEW off does not change the owner's settings, so the owner would not be retuned")
	}
}

// TestShareGroupMembershipConfigs: a share group's membership settings are its share.heartbeat.interval.ms
// and share.session.timeout.ms, else the node's, and the node's again once the group's are deleted (the
// group coordinator applies them from the member's next heartbeat, group.TestShareGroupExpiresOnTimer).
func TestShareGroupMembershipConfigs(t *testing.T) {
	s := &shareGroups{groupCfg: share.GroupConfig{HeartbeatInterval: 6 * time.Second}}
	img := controller.NewImage("c", 1)
	if got := s.membership(img, "g"); got != (share.GroupConfig{HeartbeatInterval: 6 * time.Second}) {
		t.Fatalf("a group without configs: %+v, want the node's", got)
	}
	img = withGroupConfigs(t, img, "g", map[string]string{
		controller.GroupConfigShareHeartbeatIntervalMs: "7000", controller.GroupConfigShareSessionTimeoutMs: "50000"})
	if got := s.membership(img, "g"); got != (share.GroupConfig{HeartbeatInterval: 7 * time.Second, SessionTimeout: 50 * time.Second}) {
		t.Fatalf("the group's configs: %+v, want 7s and 50s", got)
	}
	if got := s.membership(img, "h"); got != (share.GroupConfig{HeartbeatInterval: 6 * time.Second}) {
		t.Fatalf("another group: %+v", got)
	}
	img = withGroupConfigs(t, img, "g", nil, controller.GroupConfigShareHeartbeatIntervalMs, controller.GroupConfigShareSessionTimeoutMs)
	if got := s.membership(img, "g"); got != (share.GroupConfig{HeartbeatInterval: 6 * time.Second}) {
		t.Fatalf("after the configs were deleted: %+v, want the node's", got)
	}
}
