package httpapi

import (
	"net/http"
	"strings"

	"github.com/weir-mq/weir/internal/acl"
)

// Authorizer decides whether the principal behind r may do op on the resource of type t named name,
// as the Kafka listener decides for that principal (docs/security.md). The node sets it when its
// HTTP listener authenticates; the API asks it before every action and answers 403 when it says no.
type Authorizer func(r *http.Request, op acl.Operation, t acl.ResourceType, name string) bool

// need is one permission a route asks before it acts: op on a resource of type t whose name is the
// request's path value from, or its query parameter when from starts with '?' (not asked when the
// parameter is absent), or the cluster when t is acl.ResourceCluster.
type need struct {
	op   acl.Operation
	t    acl.ResourceType
	from string
}

// authorize asks every need of a route for r; the first refused is the request's 403, with Kafka's
// error name for the resource type.
func (a *API) authorize(r *http.Request, needs []need) error {
	if a.opts.Authorize == nil {
		return nil
	}
	for _, n := range needs {
		name := acl.ClusterName
		switch {
		case n.t == acl.ResourceCluster:
		case strings.HasPrefix(n.from, "?"):
			if name = r.URL.Query().Get(n.from[1:]); name == "" {
				continue
			}
		default:
			name = r.PathValue(n.from)
		}
		if !a.opts.Authorize(r, n.op, n.t, name) {
			kafka := map[acl.ResourceType]string{
				acl.ResourceTopic: "TOPIC_AUTHORIZATION_FAILED", acl.ResourceGroup: "GROUP_AUTHORIZATION_FAILED",
				acl.ResourceCluster: "CLUSTER_AUTHORIZATION_FAILED",
			}[n.t]
			return kafkaErrorf(http.StatusForbidden, "forbidden", kafka, "%s on %s %q is not allowed to this user",
				n.op, strings.ToLower(n.t.String()), name)
		}
	}
	return nil
}

// visible reports whether the request may see a resource in a listing: DESCRIBE on it, as Kafka's
// Metadata and ListGroups leave out what the principal may not describe.
func (a *API) visible(r *http.Request, t acl.ResourceType, name string) bool {
	return a.opts.Authorize == nil || a.opts.Authorize(r, acl.OpDescribe, t, name)
}
