package api

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/acl"
)

// describeAcls answers DescribeAcls (key 29): the image's bindings that the request's filter
// matches, grouped by resource pattern in the order the bindings were created. The authorizing
// layer has checked DESCRIBE on the cluster; a node without an authorizer answers
// SECURITY_DISABLED, as Kafka does.
func (b *Broker) describeAcls(req *kmsg.DescribeACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if b.authz == nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(errSecurityDisabled), errorMessage(errSecurityDisabled)
		return resp
	}
	f := acl.Filter{
		ResourceType: acl.ResourceType(req.ResourceType), ResourceName: req.ResourceName,
		PatternType: acl.PatternType(req.ResourcePatternType), Principal: req.Principal, Host: req.Host,
		Operation: acl.Operation(req.Operation), Permission: acl.Permission(req.PermissionType),
	}
	if err := f.Validate(); err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return resp
	}
	type pattern struct {
		t    acl.ResourceType
		name string
		pt   acl.PatternType
	}
	at := map[pattern]int{}
	for _, bd := range acl.Select(b.meta.Image().ACLs, f) {
		p := pattern{bd.ResourceType, bd.ResourceName, bd.PatternType}
		i, ok := at[p]
		if !ok {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = kmsg.ACLResourceType(p.t), p.name, kmsg.ACLResourcePatternType(p.pt)
			i = len(resp.Resources)
			at[p] = i
			resp.Resources = append(resp.Resources, r)
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = bd.Principal, bd.Host, kmsg.ACLOperation(bd.Operation), kmsg.ACLPermissionType(bd.Permission)
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, a)
	}
	return resp
}
