package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// planDecommission moves every replica of node to another live broker: the least loaded (in
// replicas) that does not hold the partition yet, taking node's place in the replica list so that the
// preferred leader, where node was one, is the newcomer. It fails, planning nothing, when a partition has
// no broker left to take its replica. That choice, one partition at a time, can leave the other brokers
// uneven, since a partition's other replicas rule brokers out (one on node, 2 and 3 can only go to 4
// or 5 however loaded they are); evenOut then evens the brokers that stay as a rebalance would.
func planDecommission(meta kadm.Metadata, node int32) (reassignmentPlan, error) {
	plan := reassignmentPlan{Version: 1}
	load := map[int32]int{}
	var others []int32
	for _, b := range meta.Brokers {
		if b.NodeID != node {
			others = append(others, b.NodeID)
			load[b.NodeID] = 0
		}
	}
	slices.Sort(others)
	for _, t := range meta.Topics.Sorted() {
		for _, p := range t.Partitions.Sorted() {
			for _, r := range p.Replicas {
				if _, ok := load[r]; ok {
					load[r]++
				}
			}
		}
	}
	for _, t := range meta.Topics.Sorted() {
		for _, p := range t.Partitions.Sorted() {
			i := slices.Index(p.Replicas, node)
			if i < 0 {
				continue
			}
			best := int32(-1)
			for _, b := range others {
				if !slices.Contains(p.Replicas, b) && (best < 0 || load[b] < load[best]) {
					best = b
				}
			}
			if best < 0 {
				return reassignmentPlan{}, fmt.Errorf("%w: %s-%d: no live broker outside its replicas %s can take node %d's replica",
					errMovesFailed, p.Topic, p.Partition, idList(p.Replicas), node)
			}
			load[best]++
			replicas := slices.Clone(p.Replicas)
			replicas[i] = best
			plan.Partitions = append(plan.Partitions, plannedPartition{Topic: p.Topic, Partition: p.Partition, Replicas: replicas})
		}
	}
	return evenOut(meta, node, plan), nil
}

// evenOut adds to plan, which empties node, the moves and reorders planBalance finds over the other
// brokers once plan is done, so that they end within one replica and one preferred leadership of each
// other. Partition sizes are not known here: planBalance then picks among equal candidates by order.
func evenOut(meta kadm.Metadata, node int32, plan reassignmentPlan) reassignmentPlan {
	planned := map[topicPartition][]int32{}
	for _, p := range plan.Partitions {
		planned[topicPartition{p.Topic, p.Partition}] = p.Replicas
	}
	var brokers []balanceBroker
	for _, b := range meta.Brokers {
		if b.NodeID == node {
			continue
		}
		br := balanceBroker{ID: b.NodeID}
		if b.Rack != nil {
			br.Rack = *b.Rack
		}
		brokers = append(brokers, br)
	}
	var parts []balancePartition
	for _, t := range meta.Topics.Sorted() {
		for _, p := range t.Partitions.Sorted() {
			replicas, ok := planned[topicPartition{p.Topic, p.Partition}]
			if !ok {
				replicas = p.Replicas
			}
			parts = append(parts, balancePartition{Topic: p.Topic, Partition: p.Partition, Replicas: slices.Clone(replicas)})
		}
	}
	for _, p := range planBalance(brokers, parts, 0).Partitions {
		planned[topicPartition{p.Topic, p.Partition}] = p.Replicas
	}
	out := reassignmentPlan{Version: plan.Version}
	for _, p := range parts {
		if replicas, ok := planned[topicPartition{p.Topic, p.Partition}]; ok {
			out.Partitions = append(out.Partitions, plannedPartition{Topic: p.Topic, Partition: p.Partition, Replicas: replicas})
		}
	}
	return out
}

func newClusterDecommissionCmd(g *globalOpts) *cobra.Command {
	var (
		dryRun   bool
		throttle int64
		wait     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "decommission NODE",
		Short: "Move every replica off a broker, so that it can be stopped",
		Long: "Plans, for every partition with a replica on NODE, a move of that replica to the least loaded live\n" +
			"broker that does not hold the partition, then the moves that leave the other brokers within one\n" +
			"replica and one preferred leadership of each other (as rebalance plans them), prints the plan (as\n" +
			"reassignment JSON with --dry-run), starts\n" +
			"the moves, waits for them (up to --wait) printing progress, and reports. A partition no other broker\n" +
			"can take refuses the whole plan, and nothing moves.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 32)
			if err != nil || id < 0 {
				return fmt.Errorf("%w: NODE %q is not a node id", errUsage, args[0])
			}
			if throttle < 0 || wait <= 0 {
				return fmt.Errorf("%w: --throttle must not be negative and --wait must be positive", errUsage)
			}
			return withAdmin(cmd, g, func(ctx context.Context, adm *kadm.Client) error {
				return decommission(ctx, g, adm, cmd.OutOrStdout(), int32(id), dryRun, throttle, wait)
			})
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan as reassignment JSON and move nothing")
	cmd.Flags().Int64Var(&throttle, "throttle", 0, "bytes per second the new replicas may copy (follower.replication.throttled.rate)")
	cmd.Flags().DurationVar(&wait, "wait", 10*time.Minute, "how long to wait for the moves")
	return cmd
}

func decommission(ctx context.Context, g *globalOpts, adm *kadm.Client, out io.Writer, node int32, dryRun bool, throttle int64, wait time.Duration) error {
	meta, err := call(ctx, g, "metadata", func(ctx context.Context) (kadm.Metadata, error) { return adm.Metadata(ctx) })
	if err != nil {
		return err
	}
	plan, err := planDecommission(meta, node)
	if err != nil {
		return err
	}
	if dryRun {
		return printPlanJSON(out, plan)
	}
	if len(plan.Partitions) == 0 {
		fmt.Fprintf(out, "node %d holds no replicas\n", node)
		return nil
	}
	if err := executePlan(ctx, g, adm, out, plan, throttle); err != nil {
		return err
	}
	deadline := time.Now().Add(wait)
	set := kadm.TopicsSet{}
	for _, p := range plan.Partitions {
		set.Add(p.Topic, p.Partition)
	}
	for {
		moving, err := call(ctx, g, "list reassignments", func(ctx context.Context) (kadm.ListPartitionReassignmentsResponses, error) {
			return adm.ListPartitionReassignments(ctx, set)
		})
		if err != nil {
			return err
		}
		n := 0
		moving.Each(func(kadm.ListPartitionReassignmentsResponse) { n++ })
		if n == 0 {
			// the node that answers Metadata may apply the completions a little after the controller
			if n, err = elsewhere(ctx, g, adm, plan); err != nil {
				return err
			}
		}
		fmt.Fprintf(out, "moved %d of %d partitions\n", len(plan.Partitions)-n, len(plan.Partitions))
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %d partitions still moving after %s", errMovesFailed, n, wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	if err := verifyPlan(ctx, g, adm, out, plan); err != nil {
		return err
	}
	fmt.Fprintf(out, "node %d holds no replicas; it can be stopped\n", node)
	return nil
}

// elsewhere counts the planned partitions whose replicas, as Metadata answers, are not the plan's.
func elsewhere(ctx context.Context, g *globalOpts, adm *kadm.Client, plan reassignmentPlan) (int, error) {
	meta, err := retrying(ctx, g, "metadata", func(ctx context.Context) (kadm.Metadata, error) { return adm.Metadata(ctx) })
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range plan.Partitions {
		if pd, ok := meta.Topics[p.Topic].Partitions[p.Partition]; !ok || !slices.Equal(pd.Replicas, p.Replicas) {
			n++
		}
	}
	return n, nil
}

// printPlanJSON writes plan as kafka-reassign-partitions.sh writes it, partitions sorted.
func printPlanJSON(out io.Writer, plan reassignmentPlan) error {
	sort.Slice(plan.Partitions, func(i, j int) bool {
		a, b := plan.Partitions[i], plan.Partitions[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	if plan.Partitions == nil {
		plan.Partitions = []plannedPartition{}
	}
	return writeJSON(out, plan)
}
