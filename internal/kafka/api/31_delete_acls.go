package api

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/acl"
)

// deleteAcls answers DeleteAcls (key 31): each valid filter selects bindings from the image, the
// union of them goes to the controller in one command, and each filter's result lists what it
// selected; an invalid filter gets INVALID_REQUEST. A binding created after the image was read is not
// deleted by this request. The authorizing layer has checked ALTER on the cluster; a node without an
// authorizer answers SECURITY_DISABLED.
func (b *Broker) deleteAcls(ctx context.Context, req *kmsg.DeleteACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	img := b.meta.Image()
	var doomed []acl.Binding
	var at []int
	for i, rf := range req.Filters {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
		f := acl.Filter{
			ResourceType: acl.ResourceType(rf.ResourceType), ResourceName: rf.ResourceName,
			PatternType: acl.PatternType(rf.ResourcePatternType), Principal: rf.Principal, Host: rf.Host,
			Operation: acl.Operation(rf.Operation), Permission: acl.Permission(rf.PermissionType),
		}
		err := f.Validate()
		if b.authz == nil {
			err = errSecurityDisabled
		}
		if err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = errorCode(err), errorMessage(err)
			continue
		}
		at = append(at, i)
		for _, bd := range acl.Select(img.ACLs, f) {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = kmsg.ACLResourceType(bd.ResourceType), bd.ResourceName, kmsg.ACLResourcePatternType(bd.PatternType)
			m.Principal, m.Host = bd.Principal, bd.Host
			m.Operation, m.PermissionType = kmsg.ACLOperation(bd.Operation), kmsg.ACLPermissionType(bd.Permission)
			resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, m)
			if !slices.Contains(doomed, bd) {
				doomed = append(doomed, bd)
			}
		}
	}
	if len(doomed) == 0 {
		return resp
	}
	if err := b.meta.DeleteAcls(ctx, doomed); err != nil {
		for _, i := range at {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = b.errorCode(err), errorMessage(err)
			resp.Results[i].MatchingACLs = nil
		}
	}
	return resp
}
