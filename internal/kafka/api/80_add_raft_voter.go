package api

import (
	"context"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// addRaftVoter answers AddRaftVoter (key 80) by making the node a controller voter at its listener's
// address (the first listener given; weir nodes have one controller address), through the leader
// (controller.Store.AddVoter), and answers once the change is committed. A cluster id other than this
// cluster's gets INCONSISTENT_CLUSTER_ID; no listener, or a node that is not a live broker, gets
// INVALID_REQUEST; a node already a voter DUPLICATE_VOTER; a change after which the live voters would
// be no majority INVALID_REQUEST. The voter directory id is ignored: a weir node has one log.
func (b *Broker) addRaftVoter(ctx context.Context, req *kmsg.AddRaftVoterRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AddRaftVoterResponse)
	if req.ClusterID != nil && *req.ClusterID != b.meta.Image().ClusterID {
		resp.ErrorCode = kerr.InconsistentClusterID.Code
		return resp
	}
	if len(req.Listeners) == 0 {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("no listener: the voter's controller address is needed")
		return resp
	}
	l := req.Listeners[0]
	addr := net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port)))
	if err := b.meta.AddVoter(ctx, req.VoterID, addr); err != nil {
		resp.ErrorCode, resp.ErrorMessage = b.errorCode(err), errorMessage(err)
	}
	return resp
}
