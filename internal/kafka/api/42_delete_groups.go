package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/kafka/wire"
)

// deleteGroups answers DeleteGroups (key 42): each Empty group is deleted with its offsets
// (tombstones, answered once durable), a share group with the state of its share-partitions; a group
// with members gets NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND.
func (b *Broker) deleteGroups(req *kmsg.DeleteGroupsRequest) wire.Reply {
	return func(ctx context.Context) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
		for _, id := range req.Groups {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group = id
			rg.ErrorCode = b.errorCode(b.deleteGroup(ctx, id))
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	}
}

// deleteGroup deletes one group: a share group this node knows (deleteShareGroup), else a classic or
// consumer-protocol group.
func (b *Broker) deleteGroup(ctx context.Context, id string) error {
	if shared, err := b.deleteShareGroup(ctx, id); shared {
		return err
	}
	return b.groups.Delete(ctx, id)
}
