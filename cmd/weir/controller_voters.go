package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// errQuorumChange is returned when the cluster refuses a voter change or the quorum cannot be
// described.
var errQuorumChange = errors.New("controller quorum")

func newClusterControllerCmd(g *globalOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Show and change the controller quorum's voters",
		Long: "The controller quorum starts with the voters --controller-voters names; these commands change it\n" +
			"at run time through Kafka's DescribeQuorum, AddRaftVoter and RemoveRaftVoter, which any node\n" +
			"forwards to the controller leader (docs/controller.md, \"Changing the voters\").",
	}
	cmd.AddCommand(g.addClientFlags(newControllerDescribeCmd(g)))
	cmd.AddCommand(g.addClientFlags(newControllerAddVoterCmd(g)))
	cmd.AddCommand(g.addClientFlags(newControllerRemoveVoterCmd(g)))
	return cmd
}

// withClient runs fn with a client of the seed brokers.
func withClient(cmd *cobra.Command, g *globalOpts, fn func(context.Context, *kgo.Client) error) error {
	if err := g.resolve(cmd); err != nil {
		return err
	}
	ctx := cmd.Context()
	cl, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	return fn(ctx, cl)
}

func newControllerDescribeCmd(g *globalOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "describe",
		Short: "Show the controller leader, the voters and the observers (DescribeQuorum)",
		Long: "Prints the controller leader and its Raft term, the leader's applied index (the high watermark),\n" +
			"and each voter and observer (a broker that is not a voter) with its controller address, the index\n" +
			"it last reported applied, and when the leader last heard from it.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(cmd, g, func(ctx context.Context, cl *kgo.Client) error {
				return describeQuorum(ctx, g, cl, cmd.OutOrStdout())
			})
		},
	}
}

func describeQuorum(ctx context.Context, g *globalOpts, cl *kgo.Client, out io.Writer) error {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	resp, err := call(ctx, g, "describe quorum", func(ctx context.Context) (*kmsg.DescribeQuorumResponse, error) {
		return req.RequestWith(ctx, cl)
	})
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("%w: %w", errQuorumChange, withMessage(err, strOr(resp.ErrorMessage)))
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("%w: the answer names no metadata partition", errQuorumChange)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return fmt.Errorf("%w: %w", errQuorumChange, withMessage(err, strOr(p.ErrorMessage)))
	}
	addrs := map[int32]string{}
	for _, n := range resp.Nodes {
		for _, l := range n.Listeners {
			addrs[n.NodeID] = net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port)))
		}
	}
	fmt.Fprintf(out, "leader %d, term %d, high watermark %d\n", p.LeaderID, p.LeaderEpoch, p.HighWatermark)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tROLE\tADDRESS\tAPPLIED\tLAST CONTACT")
	row := func(role string, r kmsg.DescribeQuorumResponseTopicPartitionReplicaState) {
		if r.ReplicaID == p.LeaderID {
			role = "leader"
		}
		contact := "-"
		if r.LastFetchTimestamp >= 0 {
			contact = time.UnixMilli(r.LastFetchTimestamp).UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\n", r.ReplicaID, role, addrs[r.ReplicaID], r.LogEndOffset, contact)
	}
	for _, r := range p.CurrentVoters {
		row("voter", r)
	}
	for _, r := range p.Observers {
		row("observer", r)
	}
	return tw.Flush()
}

func strOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// parseVoter reads ID@HOST:PORT, a node id and its controller address.
func parseVoter(s string) (int32, string, uint16, error) {
	idText, addr, ok := strings.Cut(s, "@")
	id, err := strconv.ParseInt(idText, 10, 32)
	if !ok || err != nil || id < 0 {
		return 0, "", 0, fmt.Errorf("%w: %q is not ID@HOST:PORT", errUsage, s)
	}
	host, portText, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return 0, "", 0, fmt.Errorf("%w: %q is not ID@HOST:PORT", errUsage, s)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil || port == 0 {
		return 0, "", 0, fmt.Errorf("%w: %q: port %q", errUsage, s, portText)
	}
	return int32(id), host, uint16(port), nil
}

func newControllerAddVoterCmd(g *globalOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "add-voter ID@HOST:PORT",
		Short: "Make a running broker a controller voter (AddRaftVoter)",
		Long: "Makes node ID, a live broker whose controller address (--controller-addr) is HOST:PORT, a voter of\n" +
			"the controller quorum, once the change is committed. Refused: a node that is already a voter, one\n" +
			"that is not a live broker or is at another address, and a change after which the live voters\n" +
			"would not be a majority. The node's --controller-voters stays what it was: it is the initial set.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, host, port, err := parseVoter(args[0])
			if err != nil {
				return err
			}
			return withClient(cmd, g, func(ctx context.Context, cl *kgo.Client) error {
				req := kmsg.NewPtrAddRaftVoterRequest()
				req.VoterID = id
				req.TimeoutMillis = int32(g.timeout.Milliseconds())
				l := kmsg.NewAddRaftVoterRequestListener()
				l.Name, l.Host, l.Port = "CONTROLLER", host, port
				req.Listeners = append(req.Listeners, l)
				resp, err := call(ctx, g, "add voter", func(ctx context.Context) (*kmsg.AddRaftVoterResponse, error) {
					return req.RequestWith(ctx, cl)
				})
				if err != nil {
					return err
				}
				if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
					return fmt.Errorf("%w: add voter %d: %w", errQuorumChange, id, withMessage(err, strOr(resp.ErrorMessage)))
				}
				fmt.Fprintf(cmd.OutOrStdout(), "node %d is a controller voter\n", id)
				return nil
			})
		},
	}
}

func newControllerRemoveVoterCmd(g *globalOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "remove-voter ID",
		Short: "Take a node out of the controller voters (RemoveRaftVoter)",
		Long: "Removes node ID from the controller quorum's voters, once the change is committed: a live broker\n" +
			"stays a non-voter (it keeps applying the metadata log), any other node leaves the quorum.\n" +
			"Refused: a node that is not a voter, the last voter, and a change after which the live voters\n" +
			"would not be a majority of the voters left.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 32)
			if err != nil || id < 0 {
				return fmt.Errorf("%w: ID %q is not a node id", errUsage, args[0])
			}
			return withClient(cmd, g, func(ctx context.Context, cl *kgo.Client) error {
				req := kmsg.NewPtrRemoveRaftVoterRequest()
				req.VoterID = int32(id)
				resp, err := call(ctx, g, "remove voter", func(ctx context.Context) (*kmsg.RemoveRaftVoterResponse, error) {
					return req.RequestWith(ctx, cl)
				})
				if err != nil {
					return err
				}
				if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
					return fmt.Errorf("%w: remove voter %d: %w", errQuorumChange, id, withMessage(err, strOr(resp.ErrorMessage)))
				}
				fmt.Fprintf(cmd.OutOrStdout(), "node %d is no longer a controller voter\n", id)
				return nil
			})
		},
	}
}
