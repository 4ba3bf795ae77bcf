package api

import (
	"context"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
)

// metadataTopic is the name Kafka gives the controller quorum's log: DescribeQuorum asks for its
// partition 0.
const metadataTopic = "__cluster_metadata"

// controllerListener names the controller address in DescribeQuorum's nodes and AddRaftVoter's
// listeners.
const controllerListener = "CONTROLLER"

// describeQuorum answers DescribeQuorum (key 55) from the controller leader's status
// (docs/controller.md, "Changing the voters"): the leader and its Raft term as the epoch, the
// leader's applied Raft index as the high watermark, each voter and observer (Raft non-voter) with
// the index it last reported applied as its log end offset and the last time the leader heard from
// it, and (v2) every node's controller address. A partition other than __cluster_metadata-0 gets
// UNKNOWN_TOPIC_OR_PARTITION.
func (b *Broker) describeQuorum(ctx context.Context, req *kmsg.DescribeQuorumRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	var st controller.Status
	var stErr error
	asked := false
	for _, rt := range req.Topics {
		t := kmsg.NewDescribeQuorumResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewDescribeQuorumResponseTopicPartition()
			p.Partition = rp.Partition
			if rt.Topic != metadataTopic || rp.Partition != 0 {
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
				t.Partitions = append(t.Partitions, p)
				continue
			}
			if !asked {
				st, stErr = b.meta.Status(ctx)
				asked = true
			}
			if stErr != nil {
				p.ErrorCode = b.errorCode(stErr)
				if req.Version >= 2 {
					p.ErrorMessage = errorMessage(stErr)
				}
			} else {
				fillQuorum(&p, st)
				if req.Version >= 2 {
					resp.Nodes = quorumNodes(st)
				}
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// fillQuorum puts the status's leader, voters and observers in p.
func fillQuorum(p *kmsg.DescribeQuorumResponseTopicPartition, st controller.Status) {
	p.LeaderID = st.ControllerID
	p.LeaderEpoch = int32(min(st.Term, uint64(1<<31-1)))
	p.HighWatermark = -1
	for _, n := range st.Nodes {
		if n.NodeID == st.ControllerID {
			p.HighWatermark = int64(min(n.AppliedIndex, uint64(1<<63-1)))
		}
	}
	for _, n := range st.Nodes {
		if n.Addr == "" {
			continue
		}
		r := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		r.ReplicaID = n.NodeID
		r.LogEndOffset = -1
		if !n.LastContact.IsZero() {
			r.LogEndOffset = int64(min(n.AppliedIndex, uint64(1<<63-1)))
			if n.NodeID != st.ControllerID {
				r.LastFetchTimestamp = n.LastContact.UnixMilli()
				if r.LogEndOffset >= p.HighWatermark {
					r.LastCaughtUpTimestamp = r.LastFetchTimestamp
				}
			}
		}
		if n.Voter {
			p.CurrentVoters = append(p.CurrentVoters, r)
		} else {
			p.Observers = append(p.Observers, r)
		}
	}
}

// quorumNodes lists every Raft member with its controller address.
func quorumNodes(st controller.Status) []kmsg.DescribeQuorumResponseNode {
	var nodes []kmsg.DescribeQuorumResponseNode
	for _, n := range st.Nodes {
		host, port, err := net.SplitHostPort(n.Addr)
		if err != nil {
			continue
		}
		pn, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			continue
		}
		qn := kmsg.NewDescribeQuorumResponseNode()
		qn.NodeID = n.NodeID
		l := kmsg.NewDescribeQuorumResponseNodeListener()
		l.Name, l.Host, l.Port = controllerListener, host, uint16(pn)
		qn.Listeners = append(qn.Listeners, l)
		nodes = append(nodes, qn)
	}
	return nodes
}
