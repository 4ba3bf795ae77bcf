package api

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/kafka/wire"
)

// listGroups answers ListGroups (key 16): every group this node coordinates, share groups included,
// filtered by state (v4+) and by type (v5+), both case-insensitive, as Kafka compares them.
func (b *Broker) listGroups(req *kmsg.ListGroupsRequest) wire.Reply {
	return func(ctx context.Context) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
		all, err := b.groups.List(ctx)
		if err != nil {
			resp.ErrorCode = b.errorCode(err)
			return resp
		}
		for _, l := range all {
			if len(req.StatesFilter) > 0 && !containsFold(req.StatesFilter, l.StateName) ||
				len(req.TypesFilter) > 0 && !containsFold(req.TypesFilter, l.Type) {
				continue
			}
			rg := kmsg.NewListGroupsResponseGroup()
			rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = l.Group, l.ProtocolType, l.StateName, l.Type
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	}
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
