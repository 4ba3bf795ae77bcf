package controller

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
)

// The client quota keys weir stores (KIP-13, KIP-124), as Kafka names them.
const (
	QuotaProducerByteRate  = "producer_byte_rate"
	QuotaConsumerByteRate  = "consumer_byte_rate"
	QuotaRequestPercentage = "request_percentage"
)

// quotaKeyIsRate tells the known quota keys: a byte rate must be a whole number, Kafka's LONG.
var quotaKeyIsRate = map[string]bool{
	QuotaProducerByteRate:  true,
	QuotaConsumerByteRate:  true,
	QuotaRequestPercentage: false,
}

// QuotaName is one component of a quota entity, the user or the client id: absent, a name, or the
// default entity (Kafka's null name, `<default>` in kafka-configs).
type QuotaName struct {
	Set     bool   `json:",omitempty"`
	Default bool   `json:",omitempty"`
	Name    string `json:",omitempty"`
}

// QuotaNamed and QuotaDefault build a QuotaName.
func QuotaNamed(name string) QuotaName { return QuotaName{Set: true, Name: name} }

// QuotaDefault is the default entity of a component.
func QuotaDefault() QuotaName { return QuotaName{Set: true, Default: true} }

// String is the name as kafka-configs prints it: `<default>` for the default entity.
func (n QuotaName) String() string {
	if n.Default {
		return "<default>"
	}
	return n.Name
}

// QuotaEntity names what a quota applies to: a user, a client id, or a user's client id, each a
// name or the default (KIP-546's entity types `user` and `client-id`).
type QuotaEntity struct {
	User     QuotaName `json:",omitempty"`
	ClientID QuotaName `json:",omitempty"`
}

// String is the entity in kafka-configs' words, e.g. `user=alice,client-id=<default>`.
func (e QuotaEntity) String() string {
	switch {
	case e.User.Set && e.ClientID.Set:
		return "user=" + e.User.String() + ",client-id=" + e.ClientID.String()
	case e.User.Set:
		return "user=" + e.User.String()
	default:
		return "client-id=" + e.ClientID.String()
	}
}

// ClientQuota is the quotas set on one entity.
type ClientQuota struct {
	Entity QuotaEntity
	Values map[string]float64
}

// QuotaAlteration sets and removes quota keys of one entity. A key in both is set.
type QuotaAlteration struct {
	Entity QuotaEntity
	Set    map[string]float64 `json:",omitempty"`
	Remove []string           `json:",omitempty"`
}

// AlterClientQuotas changes the quotas of entities, all or none; an entity left without a key is
// removed.
type AlterClientQuotas struct {
	Alterations []QuotaAlteration
}

func (AlterClientQuotas) command() {}

// ValidateQuotaAlteration checks an alteration as Kafka's controller does: an entity of a user, a
// client id or both, known keys only, byte rates whole and every value positive and finite. It
// returns ErrInvalidCommand otherwise.
func ValidateQuotaAlteration(a QuotaAlteration) error {
	for _, n := range []QuotaName{a.Entity.User, a.Entity.ClientID} {
		if n.Set && n.Default && n.Name != "" {
			return fmt.Errorf("%w: quota entity %s with both a name and the default", ErrInvalidCommand, a.Entity)
		}
	}
	if !a.Entity.User.Set && !a.Entity.ClientID.Set {
		return fmt.Errorf("%w: empty quota entity", ErrInvalidCommand)
	}
	for _, k := range a.Remove {
		if _, ok := quotaKeyIsRate[k]; !ok {
			return fmt.Errorf("%w: invalid configuration key %s", ErrInvalidCommand, k)
		}
	}
	for k, v := range a.Set {
		isRate, ok := quotaKeyIsRate[k]
		switch {
		case !ok:
			return fmt.Errorf("%w: invalid configuration key %s", ErrInvalidCommand, k)
		case math.IsNaN(v) || math.IsInf(v, 0) || v <= 0:
			return fmt.Errorf("%w: %s must be positive, not %v", ErrInvalidCommand, k, v)
		case isRate && (v != math.Trunc(v) || v > math.MaxInt64):
			return fmt.Errorf("%w: configuration %s must be a Long value, not %v", ErrInvalidCommand, k, v)
		}
	}
	return nil
}

func (img *Image) alterClientQuotas(c AlterClientQuotas) error {
	for _, a := range c.Alterations {
		if err := ValidateQuotaAlteration(a); err != nil {
			return err
		}
	}
	byEntity := make(map[QuotaEntity]map[string]float64, len(img.ClientQuotas)+len(c.Alterations))
	for _, q := range img.ClientQuotas {
		byEntity[q.Entity] = q.Values
	}
	for _, a := range c.Alterations {
		values := maps.Clone(byEntity[a.Entity])
		if values == nil {
			values = map[string]float64{}
		}
		for _, k := range a.Remove {
			delete(values, k)
		}
		maps.Copy(values, a.Set)
		if len(values) == 0 {
			delete(byEntity, a.Entity)
		} else {
			byEntity[a.Entity] = values
		}
	}
	quotas := make([]ClientQuota, 0, len(byEntity))
	for e, v := range byEntity {
		quotas = append(quotas, ClientQuota{Entity: e, Values: v})
	}
	slices.SortFunc(quotas, func(a, b ClientQuota) int { return compareQuotaEntities(a.Entity, b.Entity) })
	if len(quotas) == 0 {
		quotas = nil
	}
	img.ClientQuotas = quotas
	return nil
}

func compareQuotaNames(a, b QuotaName) int {
	key := func(n QuotaName) int {
		switch {
		case !n.Set:
			return 0
		case n.Default:
			return 1
		}
		return 2
	}
	return cmp.Or(cmp.Compare(key(a), key(b)), cmp.Compare(a.Name, b.Name))
}

func compareQuotaEntities(a, b QuotaEntity) int {
	return cmp.Or(compareQuotaNames(a.User, b.User), compareQuotaNames(a.ClientID, b.ClientID))
}

// AlterClientQuotas proposes an AlterClientQuotas command.
func (s *Store) AlterClientQuotas(ctx context.Context, c AlterClientQuotas) error {
	_, _, err := s.propose(ctx, func(*Image) Command { return c }, false)
	return err
}
