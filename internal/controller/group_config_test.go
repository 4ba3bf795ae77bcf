package controller

import (
	"errors"
	"reflect"
	"testing"
)

// TestControllerGroupConfigs applies group configs: set values resolve over the defaults for that group
// only, values at Kafka's bounds are taken, bad keys and values (past the bounds) are refused with the image unchanged, removing the last one drops the
// group, and the command and the image survive their encodings.
func TestControllerGroupConfigs(t *testing.T) {
	img, err := applyAll(AlterGroupConfigs{Group: "g", Set: map[string]string{
		GroupConfigShareDeliveryCountLimit: " 3", GroupConfigDeadLetterTopic: "dlq.g"}})
	if err != nil {
		t.Fatal(err)
	}
	share, err := Apply(img, AlterGroupConfigs{Group: "g", Set: map[string]string{
		GroupConfigShareRecordLocksMax: "10000", GroupConfigShareRenewEnable: "True", GroupConfigShareSessionTimeoutMs: "45000",
		GroupConfigShareHeartbeatIntervalMs: "15000"}})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{GroupConfigShareRecordLocksMax: "10000", GroupConfigShareRenewEnable: "true",
		GroupConfigShareSessionTimeoutMs: "45000", GroupConfigShareHeartbeatIntervalMs: "15000", GroupConfigShareKeyOrdered: "false"} {
		if v, _ := share.GroupConfig("g", k); v != want {
			t.Errorf("%s of g = %q, want %q", k, v, want)
		}
	}
	if v, _ := img.GroupConfig("g", GroupConfigShareDeliveryCountLimit); v != "3" || !img.GroupConfigSet("g", GroupConfigShareDeliveryCountLimit) {
		t.Fatalf("delivery limit of g: %q", v)
	}
	if v, _ := img.GroupConfig("h", GroupConfigShareDeliveryCountLimit); v != "5" || img.GroupConfigSet("h", GroupConfigShareDeliveryCountLimit) {
		t.Fatalf("delivery limit of h: %q", v)
	}
	for _, bad := range []AlterGroupConfigs{
		{Group: "g", Set: map[string]string{"share.unknown": "1"}},
		{Group: "g", Set: map[string]string{GroupConfigShareLockDurationMs: "14999"}},
		{Group: "g", Set: map[string]string{GroupConfigShareRecordLocksMax: "99"}},
		{Group: "g", Set: map[string]string{GroupConfigShareRecordLocksMax: "10001"}},
		{Group: "g", Set: map[string]string{GroupConfigShareRenewEnable: "on"}},
		{Group: "g", Set: map[string]string{GroupConfigShareSessionTimeoutMs: "44999"}},
		{Group: "g", Set: map[string]string{GroupConfigShareSessionTimeoutMs: "60001"}},
		{Group: "g", Set: map[string]string{GroupConfigShareHeartbeatIntervalMs: "4999"}},
		{Group: "g", Set: map[string]string{GroupConfigShareHeartbeatIntervalMs: "15001"}},
		{Group: "g", Set: map[string]string{GroupConfigShareKeyOrdered: "sometimes"}},
		{Group: "g", Set: map[string]string{GroupConfigShareAutoOffsetReset: "by_duration:PT1H"}},
		{Group: "g", Set: map[string]string{GroupConfigDeadLetterTopic: "__share_group_state"}},
		{Group: "g", Remove: []string{"share.unknown"}},
		{Group: "", Set: map[string]string{GroupConfigShareDeliveryCountLimit: "3"}},
	} {
		if _, err := Apply(img, bad); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v, want ErrInvalidConfig", bad, err)
		}
	}
	data, err := encodeImage(img)
	if err != nil {
		t.Fatal(err)
	}
	read, err := decodeMetadata(data)
	if err != nil || !reflect.DeepEqual(read.GroupConfigs, img.GroupConfigs) {
		t.Fatalf("image read back: %v %+v", err, read)
	}
	cmd := AlterGroupConfigs{Group: "g", Remove: []string{GroupConfigShareDeliveryCountLimit, GroupConfigDeadLetterTopic}}
	data, err = EncodeCommand(cmd)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeCommand(data)
	if err != nil || !reflect.DeepEqual(back, Command(cmd)) {
		t.Fatalf("decoded %+v, %v; want %+v", back, err, cmd)
	}
	cleared, err := Apply(img, cmd)
	if err != nil || len(cleared.GroupConfigs) != 0 || len(img.GroupConfigs["g"]) != 2 {
		t.Fatalf("cleared %+v (%v); the old image %+v", cleared.GroupConfigs, err, img.GroupConfigs)
	}
}
