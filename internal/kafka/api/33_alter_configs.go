package api

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// alterConfigs answers AlterConfigs (key 33): each resource's configs become exactly the ones given;
// every key set before and not given returns to its default.
func (b *Broker) alterConfigs(ctx context.Context, req *kmsg.AlterConfigsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	seen := make(map[string]int, len(req.Resources))
	for _, rr := range req.Resources {
		seen[resourceKey(rr.ResourceType, rr.ResourceName)]++
	}
	changed := false
	for _, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		var err error
		if seen[resourceKey(rr.ResourceType, rr.ResourceName)] > 1 {
			err = fmt.Errorf("%w: %v %q", errDuplicateResource, rr.ResourceType, rr.ResourceName)
		} else {
			err = b.replaceConfigs(ctx, rr, req.ValidateOnly)
		}
		if err != nil {
			sr.ErrorCode, sr.ErrorMessage = errorCode(err), errorMessage(err)
		} else {
			changed = changed || !req.ValidateOnly
		}
		resp.Resources = append(resp.Resources, sr)
	}
	if changed {
		b.reconcile()
	}
	return resp
}

// replaceConfigs sets one resource's configs to those of rr.
func (b *Broker) replaceConfigs(ctx context.Context, rr kmsg.AlterConfigsRequestResource, validateOnly bool) error {
	res, err := b.resolveConfigResource(rr.ResourceType, rr.ResourceName)
	if err != nil {
		return err
	}
	set, err := configMap(rr.Configs, func(c *kmsg.AlterConfigsRequestResourceConfig) (string, *string) {
		return c.Name, c.Value
	})
	if err != nil {
		return err
	}
	img := b.meta.Image()
	cur := img.BrokerConfigs
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
	if res.broker {
		return b.meta.AlterBrokerConfigs(ctx, set, remove, validateOnly)
	}
	return b.meta.AlterConfigs(ctx, res.topic, set, remove, validateOnly)
}
