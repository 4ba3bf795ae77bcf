package controller

import (
	"errors"
	"reflect"
	"strings"
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
		{Group: "g", Set: map[string]string{GroupConfigShareAutoOffsetReset: "by_duration:PT-1H"}},
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

// TestControllerDeadLetterTopicRule: a group's errors.deadletterqueue.topic.name may name a topic that
// does not exist, or one that sets errors.deadletterqueue.group.enable=true, and no other; a topic that
// later loses the flag does not block the group's other changes, and the rule holds only for the
// groups a change touches.
func TestControllerDeadLetterTopicRule(t *testing.T) {
	on := map[string]string{ConfigDeadLetterGroupEnable: "TRUE"}
	img, err := applyAll(CreateTopic{Name: "dlq.on", ID: idA, Partitions: 1, Configs: on},
		CreateTopic{Name: "dlq.off", ID: idB, Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !img.DeadLetterEnabled("dlq.on") || img.DeadLetterEnabled("dlq.off") || img.DeadLetterEnabled("dlq.missing") {
		t.Fatalf("enabled: on %t off %t missing %t", img.DeadLetterEnabled("dlq.on"), img.DeadLetterEnabled("dlq.off"), img.DeadLetterEnabled("dlq.missing"))
	}
	name := func(group, topic string) Command {
		return AlterGroupConfigs{Group: group, Set: map[string]string{GroupConfigDeadLetterTopic: topic}}
	}
	check := func(cur *Image, cmd Command) (*Image, error) {
		next, err := Apply(cur, cmd)
		if err != nil {
			return nil, err
		}
		return next, CheckConfigRules(cur, next)
	}
	for _, topic := range []string{"dlq.on", "dlq.missing"} {
		if _, err := check(img, name("g", topic)); err != nil {
			t.Errorf("naming %s: %v", topic, err)
		}
	}
	_, err = check(img, name("g", "dlq.off"))
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), ConfigDeadLetterGroupEnable) {
		t.Fatalf("naming a topic without the flag: %v, want ErrInvalidConfig naming %s", err, ConfigDeadLetterGroupEnable)
	}
	named, err := check(img, name("g", "dlq.on"))
	if err != nil {
		t.Fatal(err)
	}
	off, err := check(named, AlterTopicConfigs{Name: "dlq.on", Set: map[string]string{ConfigDeadLetterGroupEnable: "false"}})
	if err != nil {
		t.Fatalf("turning the flag off under a group that names the topic: %v", err)
	}
	if _, err := check(off, AlterGroupConfigs{Group: "g", Set: map[string]string{GroupConfigShareDeliveryCountLimit: "3"}}); err != nil {
		t.Fatalf("another config of the group once its topic lost the flag: %v", err)
	}
	if _, err := check(off, name("h", "dlq.on")); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("another group naming the topic that lost the flag: %v, want ErrInvalidConfig", err)
	}
}
