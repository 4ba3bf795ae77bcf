package controller

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/weir-mq/weir/internal/acl"
)

// Command is one metadata change. Commands are plain values: everything Apply needs (ids,
// timestamps) is inside them, so applying the same commands in the same order on any node yields the
// same Image.
type Command interface {
	command()
}

// CreateTopic creates a topic. Configs must already be valid (ValidateTopicConfigs); Apply checks
// them again. Replicas, one list per partition, is the placement the proposer chose (Place); when
// it is nil Apply places the partitions itself with Place, ReplicationFactor replicas each (0 or -1:
// default.replication.factor).
type CreateTopic struct {
	Name              string
	ID                TopicID
	Partitions        int32
	Configs           map[string]string
	Internal          bool
	CreatedMs         int64
	ReplicationFactor int16
	Replicas          [][]int32
}

// DeleteTopic deletes a topic. A client may not delete an internal topic; AllowInternal is set only
// by weir itself.
type DeleteTopic struct {
	Name          string
	AllowInternal bool
}

// CreatePartitions grows a topic to Total partitions. Replicas holds the placement of the new
// partitions only; when nil Apply places them with Place at the topic's replication factor.
type CreatePartitions struct {
	Name     string
	Total    int32
	Replicas [][]int32
}

// AlterTopicConfigs sets and removes configs of a topic. A key in both is set. ListEdits change list
// configs item by item.
type AlterTopicConfigs struct {
	Name   string
	Set    map[string]string
	Remove []string
	ListEdits
}

// AlterBrokerConfigs sets and removes cluster-wide broker configs. A key in both is set.
type AlterBrokerConfigs struct {
	Set    map[string]string
	Remove []string
	ListEdits
}

// ListEdits are IncrementalAlterConfigs' APPEND and SUBTRACT: items added to (when not there yet) or
// removed from the current value of a list config, the value set on the resource or else its
// default. A key may not also be set or removed in the same command.
type ListEdits struct {
	Append   map[string][]string `json:",omitempty"`
	Subtract map[string][]string `json:",omitempty"`
}

// AllocateProducerIDs hands out the next N producer ids.
type AllocateProducerIDs struct {
	N int64
}

// RegisterBroker adds a broker or updates its address and rack. Its Epoch and Fenced fields are
// ignored: a broker with a new Incarnation gets the new image Version as its epoch, and the
// partitions it leads get a new leader epoch; a registered broker is never fenced.
type RegisterBroker struct {
	Broker Broker
}

// BecomeController records that NodeID won the controller election of Raft term Epoch. ClusterID
// is taken only by the first one, when the image has none.
type BecomeController struct {
	NodeID    int32
	Epoch     int64
	ClusterID string
}

// FenceBroker fences a broker whose session expired and moves its leaderships (docs/controller.md).
type FenceBroker struct {
	NodeID int32
}

// UnfenceBroker lifts the fence of a broker that heartbeats again and elects it where a partition
// has no leader and it is eligible.
type UnfenceBroker struct {
	NodeID int32
}

// AlterPartition is a partition leader's request to replace the ISR. It applies only if Leader,
// LeaderEpoch and PartitionEpoch are the partition's current ones (ErrStaleEpoch otherwise).
type AlterPartition struct {
	Topic          string
	Partition      int32
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// ElectPreferredLeaders moves the leadership of each named partition (every partition when
// Partitions is nil) to its preferred replica, where that replica is unfenced and in the ISR.
type ElectPreferredLeaders struct {
	Partitions []TopicPartition
}

// CreateAcls adds ACL bindings (docs/security.md). Every binding must pass acl.Binding.Validate,
// or the command changes nothing; a binding the image already holds is not added twice.
type CreateAcls struct {
	Bindings []acl.Binding
}

// DeleteAcls removes these exact ACL bindings; those the image does not hold are ignored. The
// proposer selects them with its filters from the image it read, and reports them as deleted.
type DeleteAcls struct {
	Bindings []acl.Binding
}

func (CreateAcls) command() {}
func (DeleteAcls) command() {}

// ReassignPartition starts, replaces or (Cancel) cancels the move of a partition to the target
// Replicas (docs/reassignment.md). Replicas is ignored when Cancel is set.
type ReassignPartition struct {
	Topic     string
	Partition int32
	Replicas  []int32 `json:",omitempty"`
	Cancel    bool    `json:",omitempty"`
}

// ElectLeader elects a leader of one partition, as ElectLeaders asks: the preferred replica, or
// (Unclean) any live replica of a partition without a leader (docs/reassignment.md).
type ElectLeader struct {
	Topic     string
	Partition int32
	Unclean   bool `json:",omitempty"`
}

func (CreateTopic) command()           {}
func (DeleteTopic) command()           {}
func (CreatePartitions) command()      {}
func (AlterTopicConfigs) command()     {}
func (AlterBrokerConfigs) command()    {}
func (AllocateProducerIDs) command()   {}
func (RegisterBroker) command()        {}
func (BecomeController) command()      {}
func (FenceBroker) command()           {}
func (UnfenceBroker) command()         {}
func (AlterPartition) command()        {}
func (ElectPreferredLeaders) command() {}
func (ReassignPartition) command()     {}
func (ElectLeader) command()           {}

// maxTopicNameLen is Kafka's limit: 255 minus room for the partition suffix and deletion markers of
// the log directory name.
const maxTopicNameLen = 249

// ValidateTopicName checks a topic name as Kafka does: 1 to 249 characters of [a-zA-Z0-9._-], and
// neither "." nor "..". It returns ErrInvalidTopicName otherwise.
func ValidateTopicName(name string) error {
	if name == "" || name == "." || name == ".." {
		return fmt.Errorf("%w: %q", ErrInvalidTopicName, name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q has %q", ErrInvalidTopicName, name, c)
		}
	}
	// every character is ASCII by now, so the length in bytes is the length in characters
	if len(name) > maxTopicNameLen {
		return fmt.Errorf("%w: %d characters, at most %d", ErrInvalidTopicName, len(name), maxTopicNameLen)
	}
	return nil
}

// collisionKey is the form under which two names collide in metric names ('.' and '_' alike).
func collisionKey(name string) string { return strings.ReplaceAll(name, ".", "_") }

// Apply returns the image that results from applying cmd to img. It is a pure function: img is not
// modified, and the result depends only on img and cmd. On error img stays the current image.
func Apply(img *Image, cmd Command) (*Image, error) {
	next := img.clone()
	var err error
	switch c := cmd.(type) {
	case CreateTopic:
		err = next.createTopic(c)
	case DeleteTopic:
		err = next.deleteTopic(c)
	case CreatePartitions:
		err = next.createPartitions(c)
	case AlterTopicConfigs:
		err = next.alterTopicConfigs(c)
	case AlterBrokerConfigs:
		err = next.alterBrokerConfigs(c)
	case AlterPerBrokerConfigs:
		err = next.alterPerBrokerConfigs(c)
	case AlterGroupConfigs:
		err = next.alterGroupConfigs(c)
	case AllocateProducerIDs:
		err = next.allocateProducerIDs(c)
	case RegisterBroker:
		err = next.registerBroker(c)
	case BecomeController:
		err = next.becomeController(c)
	case FenceBroker:
		err = next.fenceBroker(c)
	case UnfenceBroker:
		err = next.unfenceBroker(c)
	case AlterPartition:
		err = next.alterPartition(c)
	case ElectPreferredLeaders:
		err = next.electPreferredLeaders(c)
	case AlterScramCredentials:
		err = next.alterScramCredentials(c)
	case CreateAcls:
		err = next.createAcls(c)
	case DeleteAcls:
		err = next.deleteAcls(c)
	case ReassignPartition:
		err = next.reassignPartition(c)
	case ElectLeader:
		err = next.electLeader(c)
	case AlterClientQuotas:
		err = next.alterClientQuotas(c)
	default:
		err = fmt.Errorf("%w: %T", ErrInvalidCommand, cmd)
	}
	if err != nil {
		return nil, err
	}
	next.Version++
	next.index()
	return next, nil
}

// clone copies the mutable containers of img; the Topics they point to are shared and never modified.
func (img *Image) clone() *Image {
	next := *img
	next.Brokers = append([]Broker(nil), img.Brokers...)
	next.Topics = make(map[string]*Topic, len(img.Topics)+1)
	for k, v := range img.Topics {
		next.Topics[k] = v
	}
	next.BrokerConfigs = copyConfigs(img.BrokerConfigs)
	// next.byID still points at img's index, read-only; Apply rebuilds it after the change.
	return &next
}

func copyConfigs(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func checkPartitions(n int32) error {
	if n < 1 || n > MaxPartitions {
		return fmt.Errorf("%w: %d, must be 1 to %d", ErrInvalidPartitions, n, MaxPartitions)
	}
	return nil
}

func (img *Image) createTopic(c CreateTopic) error {
	if err := ValidateTopicName(c.Name); err != nil {
		return err
	}
	if _, ok := img.Topics[c.Name]; ok {
		return fmt.Errorf("%w: %q", ErrTopicExists, c.Name)
	}
	key := collisionKey(c.Name)
	for name := range img.Topics {
		if collisionKey(name) == key {
			return fmt.Errorf("%w: %q collides with existing topic %q", ErrInvalidTopicName, c.Name, name)
		}
	}
	if c.ID.IsZero() {
		return fmt.Errorf("%w: zero topic id", ErrInvalidCommand)
	}
	if _, ok := img.byID[c.ID]; ok {
		return fmt.Errorf("%w: topic id %s in use", ErrInvalidCommand, c.ID)
	}
	if err := checkPartitions(c.Partitions); err != nil {
		return err
	}
	configs, err := ValidateTopicConfigs(c.Configs)
	if err != nil {
		return err
	}
	assignment := c.Replicas
	if assignment == nil {
		rf := c.ReplicationFactor
		if rf <= 0 {
			rf = img.DefaultReplicationFactor()
		}
		if assignment, err = Place(img.Brokers, img.LeaderCounts(), c.Partitions, rf, 0); err != nil {
			return err
		}
	}
	if len(assignment) != int(c.Partitions) {
		return fmt.Errorf("%w: %d replica lists for %d partitions", ErrInvalidReplication, len(assignment), c.Partitions)
	}
	states, err := img.newPartitionStates(assignment)
	if err != nil {
		return err
	}
	img.Topics[c.Name] = &Topic{
		Name:       c.Name,
		ID:         c.ID,
		Partitions: c.Partitions,
		Configs:    configs,
		Internal:   c.Internal,
		CreatedMs:  c.CreatedMs,
		States:     states,
	}
	return nil
}

func (img *Image) deleteTopic(c DeleteTopic) error {
	t, ok := img.Topics[c.Name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, c.Name)
	}
	if t.Internal && !c.AllowInternal {
		return fmt.Errorf("%w: %q cannot be deleted", ErrInternalTopic, c.Name)
	}
	delete(img.Topics, c.Name)
	return nil
}

func (img *Image) createPartitions(c CreatePartitions) error {
	t, ok := img.Topics[c.Name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, c.Name)
	}
	if err := checkPartitions(c.Total); err != nil {
		return err
	}
	if c.Total <= t.Partitions {
		return fmt.Errorf("%w: topic %q has %d partitions, asked for %d", ErrInvalidPartitions, c.Name, t.Partitions, c.Total)
	}
	assignment := c.Replicas
	if assignment == nil {
		rf := t.ReplicationFactor()
		if rf < 1 {
			rf = 1
		}
		var err error
		if assignment, err = Place(img.Brokers, img.LeaderCounts(), c.Total-t.Partitions, rf, t.Partitions); err != nil {
			return err
		}
	}
	if len(assignment) != int(c.Total-t.Partitions) {
		return fmt.Errorf("%w: %d replica lists for %d new partitions", ErrInvalidReplication, len(assignment), c.Total-t.Partitions)
	}
	states, err := img.newPartitionStates(assignment)
	if err != nil {
		return err
	}
	nt := *t
	nt.Partitions = c.Total
	nt.States = append(append(make([]*PartitionState, 0, c.Total), t.States...), states...)
	img.Topics[c.Name] = &nt
	return nil
}

func (img *Image) alterTopicConfigs(c AlterTopicConfigs) error {
	t, ok := img.Topics[c.Name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, c.Name)
	}
	set, err := c.ListEdits.apply(c.Set, c.Remove, topicDefByName, "topic", func(d *configDef) string {
		v, _ := img.topicValue(d, t.Configs)
		return v
	})
	if err != nil {
		return err
	}
	configs, err := alterConfigs(t.Configs, set, c.Remove, topicDefByName, "topic")
	if err != nil {
		return err
	}
	nt := *t
	nt.Configs = configs
	img.Topics[c.Name] = &nt
	return nil
}

func (img *Image) alterBrokerConfigs(c AlterBrokerConfigs) error {
	set, err := c.ListEdits.apply(c.Set, c.Remove, brokerDefByName, "broker", func(d *configDef) string {
		if v, ok := img.BrokerConfigs[d.brokerName]; ok {
			return v
		}
		return d.def
	})
	if err != nil {
		return err
	}
	configs, err := alterConfigs(img.BrokerConfigs, set, c.Remove, brokerDefByName, "broker")
	if err != nil {
		return err
	}
	img.BrokerConfigs = configs
	return nil
}

// apply returns set with the edited lists added: each key's current value (cur) with the appended
// items that are not in it yet added at its end and the subtracted items removed. A key that is not a
// list config, or that set or remove names too, is ErrInvalidConfig.
func (e ListEdits) apply(set map[string]string, remove []string, defs map[string]*configDef, kind string,
	cur func(*configDef) string) (map[string]string, error) {
	if len(e.Append) == 0 && len(e.Subtract) == 0 {
		return set, nil
	}
	out := copyConfigs(set)
	edit := func(k string, items []string, add bool) error {
		d, ok := defs[k]
		switch {
		case !ok:
			return fmt.Errorf("%w: unknown %s config %q", ErrInvalidConfig, kind, k)
		case d.typ != ConfigTypeList:
			return fmt.Errorf("%w: %s is not a list config: APPEND and SUBTRACT take only lists", ErrInvalidConfig, k)
		case slices.Contains(remove, k):
			return fmt.Errorf("%w: %s is both removed and edited", ErrInvalidConfig, k)
		}
		v, ok := out[k]
		if !ok {
			v = cur(d)
		} else if _, setToo := set[k]; setToo {
			return fmt.Errorf("%w: %s is both set and edited", ErrInvalidConfig, k)
		}
		list := splitList(v)
		for _, it := range items {
			it = strings.TrimSpace(it)
			switch {
			case add && !slices.Contains(list, it):
				list = append(list, it)
			case !add:
				list = slices.DeleteFunc(list, func(x string) bool { return x == it })
			}
		}
		out[k] = strings.Join(list, ",")
		return nil
	}
	for _, k := range sortedKeys(listKeys(e.Append)) {
		if err := edit(k, e.Append[k], true); err != nil {
			return nil, err
		}
	}
	for _, k := range sortedKeys(listKeys(e.Subtract)) {
		if err := edit(k, e.Subtract[k], false); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// splitList is a list config's items, trimmed, without empty ones.
func splitList(v string) []string {
	var out []string
	for it := range strings.SplitSeq(v, ",") {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, it)
		}
	}
	return out
}

// listKeys is m's keys as a set, for sortedKeys.
func listKeys(m map[string][]string) map[string]string {
	out := make(map[string]string, len(m))
	for k := range m {
		out[k] = ""
	}
	return out
}

func alterConfigs(cur, set map[string]string, remove []string, defs map[string]*configDef, kind string) (map[string]string, error) {
	if err := checkKnown(remove, defs, kind); err != nil {
		return nil, err
	}
	valid, err := validate(set, defs, kind)
	if err != nil {
		return nil, err
	}
	out := copyConfigs(cur)
	for _, k := range remove {
		delete(out, k)
	}
	for k, v := range valid {
		out[k] = v
	}
	return out, nil
}

// maxProducerIDBlock bounds one allocation.
const maxProducerIDBlock = 1 << 20

func (img *Image) allocateProducerIDs(c AllocateProducerIDs) error {
	if c.N < 1 || c.N > maxProducerIDBlock {
		return fmt.Errorf("%w: producer id block of %d", ErrInvalidCommand, c.N)
	}
	if img.NextProducerID > math.MaxInt64-c.N {
		return ErrProducerIDsExhausted
	}
	img.NextProducerID += c.N
	return nil
}

func (img *Image) registerBroker(c RegisterBroker) error {
	b := c.Broker
	if b.NodeID < 0 || b.Host == "" || b.Port < 1 || b.Port > math.MaxUint16 {
		return fmt.Errorf("%w: broker %+v", ErrInvalidCommand, b)
	}
	for _, e := range b.Listeners {
		if e.Name == "" || e.Host == "" || e.Port < 1 || e.Port > math.MaxUint16 {
			return fmt.Errorf("%w: broker %d listener %+v", ErrInvalidCommand, b.NodeID, e)
		}
	}
	b.Fenced = false
	// The registering command is the next Version: that is the new incarnation's epoch.
	b.Epoch = img.Version + 1
	for i := range img.Brokers {
		if img.Brokers[i].NodeID != b.NodeID {
			continue
		}
		old := img.Brokers[i]
		if old.Incarnation == b.Incarnation {
			b.Epoch = old.Epoch
		} else {
			img.bumpLeaderEpochs(b.NodeID)
		}
		img.Brokers[i] = b
		if old.Fenced {
			img.electLeaderless(b.NodeID)
		}
		return nil
	}
	img.Brokers = append(img.Brokers, b)
	sort.Slice(img.Brokers, func(i, j int) bool { return img.Brokers[i].NodeID < img.Brokers[j].NodeID })
	return nil
}
