package api

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
)

// describeConfigs answers DescribeConfigs (key 32) for topics, brokers and groups: a broker named by its
// id gets every broker config as it resolves it (its read-only ones only when it is this node, which
// alone knows its command line), the empty name the cluster-wide values set at run time, as Kafka
// answers; a group its group configs, set or default.
func (b *Broker) describeConfigs(req *kmsg.DescribeConfigsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	img := b.meta.Image()
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		entries, err := b.configEntries(img, rr.ResourceType, rr.ResourceName)
		if err != nil {
			sr.ErrorCode, sr.ErrorMessage = errorCode(err), errorMessage(err)
			resp.Resources = append(resp.Resources, sr)
			continue
		}
		want := make(map[string]bool, len(rr.ConfigNames))
		for _, n := range rr.ConfigNames {
			want[n] = true
		}
		for _, e := range entries {
			if rr.ConfigNames != nil && !want[e.Name] {
				continue
			}
			sr.Configs = append(sr.Configs, describedConfig(e, req.IncludeSynonyms, req.IncludeDocumentation))
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp
}

// configEntries lists every config of one resource.
func (b *Broker) configEntries(img *controller.Image, typ kmsg.ConfigResourceType, name string) ([]controller.ConfigEntry, error) {
	res, err := b.resolveConfigResource(typ, name)
	if err != nil {
		return nil, err
	}
	switch {
	case res.group != "":
		return img.DescribeGroupConfigs(res.group), nil
	case res.broker && res.brokerID < 0:
		return img.DescribeBrokerDefaultConfigs(), nil
	case res.broker && res.brokerID == b.nodeID:
		return img.DescribeBrokerConfigsOf(res.brokerID, b.staticConfigs), nil
	case res.broker:
		return img.DescribeBrokerConfigsOf(res.brokerID, nil), nil
	}
	return img.DescribeTopicConfigsOn(res.topic, b.nodeID)
}

// describedConfig encodes one config entry; v0 readers see only IsDefault, later ones Source.
func describedConfig(e controller.ConfigEntry, synonyms, docs bool) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = e.Name
	v := e.Value
	c.Value = &v
	c.ReadOnly = e.ReadOnly
	c.IsSensitive = e.Sensitive
	c.Source = configSource(e.Source)
	c.IsDefault = e.Source == controller.SourceDefault
	c.ConfigType = configType(e.Type)
	if docs {
		d := e.Doc
		c.Documentation = &d
	}
	if synonyms {
		for _, s := range e.Synonyms {
			cs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			cs.Name = s.Name
			sv := s.Value
			cs.Value = &sv
			cs.Source = configSource(s.Source)
			c.ConfigSynonyms = append(c.ConfigSynonyms, cs)
		}
	}
	return c
}
