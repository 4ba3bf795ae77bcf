package api

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// endpointTypeBrokers is DescribeCluster's EndpointType for broker endpoints (v1+); 2 asks for
// controller endpoints, which weir does not expose to clients.
const endpointTypeBrokers = 1

// describeCluster answers DescribeCluster (key 60) from this node's image: the unfenced brokers at
// their addresses on listener and the controller leader, as Metadata does.
func (b *Broker) describeCluster(req *kmsg.DescribeClusterRequest, listener string) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = req.EndpointType
	if req.Version >= 1 && req.EndpointType != endpointTypeBrokers {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		return resp
	}
	img := b.meta.Image()
	resp.ClusterID = img.ClusterID
	resp.ControllerID = img.ControllerID
	for _, mb := range b.brokers(img, listener) {
		db := kmsg.NewDescribeClusterResponseBroker()
		db.NodeID, db.Host, db.Port, db.Rack = mb.NodeID, mb.Host, mb.Port, mb.Rack
		resp.Brokers = append(resp.Brokers, db)
	}
	return resp
}
