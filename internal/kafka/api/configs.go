package api

import (
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
)

// configResource is a config resource a request names, resolved: a topic, a broker's configs
// (brokerID, or -1 for the cluster-wide default resource, named ""), or a group's.
type configResource struct {
	broker   bool
	brokerID int32
	topic    string
	group    string
}

// resolveConfigResource checks a resource type and name. Topics, brokers and groups have configs; a
// broker resource names a registered broker or is empty, a group resource any non-empty group id.
func (b *Broker) resolveConfigResource(typ kmsg.ConfigResourceType, name string) (configResource, error) {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if name == "" {
			return configResource{}, fmt.Errorf("%w: empty topic name", controller.ErrInvalidTopicName)
		}
		return configResource{topic: name}, nil
	case kmsg.ConfigResourceTypeBroker:
		id, err := controller.ParseBrokerID(name)
		if err != nil {
			return configResource{}, fmt.Errorf("%w: %q is not a registered broker", errUnknownBroker, name)
		}
		if _, ok := b.meta.Image().Broker(id); id >= 0 && id != b.nodeID && !ok {
			return configResource{}, fmt.Errorf("%w: %q is not a registered broker", errUnknownBroker, name)
		}
		return configResource{broker: true, brokerID: id}, nil
	case kmsg.ConfigResourceTypeGroupConfig:
		if name == "" {
			return configResource{}, fmt.Errorf("%w: empty group id", errInvalidRequest)
		}
		return configResource{group: name}, nil
	case kmsg.ConfigResourceTypeBrokerLogger:
		return configResource{}, fmt.Errorf("%w: BROKER_LOGGER: weir has no per-logger log levels to describe or alter", errInvalidRequest)
	default:
		return configResource{}, fmt.Errorf("%w: config resource type %v", errInvalidRequest, typ)
	}
}

// resourceKey identifies a resource for duplicate detection within one request.
func resourceKey(typ kmsg.ConfigResourceType, name string) string {
	return strconv.Itoa(int(typ)) + "/" + name
}

// alterResources runs apply on each resource of an AlterConfigs or IncrementalAlterConfigs request
// and returns each one's error, in request order. A resource the request names more than once is
// refused, every time it is named, with INVALID_REQUEST and never applied. If any resource was
// changed (not only validated), the local replicas are reconciled once, after all of them.
func (b *Broker) alterResources(n int, name func(i int) (kmsg.ConfigResourceType, string), validateOnly bool, apply func(i int) error) []error {
	seen := make(map[string]int, n)
	for i := range n {
		seen[resourceKey(name(i))]++
	}
	errs := make([]error, n)
	changed := false
	for i := range n {
		typ, rname := name(i)
		if seen[resourceKey(typ, rname)] > 1 {
			errs[i] = fmt.Errorf("%w: %v %q", errDuplicateResource, typ, rname)
		} else {
			errs[i] = apply(i)
		}
		changed = changed || errs[i] == nil && !validateOnly
	}
	if changed {
		b.reconcile()
	}
	return errs
}

// configSource maps where a value comes from to Kafka's ConfigSource.
func configSource(s controller.ConfigSource) kmsg.ConfigSource {
	switch s {
	case controller.SourceTopic:
		return kmsg.ConfigSourceDynamicTopicConfig
	case controller.SourceDynamicBroker:
		return kmsg.ConfigSourceDynamicBrokerConfig
	case controller.SourceDynamicBrokerDefault:
		return kmsg.ConfigSourceDynamicDefaultBrokerConfig
	case controller.SourceStaticBroker:
		return kmsg.ConfigSourceStaticBrokerConfig
	case controller.SourceDefault:
		return kmsg.ConfigSourceDefaultConfig
	case controller.SourceGroup:
		return kmsg.ConfigSourceGroupConfig
	default:
		return kmsg.ConfigSourceUnknown
	}
}

// configType maps a config's type to Kafka's ConfigType.
func configType(t controller.ConfigType) kmsg.ConfigType {
	switch t {
	case controller.ConfigTypeString:
		return kmsg.ConfigTypeString
	case controller.ConfigTypeInt:
		return kmsg.ConfigTypeInt
	case controller.ConfigTypeLong:
		return kmsg.ConfigTypeLong
	case controller.ConfigTypeBoolean:
		return kmsg.ConfigTypeBoolean
	case controller.ConfigTypeList:
		return kmsg.ConfigTypeList
	case controller.ConfigTypeDouble:
		return kmsg.ConfigTypeDouble
	default:
		return kmsg.ConfigTypeUnknown
	}
}

// configMap turns a request's name/value pairs into a map, refusing a name given twice.
func configMap[T any](cs []T, get func(*T) (string, *string)) (map[string]string, error) {
	m := make(map[string]string, len(cs))
	for i := range cs {
		name, v := get(&cs[i])
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("%w: config %q", errDuplicateResource, name)
		}
		if v == nil {
			return nil, fmt.Errorf("%w: config %q has a null value", controller.ErrInvalidConfig, name)
		}
		m[name] = *v
	}
	return m, nil
}
