package controller

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Command is one metadata change. Commands are plain values: everything Apply needs (ids,
// timestamps) is inside them, so applying the same commands in the same order on any node yields the
// same Image.
type Command interface {
	command()
}

// CreateTopic creates a topic. Configs must already be valid (ValidateTopicConfigs); Apply checks
// them again.
type CreateTopic struct {
	Name       string
	ID         TopicID
	Partitions int32
	Configs    map[string]string
	Internal   bool
	CreatedMs  int64
}

// DeleteTopic deletes a topic. A client may not delete an internal topic; AllowInternal is set only
// by weir itself.
type DeleteTopic struct {
	Name          string
	AllowInternal bool
}

// CreatePartitions grows a topic to Total partitions.
type CreatePartitions struct {
	Name  string
	Total int32
}

// AlterTopicConfigs sets and removes configs of a topic. A key in both is set.
type AlterTopicConfigs struct {
	Name   string
	Set    map[string]string
	Remove []string
}

// AlterBrokerConfigs sets and removes cluster-wide broker configs. A key in both is set.
type AlterBrokerConfigs struct {
	Set    map[string]string
	Remove []string
}

// AllocateProducerIDs hands out the next N producer ids.
type AllocateProducerIDs struct {
	N int64
}

// RegisterBroker adds a broker or updates its address.
type RegisterBroker struct {
	Broker Broker
}

func (CreateTopic) command()         {}
func (DeleteTopic) command()         {}
func (CreatePartitions) command()    {}
func (AlterTopicConfigs) command()   {}
func (AlterBrokerConfigs) command()  {}
func (AllocateProducerIDs) command() {}
func (RegisterBroker) command()      {}

// maxTopicNameLen is Kafka's limit: 255 minus room for the partition suffix and deletion markers of
// the log directory name.
const maxTopicNameLen = 249

// ValidateTopicName checks a topic name as Kafka does: 1 to 249 characters of [a-zA-Z0-9._-], and
// neither "." nor "..". It returns ErrInvalidTopicName otherwise.
func ValidateTopicName(name string) error {
	if name == "" || name == "." || name == ".." {
		return fmt.Errorf("%w: %q", ErrInvalidTopicName, name)
	}
	if len(name) > maxTopicNameLen {
		return fmt.Errorf("%w: %d characters, at most %d", ErrInvalidTopicName, len(name), maxTopicNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q has %q", ErrInvalidTopicName, name, c)
		}
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
	case AllocateProducerIDs:
		err = next.allocateProducerIDs(c)
	case RegisterBroker:
		err = next.registerBroker(c)
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
	img.Topics[c.Name] = &Topic{
		Name:       c.Name,
		ID:         c.ID,
		Partitions: c.Partitions,
		Configs:    configs,
		Internal:   c.Internal,
		CreatedMs:  c.CreatedMs,
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
	nt := *t
	nt.Partitions = c.Total
	img.Topics[c.Name] = &nt
	return nil
}

func (img *Image) alterTopicConfigs(c AlterTopicConfigs) error {
	t, ok := img.Topics[c.Name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, c.Name)
	}
	configs, err := alterConfigs(t.Configs, c.Set, c.Remove, topicDefByName, "topic")
	if err != nil {
		return err
	}
	nt := *t
	nt.Configs = configs
	img.Topics[c.Name] = &nt
	return nil
}

func (img *Image) alterBrokerConfigs(c AlterBrokerConfigs) error {
	configs, err := alterConfigs(img.BrokerConfigs, c.Set, c.Remove, brokerDefByName, "broker")
	if err != nil {
		return err
	}
	img.BrokerConfigs = configs
	return nil
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
	for i := range img.Brokers {
		if img.Brokers[i].NodeID == b.NodeID {
			img.Brokers[i] = b
			return nil
		}
	}
	img.Brokers = append(img.Brokers, b)
	sort.Slice(img.Brokers, func(i, j int) bool { return img.Brokers[i].NodeID < img.Brokers[j].NodeID })
	return nil
}
