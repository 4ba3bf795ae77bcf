package api

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
)

// Kafka's quota entity types (KIP-546). weir has no quotas by IP address.
const (
	quotaEntityUser     = "user"
	quotaEntityClientID = "client-id"
)

// quotaFilter is one checked component of a DescribeClientQuotas filter.
type quotaFilter struct {
	user  bool
	match kmsg.QuotasMatchType
	name  string
}

// describeClientQuotas answers DescribeClientQuotas (key 48): the entities of the image that match
// every component of the filter (an exact name, the default entity, or any), and, when strict, have
// no other component. A filter naming an entity type twice or one weir does not know, an unknown
// match type or an exact match without a name answers INVALID_REQUEST for the whole request.
func (b *Broker) describeClientQuotas(req *kmsg.DescribeClientQuotasRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	filters, err := quotaFilters(req.Components)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return resp
	}
	for _, q := range b.meta.Image().ClientQuotas {
		if !quotaMatches(q.Entity, filters, req.Strict) {
			continue
		}
		e := kmsg.NewDescribeClientQuotasResponseEntry()
		e.Entity = quotaEntityKmsg(q.Entity)
		for _, k := range []string{controller.QuotaConsumerByteRate, controller.QuotaProducerByteRate, controller.QuotaRequestPercentage} {
			if v, ok := q.Values[k]; ok {
				val := kmsg.NewDescribeClientQuotasResponseEntryValue()
				val.Key, val.Value = k, v
				e.Values = append(e.Values, val)
			}
		}
		resp.Entries = append(resp.Entries, e)
	}
	return resp
}

func quotaFilters(components []kmsg.DescribeClientQuotasRequestComponent) ([]quotaFilter, error) {
	var out []quotaFilter
	seen := map[string]bool{}
	for _, c := range components {
		if seen[c.EntityType] {
			return nil, fmt.Errorf("%w: entity type %s appears more than once in the filter", errInvalidRequest, c.EntityType)
		}
		seen[c.EntityType] = true
		if c.EntityType != quotaEntityUser && c.EntityType != quotaEntityClientID {
			return nil, fmt.Errorf("%w: unsupported quota entity type %q", errInvalidRequest, c.EntityType)
		}
		f := quotaFilter{user: c.EntityType == quotaEntityUser, match: c.MatchType}
		switch c.MatchType {
		case kmsg.QuotasMatchTypeExact:
			if c.Match == nil {
				return nil, fmt.Errorf("%w: exact match of %s without a name", errInvalidRequest, c.EntityType)
			}
			f.name = *c.Match
		case kmsg.QuotasMatchTypeDefault, kmsg.QuotasMatchTypeAny:
		default:
			return nil, fmt.Errorf("%w: unknown match type %d", errInvalidRequest, c.MatchType)
		}
		out = append(out, f)
	}
	return out, nil
}

// quotaMatches reports whether e passes every filter and, with strict, has no other component.
func quotaMatches(e controller.QuotaEntity, filters []quotaFilter, strict bool) bool {
	userFiltered, clientFiltered := false, false
	for _, f := range filters {
		n := e.ClientID
		if f.user {
			n, userFiltered = e.User, true
		} else {
			clientFiltered = true
		}
		switch {
		case !n.Set:
			return false
		case f.match == kmsg.QuotasMatchTypeExact && (n.Default || n.Name != f.name):
			return false
		case f.match == kmsg.QuotasMatchTypeDefault && !n.Default:
			return false
		}
	}
	return !strict || (e.User.Set == userFiltered && e.ClientID.Set == clientFiltered)
}

// quotaEntityKmsg is e as the responses carry it: user first, a nil name for the default.
func quotaEntityKmsg(e controller.QuotaEntity) []kmsg.DescribeClientQuotasResponseEntryEntity {
	var out []kmsg.DescribeClientQuotasResponseEntryEntity
	add := func(typ string, n controller.QuotaName) {
		if !n.Set {
			return
		}
		c := kmsg.NewDescribeClientQuotasResponseEntryEntity()
		c.Type = typ
		if !n.Default {
			c.Name = &n.Name
		}
		out = append(out, c)
	}
	add(quotaEntityUser, e.User)
	add(quotaEntityClientID, e.ClientID)
	return out
}
