package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/partition"
	"github.com/weir-mq/weir/internal/server"
)

const (
	defaultHTTP = "localhost:8080"
	envHTTP     = "WEIR_HTTP"
	// maxStatusBytes bounds the status body read from a node.
	maxStatusBytes = 64 << 20
)

func newClusterCmd(g *globalOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Inspect the cluster: nodes, controller quorum, partitions needing attention",
	}
	cmd.AddCommand(newClusterStatusCmd(g))
	cmd.AddCommand(g.addClientFlags(newClusterReassignCmd(g)))
	cmd.AddCommand(g.addClientFlags(newClusterDecommissionCmd(g)))
	cmd.AddCommand(g.addClientFlags(newClusterRebalanceCmd(g)))
	cmd.AddCommand(newClusterControllerCmd(g))
	return cmd
}

func newClusterStatusCmd(g *globalOpts) *cobra.Command {
	var (
		httpAddr    string
		asJSON      bool
		allReplicas bool
	)
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the controller leader, every node, the partitions needing attention and the lagging followers",
		Long: "Asks one node's HTTP server (GET /v1/cluster/status); that node asks the controller leader.\n" +
			"Prints the controller leader; every node (voter or not, Raft state, last contact, fenced); the\n" +
			"partitions without a leader and the under-replicated ones; and, for the partitions led by the node\n" +
			"asked, each follower that lags or is out of the ISR. Any node answers; while no controller leader is\n" +
			"known, the node's own view is shown and the command fails.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := g.resolve(cmd); err != nil {
				return err
			}
			if f := cmd.Flags().Lookup("http"); !f.Changed {
				if v, ok := os.LookupEnv(envHTTP); ok {
					httpAddr = v
				}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
			defer cancel()
			st, raw, err := fetchClusterStatus(ctx, httpAddr)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				_, err = out.Write(raw)
			} else {
				err = printClusterStatus(out, st, time.Now(), allReplicas)
			}
			if err != nil {
				return err
			}
			if st.Controller == nil {
				return fmt.Errorf("%w: no controller leader answered: %s", errNoAnswer, st.Error)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&httpAddr, "http", defaultHTTP, "HTTP address (host:port) of any node ("+envHTTP+")")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the node's JSON answer as is")
	cmd.Flags().BoolVar(&allReplicas, "replicas", false, "list every replica the node leads, not only those with a lagging or out-of-sync follower")
	return cmd
}

// fetchClusterStatus asks the node at addr for /v1/cluster/status. A 503 still carries the node's
// own view, which is returned with Controller nil.
func fetchClusterStatus(ctx context.Context, addr string) (server.ClusterStatus, []byte, error) {
	var st server.ClusterStatus
	url := "http://" + addr + "/v1/cluster/status"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return st, nil, fmt.Errorf("%w: --http %q: %w", errUsage, addr, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return st, nil, fmt.Errorf("%w: %s: %w", errNoAnswer, url, err)
		}
		return st, nil, fmt.Errorf("%w: %s: %w", errUnreachable, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxStatusBytes))
	if err != nil {
		return st, nil, fmt.Errorf("%w: %s: %w", errNoAnswer, url, err)
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
		return st, nil, fmt.Errorf("%w: %s answered %s", errNoAnswer, url, resp.Status)
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, nil, fmt.Errorf("%w: %s: undecodable answer: %w", errNoAnswer, url, err)
	}
	return st, raw, nil
}

// printClusterStatus writes the status as a few tables; now dates the last contacts.
func printClusterStatus(w io.Writer, st server.ClusterStatus, now time.Time, allReplicas bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "cluster %s (answered by node %d, metadata version %d)\n", orDash(st.ClusterID), st.Node, st.ImageVersion)
	c := st.Controller
	if c == nil {
		fmt.Fprintf(tw, "controller leader: unknown (%s); node %d's image names %d\n", st.Error, st.Node, st.ImageControllerID)
	} else if c.ControllerID == controller.NoLeader {
		fmt.Fprintln(tw, "controller leader: none")
	} else {
		fmt.Fprintf(tw, "controller leader: node %d at %s, term %d\n", c.ControllerID, c.ControllerAddr, c.Term)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "NODE\tVOTER\tRAFT STATE\tLAST CONTACT\tAPPLIED\tBROKER\tFENCED\tKAFKA ADDRESS\tCONTROLLER ADDRESS")
	kafka := map[int32]server.BrokerStatus{}
	for _, b := range st.Brokers {
		kafka[b.NodeID] = b
	}
	if c != nil {
		for _, ns := range c.Nodes {
			b, ok := kafka[ns.NodeID]
			addr := "-"
			if ok {
				addr = b.Host + ":" + strconv.Itoa(int(b.Port))
				if b.Rack != "" {
					addr += " (rack " + b.Rack + ")"
				}
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", ns.NodeID, voterText(ns.Voter), orDash(ns.RaftState),
				sinceText(ns.LastContact, now), ns.AppliedIndex, yesNo(ns.Registered), yesNo(ns.Fenced), addr, orDash(ns.Addr))
		}
	} else {
		for _, b := range st.Brokers {
			fmt.Fprintf(tw, "%d\t?\t?\t?\t?\tyes\t%s\t%s:%d\t?\n", b.NodeID, yesNo(b.Fenced), b.Host, b.Port)
		}
	}
	if c != nil {
		fmt.Fprintln(tw)
		printPartitionProblems(tw, "partitions without a leader", c.Leaderless)
		printPartitionProblems(tw, "under-replicated partitions", c.UnderReplicated)
		printMoves(tw, c.Moving)
	}
	printReplicaLag(tw, st, allReplicas)
	return tw.Flush()
}

// printReplicaLag lists, for the partitions the answering node leads (the node asked knows only
// those), each follower's progress as the leader sees it: only partitions with a follower behind or out
// of the ISR, or every one with all.
func printReplicaLag(w io.Writer, st server.ClusterStatus, all bool) {
	fmt.Fprintln(w)
	fmt.Fprintf(w, "replicas led by node %d: %d under-replicated\n", st.Node, st.LocalUnderReplicated)
	led := 0
	for _, r := range st.Replicas {
		if r.Role != partition.RoleLeader || !all && !lagging(r) {
			continue
		}
		if led == 0 {
			fmt.Fprintln(w, "  TOPIC\tPARTITION\tEPOCH\tHW\tLEO\tISR\tREPLICA\tIN ISR\tLAG\tCAUGHT UP")
		}
		led++
		fmt.Fprintf(w, "  %s\t%d\t%d\t%d\t%d\t%s\t%d\t%s\t%s\t%s\n", r.Topic, r.Partition, r.LeaderEpoch,
			r.HighWatermark, r.LogEndOffset, idList(r.ISR), st.Node, "yes", "0", "-")
		for _, f := range r.Followers {
			fmt.Fprintf(w, "  \t\t\t\t\t\t%d\t%s\t%d\t%s ago\n", f.NodeID, yesNo(f.InISR), f.Lag,
				f.SinceCaughtUp.Round(time.Millisecond))
		}
	}
	if led == 0 && all {
		fmt.Fprintln(w, "  none")
	}
}

// lagging reports whether a led partition has a follower that is behind or outside the ISR.
func lagging(r partition.ReplicaStatus) bool {
	for _, f := range r.Followers {
		if f.Lag > 0 || !f.InISR {
			return true
		}
	}
	return false
}

func printPartitionProblems(w io.Writer, title string, ps []controller.PartitionStatus) {
	if len(ps) == 0 {
		fmt.Fprintf(w, "%s: none\n", title)
		return
	}
	fmt.Fprintf(w, "%s: %d\n", title, len(ps))
	fmt.Fprintln(w, "  TOPIC\tPARTITION\tLEADER\tREPLICAS\tISR")
	for _, p := range ps {
		fmt.Fprintf(w, "  %s\t%d\t%d\t%s\t%s\n", p.Topic, p.Partition, p.Leader, idList(p.Replicas), idList(p.ISR))
	}
}

// printMoves lists the partitions with a move in progress.
func printMoves(w io.Writer, ps []controller.PartitionStatus) {
	if len(ps) == 0 {
		fmt.Fprintln(w, "partitions moving: none")
		return
	}
	fmt.Fprintf(w, "partitions moving: %d\n", len(ps))
	fmt.Fprintln(w, "  TOPIC\tPARTITION\tLEADER\tREPLICAS\tADDING\tREMOVING\tISR")
	for _, p := range ps {
		fmt.Fprintf(w, "  %s\t%d\t%d\t%s\t%s\t%s\t%s\n", p.Topic, p.Partition, p.Leader, idList(p.Replicas),
			idList(p.Adding), idList(p.Removing), idList(p.ISR))
	}
}

func idList(ids []int32) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(int(id))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func voterText(v bool) string {
	if v {
		return "voter"
	}
	return "non-voter"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// sinceText says how long ago t was, "-" for never.
func sinceText(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := max(now.Sub(t), 0)
	return d.Round(time.Millisecond).String() + " ago"
}
