package api

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
)

// incrementalAlterConfigs answers IncrementalAlterConfigs (key 44): SET and DELETE per key, and APPEND
// and SUBTRACT for list configs (cleanup.policy and the replication-throttle lists), which add items
// to or remove them from the current value (the resource's own, else the default) in one metadata
// command. APPEND or SUBTRACT of a config that is not a list is INVALID_CONFIG; a group has no list
// configs.
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
	var edits controller.ListEdits
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
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if c.Value == nil {
				return fmt.Errorf("%w: %v %q with null", errInvalidConfigOp, c.Op, c.Name)
			}
			items := strings.Split(*c.Value, ",")
			if c.Op == kmsg.IncrementalAlterConfigOpAppend {
				edits.Append = addEdit(edits.Append, c.Name, items)
			} else {
				edits.Subtract = addEdit(edits.Subtract, c.Name, items)
			}
		default:
			return fmt.Errorf("%w: %v on %q", errInvalidConfigOp, c.Op, c.Name)
		}
	}
	if res.group != "" {
		if len(edits.Append) > 0 || len(edits.Subtract) > 0 {
			return fmt.Errorf("%w: group configs are not lists: APPEND and SUBTRACT take only lists", controller.ErrInvalidConfig)
		}
		if err := b.checkDeadLetterPrefix(b.meta.Image(), res.group, set); err != nil {
			return err
		}
		return b.meta.EditGroupConfigs(ctx, res.group, set, remove, validateOnly)
	}
	if res.broker {
		if err := controller.CheckBrokerConfigChange(slices.Collect(maps.Keys(named)), res.brokerID >= 0); err != nil {
			return err
		}
		if res.brokerID >= 0 {
			return b.meta.EditPerBrokerConfigs(ctx, res.brokerID, set, remove, edits, validateOnly)
		}
		return b.meta.EditBrokerConfigs(ctx, set, remove, edits, validateOnly)
	}
	return b.meta.EditConfigs(ctx, res.topic, set, remove, edits, validateOnly)
}

// addEdit records a list edit of key in m, making m when nil.
func addEdit(m map[string][]string, key string, items []string) map[string][]string {
	if m == nil {
		m = map[string][]string{}
	}
	m[key] = items
	return m
}
