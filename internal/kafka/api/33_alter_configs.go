package api

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
)

// alterConfigs answers AlterConfigs (key 33): each resource's configs become exactly the ones given;
// every key set before and not given returns to its default.
func (b *Broker) alterConfigs(ctx context.Context, req *kmsg.AlterConfigsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	errs := b.alterResources(len(req.Resources), func(i int) (kmsg.ConfigResourceType, string) {
		return req.Resources[i].ResourceType, req.Resources[i].ResourceName
	}, req.ValidateOnly, func(i int) error {
		return b.replaceConfigs(ctx, req.Resources[i], req.ValidateOnly)
	})
	for i, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		if errs[i] != nil {
			sr.ErrorCode, sr.ErrorMessage = errorCode(errs[i]), errorMessage(errs[i])
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp
}

// replaceConfigs sets one resource's configs to those of rr.
func (b *Broker) replaceConfigs(ctx context.Context, rr kmsg.AlterConfigsRequestResource, validateOnly bool) error {
	res, err := b.resolveConfigResource(rr.ResourceType, rr.ResourceName)
	if err != nil {
		return err
	}
	if res.group != "" {
		return fmt.Errorf("%w: AlterConfigs takes no GROUP resource (Kafka's rule): use IncrementalAlterConfigs", errInvalidRequest)
	}
	set, err := configMap(rr.Configs, func(c *kmsg.AlterConfigsRequestResourceConfig) (string, *string) {
		return c.Name, c.Value
	})
	if err != nil {
		return err
	}
	img := b.meta.Image()
	cur := img.BrokerConfigs
	if res.broker && res.brokerID >= 0 {
		cur = img.PerBrokerConfigs[res.brokerID]
	}
	if res.broker {
		if err := controller.CheckBrokerConfigChange(slices.Collect(maps.Keys(set)), res.brokerID >= 0); err != nil {
			return err
		}
	}
	if !res.broker {
		t, ok := img.Topic(res.topic)
		if !ok {
			return fmt.Errorf("%w: %q", errUnknownTopicOrPartition, res.topic)
		}
		cur = t.Configs
	}
	var remove []string
	for k := range cur {
		if _, ok := set[k]; !ok {
			remove = append(remove, k)
		}
	}
	if res.broker && res.brokerID >= 0 {
		return b.meta.EditPerBrokerConfigs(ctx, res.brokerID, set, remove, controller.ListEdits{}, validateOnly)
	}
	if res.broker {
		return b.meta.AlterBrokerConfigs(ctx, set, remove, validateOnly)
	}
	return b.meta.AlterConfigs(ctx, res.topic, set, remove, validateOnly)
}
