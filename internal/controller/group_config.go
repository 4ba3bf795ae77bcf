package controller

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"strings"
)

// Group configs (Kafka's GROUP config resource, type 32) that share groups use (docs/queues.md,
// "Configuration"). Their ranges are Kafka's broker bounds at their defaults
// (group.share.min/max.record.lock.duration.ms, group.share.min/max.delivery.count.limit,
// group.share.min/max.partition.max.record.locks, group.share.min/max.session.timeout.ms,
// group.share.min/max.heartbeat.interval.ms), which the node describes as read-only broker configs.
const (
	GroupConfigShareLockDurationMs      = "share.record.lock.duration.ms"
	GroupConfigShareKeyOrdered          = "weir.share.key.ordered"
	GroupConfigShareDeliveryCountLimit  = "share.delivery.count.limit"
	GroupConfigShareRecordLocksMax      = "share.partition.max.record.locks"
	GroupConfigShareRenewEnable         = "share.renew.acknowledge.enable"
	GroupConfigShareSessionTimeoutMs    = "share.session.timeout.ms"
	GroupConfigShareHeartbeatIntervalMs = "share.heartbeat.interval.ms"
	GroupConfigShareAutoOffsetReset     = "share.auto.offset.reset"
	GroupConfigShareIsolationLevel      = "share.isolation.level"
	GroupConfigDeadLetterTopic          = "errors.deadletterqueue.topic.name"
	GroupConfigDeadLetterCopyRecord     = "errors.deadletterqueue.copy.record.enable"
)

// The values of share.isolation.level.
const (
	ShareReadUncommitted = "read_uncommitted"
	ShareReadCommitted   = "read_committed"
)

// Kafka's bounds of the share group configs (the group.share.min/max.* broker configs at their
// defaults).
const (
	ShareLockDurationMinMs      = 15000
	ShareLockDurationMaxMs      = 60000
	ShareDeliveryCountLimitMin  = 2
	ShareDeliveryCountLimitMax  = 10
	ShareRecordLocksMin         = 100
	ShareRecordLocksMax         = 10000
	ShareSessionTimeoutMinMs    = 45000
	ShareSessionTimeoutMaxMs    = 60000
	ShareHeartbeatIntervalMinMs = 5000
	ShareHeartbeatIntervalMaxMs = 15000
)

// SourceGroup is a value set on the group (Kafka's GROUP_CONFIG).
const SourceGroup ConfigSource = 12

// deadLetterTopic accepts "" (no dead-letter topic) or a valid topic name that is not an internal
// one: the broker writes the copies itself, so a group may not point them at __consumer_offsets or
// another topic of weir's.
func deadLetterTopic(v string) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return "", nil
	}
	if ValidateTopicName(v) != nil {
		return "", fmt.Errorf("%q is not a valid topic name", v)
	}
	if strings.HasPrefix(v, "__") {
		return "", fmt.Errorf("%q is an internal topic name", v)
	}
	return v, nil
}

// groupDefs is every group config weir takes, with Kafka's type and default.
var groupDefs = []configDef{
	{name: GroupConfigShareLockDurationMs, typ: ConfigTypeInt, def: "30000", check: longRange(ShareLockDurationMinMs, ShareLockDurationMaxMs),
		doc: "how long a share consumer holds a record it fetched before it goes back to the others"},
	{name: GroupConfigShareDeliveryCountLimit, typ: ConfigTypeInt, def: "5", check: longRange(ShareDeliveryCountLimitMin, ShareDeliveryCountLimitMax),
		doc: "deliveries of a record before a release archives it (and copies it to the dead-letter topic)"},
	{name: GroupConfigShareRecordLocksMax, typ: ConfigTypeInt, def: "2000", check: longRange(ShareRecordLocksMin, ShareRecordLocksMax),
		doc: "the most records in flight (acquired, available again or not yet acknowledged) in one share-partition of the group"},
	{name: GroupConfigShareRenewEnable, typ: ConfigTypeBoolean, def: "false", check: boolean,
		doc: "whether members may extend their acquisition locks with RENEW acknowledgements (KIP-1222); when false a RENEW is INVALID_RECORD_STATE"},
	{name: GroupConfigShareSessionTimeoutMs, typ: ConfigTypeInt, def: "45000", check: longRange(ShareSessionTimeoutMinMs, ShareSessionTimeoutMaxMs),
		doc: "how long a member may go without a heartbeat before the coordinator removes it from the group"},
	{name: GroupConfigShareHeartbeatIntervalMs, typ: ConfigTypeInt, def: "5000", check: longRange(ShareHeartbeatIntervalMinMs, ShareHeartbeatIntervalMaxMs),
		doc: "how often the members are told to heartbeat"},
	{name: GroupConfigShareAutoOffsetReset, typ: ConfigTypeString, def: "latest", check: shareAutoOffsetReset,
		doc: "where a share-partition without state starts: the log end (latest), the log start (earliest), or the first record at most a duration old (by_duration:PnDTnHnMn.nS, ISO-8601, the log end when there is none)"},
	{name: GroupConfigShareIsolationLevel, typ: ConfigTypeString, def: ShareReadUncommitted, check: oneOf(ShareReadUncommitted, ShareReadCommitted),
		doc: "which records a share consumer gets: every record below the high watermark (read_uncommitted), or only those below the last stable offset that no aborted transaction wrote (read_committed)"},
	{name: GroupConfigShareKeyOrdered, typ: ConfigTypeBoolean, def: "false", check: boolean,
		doc: "hand out at most one record of a key at a time, in offset order, so that each key's records are processed in order while different keys spread over every member"},
	{name: GroupConfigDeadLetterTopic, typ: ConfigTypeString, def: "", check: deadLetterTopic,
		doc: "the topic records rejected or past the delivery limit are copied to; empty for none. It must start with the broker's errors.deadletterqueue.topic.name.prefix (dlq.) and, once it exists, set errors.deadletterqueue.group.enable=true (KIP-1191)"},
	{name: GroupConfigDeadLetterCopyRecord, typ: ConfigTypeBoolean, def: "true", check: boolean,
		doc: "whether a dead letter carries the record's key, value and headers (weir's default); when false only the weir.dlq.* headers, as Kafka's default"},
}

var groupDefByName = map[string]*configDef{}

func init() {
	for i := range groupDefs {
		groupDefByName[groupDefs[i].name] = &groupDefs[i]
	}
}

// AlterGroupConfigs sets and removes configs of a group. A key in both is set.
type AlterGroupConfigs struct {
	Group  string
	Set    map[string]string
	Remove []string
}

func (AlterGroupConfigs) command() {}

func (img *Image) alterGroupConfigs(c AlterGroupConfigs) error {
	if c.Group == "" {
		return fmt.Errorf("%w: empty group id", ErrInvalidConfig)
	}
	configs, err := alterConfigs(img.GroupConfigs[c.Group], c.Set, c.Remove, groupDefByName, "group")
	if err != nil {
		return err
	}
	m := maps.Clone(img.GroupConfigs)
	if m == nil {
		m = map[string]map[string]string{}
	}
	if len(configs) == 0 {
		delete(m, c.Group)
	} else {
		m[c.Group] = configs
	}
	img.GroupConfigs = m
	return nil
}

// GroupConfig returns the value of a group config set on group, or its default; false for a key
// that is not a group config.
func (img *Image) GroupConfig(group, key string) (string, bool) {
	d, ok := groupDefByName[key]
	if !ok {
		return "", false
	}
	if v, ok := img.GroupConfigs[group][key]; ok {
		return v, true
	}
	return d.def, true
}

// GroupConfigSet reports whether key is set on group (not its default).
func (img *Image) GroupConfigSet(group, key string) bool {
	_, ok := img.GroupConfigs[group][key]
	return ok
}

// DescribeGroupConfigs describes every group config of group, sorted by name. A group with nothing
// set, or that does not exist, has its defaults, as Kafka answers: the describing node's, from
// defaults (group config name to value) where it has one, else Kafka's.
func (img *Image) DescribeGroupConfigs(group string, defaults map[string]string) []ConfigEntry {
	out := make([]ConfigEntry, 0, len(groupDefs))
	for i := range groupDefs {
		d := &groupDefs[i]
		def := cmp.Or(defaults[d.name], d.def)
		e := ConfigEntry{Name: d.name, Value: def, Source: SourceDefault, Type: d.typ, Doc: d.doc}
		if v, ok := img.GroupConfigs[group][d.name]; ok {
			e.Value, e.Source = v, SourceGroup
			e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: d.name, Value: v, Source: SourceGroup})
		}
		e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: d.name, Value: def, Source: SourceDefault})
		out = append(out, e)
	}
	sortEntries(out)
	return out
}

// checkGroupConfigs validates the group configs of a loaded image, in place.
func (img *Image) checkGroupConfigs() error {
	for g, set := range img.GroupConfigs {
		configs, err := validate(set, groupDefByName, "group")
		if err != nil {
			return fmt.Errorf("group %q: %w", g, err)
		}
		img.GroupConfigs[g] = configs
	}
	return nil
}

// EditGroupConfigs sets and removes configs of a group (IncrementalAlterConfigs' SET and DELETE). An
// unknown key, a bad value, or a dead-letter topic that exists without
// errors.deadletterqueue.group.enable=true (CheckConfigRules) is ErrInvalidConfig and changes nothing.
func (s *Store) EditGroupConfigs(ctx context.Context, group string, set map[string]string, remove []string, validateOnly bool) error {
	build := func(*Image) Command { return AlterGroupConfigs{Group: group, Set: set, Remove: remove} }
	if err := s.checkConfigs(build); err != nil {
		return err
	}
	_, _, err := s.propose(ctx, build, validateOnly)
	return err
}
