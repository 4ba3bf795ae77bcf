package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// removeRaftVoter answers RemoveRaftVoter (key 81) through the leader (controller.Store.RemoveVoter):
// a live broker stays a non-voter, another node leaves the quorum. A cluster id other than this
// cluster's gets INCONSISTENT_CLUSTER_ID, a node that is not a voter VOTER_NOT_FOUND, the last voter or
// a change after which the live voters would be no majority INVALID_REQUEST.
func (b *Broker) removeRaftVoter(ctx context.Context, req *kmsg.RemoveRaftVoterRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.RemoveRaftVoterResponse)
	if req.ClusterID != nil && *req.ClusterID != b.meta.Image().ClusterID {
		resp.ErrorCode = kerr.InconsistentClusterID.Code
		return resp
	}
	if err := b.meta.RemoveVoter(ctx, req.VoterID); err != nil {
		resp.ErrorCode, resp.ErrorMessage = b.errorCode(err), errorMessage(err)
	}
	return resp
}
