package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/acl"
)

// createAcls answers CreateAcls (key 30): the valid creations go to the controller in one command,
// each invalid one gets INVALID_REQUEST, as Kafka does. The authorizing layer has checked ALTER on
// the cluster; a node without an authorizer answers SECURITY_DISABLED.
func (b *Broker) createAcls(ctx context.Context, req *kmsg.CreateACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	var valid []acl.Binding
	var at []int
	for i, c := range req.Creations {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
		bd := acl.Binding{
			ResourceType: acl.ResourceType(c.ResourceType), ResourceName: c.ResourceName,
			PatternType: acl.PatternType(c.ResourcePatternType), Principal: c.Principal, Host: c.Host,
			Operation: acl.Operation(c.Operation), Permission: acl.Permission(c.PermissionType),
		}
		err := bd.Validate()
		if b.authz == nil {
			err = errSecurityDisabled
		}
		if err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = errorCode(err), errorMessage(err)
			continue
		}
		valid, at = append(valid, bd), append(at, i)
	}
	if len(valid) == 0 {
		return resp
	}
	if err := b.meta.CreateAcls(ctx, valid); err != nil {
		for _, i := range at {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = b.errorCode(err), errorMessage(err)
		}
	}
	return resp
}
