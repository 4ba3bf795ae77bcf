package api

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// incrementalAlterConfigs answers IncrementalAlterConfigs (key 44): SET and DELETE per key. APPEND
// and SUBTRACT are refused with INVALID_CONFIG: list configs (cleanup.policy and the
// replication-throttle lists) are set whole.
func (b *Broker) incrementalAlterConfigs(ctx context.Context, req *kmsg.IncrementalAlterConfigsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	errs := b.alterResources(len(req.Resources), func(i int) (kmsg.ConfigResourceType, string) {
		return req.Resources[i].ResourceType, req.Resources[i].ResourceName
	}, req.ValidateOnly, func(i int) error {
		return b.applyConfigOps(ctx, req.Resources[i], req.ValidateOnly)
	})
	for i, rr := range req.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		if errs[i] != nil {
			sr.ErrorCode, sr.ErrorMessage = errorCode(errs[i]), errorMessage(errs[i])
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp
}

// applyConfigOps applies one resource's operations.
func (b *Broker) applyConfigOps(ctx context.Context, rr kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) error {
	res, err := b.resolveConfigResource(rr.ResourceType, rr.ResourceName)
	if err != nil {
		return err
	}
	set := map[string]string{}
	var remove []string
	named := make(map[string]bool, len(rr.Configs))
	for _, c := range rr.Configs {
		if named[c.Name] {
			return fmt.Errorf("%w: config %q", errDuplicateResource, c.Name)
		}
		named[c.Name] = true
		switch c.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if c.Value == nil {
				return fmt.Errorf("%w: SET %q to null", errInvalidConfigOp, c.Name)
			}
			set[c.Name] = *c.Value
		case kmsg.IncrementalAlterConfigOpDelete:
			remove = append(remove, c.Name)
		default:
			return fmt.Errorf("%w: %v on %q", errInvalidConfigOp, c.Op, c.Name)
		}
	}
	if res.broker {
		return b.meta.AlterBrokerConfigs(ctx, set, remove, validateOnly)
	}
	return b.meta.AlterConfigs(ctx, res.topic, set, remove, validateOnly)
}
