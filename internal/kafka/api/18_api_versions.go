package api

import (
	"regexp"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/txn"
)

// softwareNameRe is what Kafka accepts for ApiVersions v3+ ClientSoftwareName and ClientSoftwareVersion.
var softwareNameRe = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

// transactionVersionFeature is the feature that tells clients which transaction protocol to use
// (KIP-890): a client uses TV2 once the broker finalizes it at 2 or more.
const transactionVersionFeature = "transaction.version"

// apiVersions answers ApiVersions (key 18) with the version table under transaction version tv.
// Throttle is always 0. From v3 the answer carries the features (KIP-584): transaction.version is
// finalized at tv when tv is 2 (at min = max = level, as Kafka does; level 1 changes nothing for a
// client and is left out like Kafka's 0), under featuresEpoch, which must be at least 0 and grow when
// the features change, or the Java client ignores them. The supported range 0-2 goes only to v4+:
// a client before v4 may refuse a range that starts at 0 (KAFKA-17492).
func apiVersions(req *kmsg.ApiVersionsRequest, tv int16, featuresEpoch int64) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if req.Version >= 3 && (!softwareNameRe.MatchString(req.ClientSoftwareName) || !softwareNameRe.MatchString(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	resp.ApiKeys = advertisedKeys(tv)
	if req.Version < 3 {
		return resp
	}
	resp.FinalizedFeaturesEpoch = featuresEpoch
	if tv >= txn.TV2 {
		f := kmsg.NewApiVersionsResponseFinalizedFeature()
		f.Name, f.MinVersionLevel, f.MaxVersionLevel = transactionVersionFeature, tv, tv
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, f)
	}
	if req.Version >= 4 {
		f := kmsg.NewApiVersionsResponseSupportedFeature()
		f.Name, f.MinVersion, f.MaxVersion = transactionVersionFeature, 0, txn.TV2
		resp.SupportedFeatures = append(resp.SupportedFeatures, f)
	}
	return resp
}

// groupVersionFeature tells clients that the coordinator serves KIP-848 consumer groups: a client uses
// ConsumerGroupHeartbeat once the broker finalizes it at 1 or more.
const groupVersionFeature = "group.version"

// withGroupVersion adds group.version to an ApiVersions answer of a broker with a group coordinator.
func (b *Broker) withGroupVersion(resp kmsg.Response) kmsg.Response {
	return withFeatureAtOne(resp, groupVersionFeature, b.groups != nil)
}

// withFeatureAtOne adds the feature name to an ApiVersions answer when on: finalized at 1 from v3 and
// supported 0-1 from v4, as transaction.version is.
func withFeatureAtOne(resp kmsg.Response, name string, on bool) kmsg.Response {
	r, ok := resp.(*kmsg.ApiVersionsResponse)
	if !ok || !on || r.ErrorCode != 0 || r.Version < 3 {
		return resp
	}
	f := kmsg.NewApiVersionsResponseFinalizedFeature()
	f.Name, f.MinVersionLevel, f.MaxVersionLevel = name, 1, 1
	r.FinalizedFeatures = append(r.FinalizedFeatures, f)
	if r.Version >= 4 {
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = name, 0, 1
		r.SupportedFeatures = append(r.SupportedFeatures, sf)
	}
	return resp
}

// unsupportedAPIVersions is the reply to an ApiVersions request at a version weir does not serve
// (KIP-511): a version 0 response with UNSUPPORTED_VERSION listing only ApiVersions' own range, so
// the client retries at a version it finds there.
func unsupportedAPIVersions() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	r := versions[apiVersionsKey]
	k := kmsg.NewApiVersionsResponseApiKey()
	k.ApiKey, k.MinVersion, k.MaxVersion = apiVersionsKey, r.min, r.max
	resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{k}
	return resp
}
