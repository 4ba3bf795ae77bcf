package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/weir-mq/weir/internal/vfs"
)

// errMovesFailed is returned when a reassignment names a partition the cluster refused, or --verify
// finds a partition not where the plan puts it.
var errMovesFailed = errors.New("reassignment")

// reassignmentPlan is Kafka's reassignment JSON, as kafka-reassign-partitions.sh reads and writes it.
type reassignmentPlan struct {
	Version    int                `json:"version"`
	Partitions []plannedPartition `json:"partitions"`
}

// plannedPartition is one partition's target in a reassignmentPlan. log_dirs is accepted and must
// be "any" where given: weir has one data directory per node.
type plannedPartition struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Replicas  []int32  `json:"replicas"`
	LogDirs   []string `json:"log_dirs,omitempty"`
}

// readPlan reads and checks a reassignment JSON file ("-" is standard input).
func readPlan(path string, stdin io.Reader) (reassignmentPlan, error) {
	var plan reassignmentPlan
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = vfs.ReadFile(vfs.OS, path)
	}
	if err != nil {
		return plan, fmt.Errorf("%w: %w", errUsage, err)
	}
	if err := json.Unmarshal(data, &plan); err != nil {
		return plan, fmt.Errorf("%w: %s is not reassignment JSON: %w", errUsage, path, err)
	}
	if plan.Version != 1 {
		return plan, fmt.Errorf("%w: %s: version %d, want 1", errUsage, path, plan.Version)
	}
	seen := map[string]bool{}
	for _, p := range plan.Partitions {
		k := p.Topic + "/" + strconv.Itoa(int(p.Partition))
		switch {
		case p.Topic == "" || p.Partition < 0:
			return plan, fmt.Errorf("%w: %s: a partition without a topic or with a negative number", errUsage, path)
		case seen[k]:
			return plan, fmt.Errorf("%w: %s: %s-%d named twice", errUsage, path, p.Topic, p.Partition)
		case len(p.Replicas) == 0:
			return plan, fmt.Errorf("%w: %s: %s-%d has no replicas", errUsage, path, p.Topic, p.Partition)
		}
		for _, d := range p.LogDirs {
			if d != "any" {
				return plan, fmt.Errorf("%w: %s: log dir %q: weir has one data directory per node, give \"any\"", errUsage, path, d)
			}
		}
		seen[k] = true
	}
	return plan, nil
}

func newClusterReassignCmd(g *globalOpts) *cobra.Command {
	var (
		file                         string
		execute, verify, cancelMoves bool
		throttle                     int64
	)
	cmd := &cobra.Command{
		Use:   "reassign --reassignment-json-file FILE (--execute | --verify | --cancel)",
		Short: "Move partitions between brokers with Kafka's reassignment JSON",
		Long: "Reads Kafka's reassignment JSON ({\"version\":1,\"partitions\":[{\"topic\":..,\"partition\":..,\"replicas\":[..]}]})\n" +
			"and, with --execute, starts the moves (AlterPartitionReassignments), setting the cluster's\n" +
			"follower.replication.throttled.rate when --throttle is given; with --verify, reports each partition\n" +
			"as complete or still moving and, once all are complete, removes the throttle; with --cancel, cancels\n" +
			"the moves still in progress. A move copies the new replicas, moves leadership off removed ones and\n" +
			"then deletes the removed replicas' data (docs/reassignment.md).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n := 0
			for _, b := range []bool{execute, verify, cancelMoves} {
				if b {
					n++
				}
			}
			if n != 1 {
				return fmt.Errorf("%w: give exactly one of --execute, --verify and --cancel", errUsage)
			}
			if file == "" {
				return fmt.Errorf("%w: --reassignment-json-file is required", errUsage)
			}
			if throttle < 0 || throttle > 0 && !execute {
				return fmt.Errorf("%w: --throttle takes a positive byte rate, with --execute only", errUsage)
			}
			plan, err := readPlan(file, cmd.InOrStdin())
			if err != nil {
				return err
			}
			return withAdmin(cmd, g, func(ctx context.Context, adm *kadm.Client) error {
				out := cmd.OutOrStdout()
				switch {
				case execute:
					return executePlan(ctx, g, adm, out, plan, throttle)
				case verify:
					return verifyPlan(ctx, g, adm, out, plan)
				default:
					return cancelPlan(ctx, g, adm, out, plan)
				}
			})
		},
	}
	cmd.Flags().StringVar(&file, "reassignment-json-file", "", "the reassignment JSON (- for standard input)")
	cmd.Flags().BoolVar(&execute, "execute", false, "start the moves")
	cmd.Flags().BoolVar(&verify, "verify", false, "report which moves are complete; remove the throttle when all are")
	cmd.Flags().BoolVar(&cancelMoves, "cancel", false, "cancel the moves still in progress")
	cmd.Flags().Int64Var(&throttle, "throttle", 0, "bytes per second the new replicas may copy (follower.replication.throttled.rate)")
	return cmd
}

// alterPlan sends one AlterPartitionReassignments for plan (targets, or cancels) and prints each
// partition's answer; it fails if any partition was refused.
func alterPlan(ctx context.Context, g *globalOpts, adm *kadm.Client, out io.Writer, plan reassignmentPlan, cancel bool) error {
	req := kadm.AlterPartitionAssignmentsReq{}
	for _, p := range plan.Partitions {
		if cancel {
			req.CancelAssign(p.Topic, p.Partition)
		} else {
			req.Assign(p.Topic, p.Partition, p.Replicas)
		}
	}
	send := func(ctx context.Context) (kadm.AlterPartitionAssignmentsResponses, error) {
		return adm.AlterPartitionAssignments(ctx, req)
	}
	var resp kadm.AlterPartitionAssignmentsResponses
	var err error
	if cancel {
		// a cancel repeated after it was applied would answer NO_REASSIGNMENT_IN_PROGRESS
		resp, err = call(ctx, g, "reassign", send)
	} else {
		resp, err = retrying(ctx, g, "reassign", func(ctx context.Context) (kadm.AlterPartitionAssignmentsResponses, error) {
			resp, err := send(ctx)
			if err == nil {
				// a partition the controller refused only for the moment is sent again with the rest:
				// setting a target again leaves a move already started as it is
				for _, r := range resp.Sorted() {
					if r.Err != nil && transient(r.Err) {
						return resp, r.Err
					}
				}
			}
			return resp, err
		})
	}
	if err != nil {
		return err
	}
	failed := 0
	for _, r := range resp.Sorted() {
		switch {
		case r.Err != nil:
			failed++
			fmt.Fprintf(out, "%s-%d: %v\n", r.Topic, r.Partition, withMessage(r.Err, r.ErrMessage))
		case cancel:
			fmt.Fprintf(out, "%s-%d: cancelled\n", r.Topic, r.Partition)
		default:
			fmt.Fprintf(out, "%s-%d: moving\n", r.Topic, r.Partition)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%w: %d of %d partitions refused", errMovesFailed, failed, len(plan.Partitions))
	}
	return nil
}

func executePlan(ctx context.Context, g *globalOpts, adm *kadm.Client, out io.Writer, plan reassignmentPlan, throttle int64) error {
	if throttle > 0 {
		if err := setThrottle(ctx, g, adm, &throttle); err != nil {
			return err
		}
		fmt.Fprintf(out, "throttle: %d bytes/s for the new replicas (weir cluster reassign --verify removes it)\n", throttle)
	}
	return alterPlan(ctx, g, adm, out, plan, false)
}

func cancelPlan(ctx context.Context, g *globalOpts, adm *kadm.Client, out io.Writer, plan reassignmentPlan) error {
	return alterPlan(ctx, g, adm, out, plan, true)
}

// setThrottle sets follower.replication.throttled.rate cluster-wide to *rate, or removes it when rate
// is nil.
func setThrottle(ctx context.Context, g *globalOpts, adm *kadm.Client, rate *int64) error {
	ac := kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "follower.replication.throttled.rate"}
	if rate != nil {
		ac = kadm.AlterConfig{Name: ac.Name, Value: kadm.StringPtr(strconv.FormatInt(*rate, 10))}
	}
	_, err := retrying(ctx, g, "throttle", func(ctx context.Context) (kadm.AlterConfigsResponses, error) {
		resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{ac})
		if err == nil {
			for _, r := range resp {
				err = errors.Join(err, withMessage(r.Err, r.ErrMessage))
			}
		}
		return resp, err
	})
	if err != nil {
		return fmt.Errorf("throttle: %w", err)
	}
	return nil
}

// verifyPlan prints each planned partition as complete (its replicas are the plan's and no move is
// listed), still moving, or elsewhere; when all are complete it removes the throttle.
func verifyPlan(ctx context.Context, g *globalOpts, adm *kadm.Client, out io.Writer, plan reassignmentPlan) error {
	set := kadm.TopicsSet{}
	var topics []string
	for _, p := range plan.Partitions {
		set.Add(p.Topic, p.Partition)
		if !slices.Contains(topics, p.Topic) {
			topics = append(topics, p.Topic)
		}
	}
	moving, err := call(ctx, g, "list reassignments", func(ctx context.Context) (kadm.ListPartitionReassignmentsResponses, error) {
		return adm.ListPartitionReassignments(ctx, set)
	})
	if err != nil {
		return err
	}
	meta, err := call(ctx, g, "metadata", func(ctx context.Context) (kadm.Metadata, error) {
		return adm.Metadata(ctx, topics...)
	})
	if err != nil {
		return err
	}
	parts := slices.Clone(plan.Partitions)
	sort.Slice(parts, func(i, j int) bool {
		return parts[i].Topic < parts[j].Topic || parts[i].Topic == parts[j].Topic && parts[i].Partition < parts[j].Partition
	})
	pending := 0
	for _, p := range parts {
		if m, ok := moving[p.Topic][p.Partition]; ok {
			pending++
			fmt.Fprintf(out, "%s-%d: moving (replicas %s, adding %s, removing %s)\n", p.Topic, p.Partition,
				idList(m.Replicas), idList(m.AddingReplicas), idList(m.RemovingReplicas))
			continue
		}
		var replicas []int32
		if t, ok := meta.Topics[p.Topic]; ok {
			if pd, ok := t.Partitions[p.Partition]; ok {
				replicas = pd.Replicas
			}
		}
		if slices.Equal(replicas, p.Replicas) {
			fmt.Fprintf(out, "%s-%d: complete\n", p.Topic, p.Partition)
		} else {
			pending++
			fmt.Fprintf(out, "%s-%d: not moving, replicas %s instead of %s\n", p.Topic, p.Partition, idList(replicas), idList(p.Replicas))
		}
	}
	if pending > 0 {
		return fmt.Errorf("%w: %d of %d partitions not where the plan puts them", errMovesFailed, pending, len(parts))
	}
	if err := setThrottle(ctx, g, adm, nil); err != nil {
		return err
	}
	fmt.Fprintln(out, "throttle removed")
	return nil
}
