package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// defaultBytesTolerance is how far apart, as a fraction of the mean, rebalance leaves the bytes the
// brokers hold: within 10 %, as disk balance goals commonly ask.
const defaultBytesTolerance = 0.1

func newClusterRebalanceCmd(g *globalOpts) *cobra.Command {
	var (
		dryRun         bool
		throttle       int64
		bytesTolerance float64
		wait           time.Duration
		rateInterval   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "rebalance",
		Short: "Even out replicas, bytes and preferred leaders across the live brokers",
		Long: "Reads every partition's replicas (Metadata) and size (DescribeLogDirs) and plans the fewest replica\n" +
			"moves that leave each live broker within one replica and one preferred leadership of the others,\n" +
			"keeping a partition's replicas in distinct racks where every broker has a rack and there are\n" +
			"enough racks, and moving the smallest partitions first; then, while the brokers holding the most\n" +
			"and the fewest bytes differ by more than --bytes-tolerance of the mean, they exchange a replica\n" +
			"each (counts stay even), and likewise for bytes-in, each partition's growth over --rate-interval,\n" +
			"where that keeps the bytes held within the tolerance; preferred leaders change by reordering replica lists, which copies\n" +
			"nothing. With --dry-run it prints the plan as reassignment JSON (which `weir cluster reassign`\n" +
			"takes) and moves nothing. Otherwise it prints the plan, sets\n" +
			"follower.replication.throttled.rate when --throttle is given, starts the moves\n" +
			"(AlterPartitionReassignments), prints progress every second (partitions moved, bytes copied, ETA)\n" +
			"until they complete or --wait passes, removes the throttle, and moves leadership to the new\n" +
			"preferred replicas (ElectLeaders).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if throttle < 0 || wait <= 0 || bytesTolerance < 0 || rateInterval < 0 {
				return fmt.Errorf("%w: --throttle, --bytes-tolerance and --rate-interval must not be negative and --wait must be positive", errUsage)
			}
			return withAdmin(cmd, g, func(ctx context.Context, adm *kadm.Client) error {
				return rebalance(ctx, g, adm, cmd.OutOrStdout(), cmd.ErrOrStderr(), rebalanceOpts{dryRun: dryRun, throttle: throttle,
					bytesTolerance: bytesTolerance, wait: wait, rateInterval: rateInterval})
			})
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan as reassignment JSON and move nothing")
	cmd.Flags().Int64Var(&throttle, "throttle", 0, "bytes per second the new replicas may copy (follower.replication.throttled.rate)")
	cmd.Flags().DurationVar(&wait, "wait", 30*time.Minute, "how long to wait for the moves")
	cmd.Flags().Float64Var(&bytesTolerance, "bytes-tolerance", defaultBytesTolerance,
		"exchange replicas while two brokers' bytes (held, then in) differ by more than this fraction of the mean; 0 evens counts only")
	cmd.Flags().DurationVar(&rateInterval, "rate-interval", defaultRateInterval,
		"measure each partition's bytes-in as its growth over this interval; 0 plans without bytes-in")
	return cmd
}

// defaultRateInterval is how long rebalance watches the partitions grow to measure their bytes-in.
const defaultRateInterval = 5 * time.Second

// rebalanceOpts are `weir cluster rebalance`'s flags.
type rebalanceOpts struct {
	dryRun         bool
	throttle       int64
	bytesTolerance float64
	wait           time.Duration
	rateInterval   time.Duration
}

// clusterPlacement reads the live brokers and every partition's replicas and size, and, when
// rateInterval is positive, its bytes-in: the planner's input.
func clusterPlacement(ctx context.Context, g *globalOpts, adm *kadm.Client, errOut io.Writer, rateInterval time.Duration) ([]balanceBroker, []balancePartition, error) {
	meta, err := call(ctx, g, "metadata", func(ctx context.Context) (kadm.Metadata, error) { return adm.Metadata(ctx) })
	if err != nil {
		return nil, nil, err
	}
	sizes, err := partitionSizes(ctx, g, adm, nil)
	if err != nil {
		return nil, nil, err
	}
	var later map[topicPartition]replicaSizes
	if rateInterval > 0 {
		fmt.Fprintf(errOut, "measuring bytes-in over %s\n", rateInterval)
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(rateInterval):
		}
		if later, err = partitionSizes(ctx, g, adm, nil); err != nil {
			return nil, nil, err
		}
	}
	var brokers []balanceBroker
	for _, b := range meta.Brokers {
		br := balanceBroker{ID: b.NodeID}
		if b.Rack != nil {
			br.Rack = *b.Rack
		}
		brokers = append(brokers, br)
	}
	var parts []balancePartition
	for _, t := range meta.Topics.Sorted() {
		if t.Err != nil {
			return nil, nil, fmt.Errorf("metadata: %s: %w", t.Topic, t.Err)
		}
		for _, p := range t.Partitions.Sorted() {
			k := topicPartition{p.Topic, p.Partition}
			parts = append(parts, balancePartition{Topic: p.Topic, Partition: p.Partition, Replicas: slices.Clone(p.Replicas),
				Bytes: sizes[k].max, BytesIn: bytesIn(sizes[k].max, later[k].max, rateInterval)})
		}
	}
	return brokers, parts, nil
}

// bytesIn is a partition's write rate from its size at two samples interval apart: 0 when it did not
// grow, which includes a partition whose retention deleted a segment in between (its rate is then
// unknown), and when there is no second sample.
func bytesIn(first, second int64, interval time.Duration) int64 {
	if interval <= 0 || second <= first {
		return 0
	}
	return int64(float64(second-first) / interval.Seconds())
}

// topicPartition names one partition.
type topicPartition struct {
	topic     string
	partition int32
}

// replicaSizes is one partition's size on each broker that holds a replica of it, and the largest.
type replicaSizes struct {
	on  map[int32]int64
	max int64
}

// partitionSizes asks every broker (DescribeLogDirs) for the sizes of the partitions in set (all
// partitions when set is nil).
func partitionSizes(ctx context.Context, g *globalOpts, adm *kadm.Client, set kadm.TopicsSet) (map[topicPartition]replicaSizes, error) {
	dirs, err := retrying(ctx, g, "describe log dirs", func(ctx context.Context) (kadm.DescribedAllLogDirs, error) {
		return adm.DescribeAllLogDirs(ctx, set)
	})
	if err != nil {
		return nil, err
	}
	sizes := map[topicPartition]replicaSizes{}
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			k := topicPartition{p.Topic, p.Partition}
			s := sizes[k]
			if s.on == nil {
				s.on = map[int32]int64{}
			}
			s.on[p.Broker] = p.Size
			s.max = max(s.max, p.Size)
			sizes[k] = s
		})
	})
	return sizes, nil
}

func rebalance(ctx context.Context, g *globalOpts, adm *kadm.Client, out, errOut io.Writer, o rebalanceOpts) error {
	brokers, parts, err := clusterPlacement(ctx, g, adm, errOut, o.rateInterval)
	if err != nil {
		return err
	}
	plan := planBalance(brokers, parts, o.bytesTolerance)
	summary := fmt.Sprintf("plan: %d of %d partitions change: %d replicas move (%s to copy), %d preferred leaders change\n",
		len(plan.Partitions), len(parts), plan.ReplicasMoved, byteText(plan.BytesMoved), plan.LeadersMoved)
	planned := applied(parts, plan)
	summary += fmt.Sprintf("per broker: bytes held %s now, %s after; bytes-in %s now, %s after",
		loadRange(brokers, parts, sizeOf, ""), loadRange(brokers, planned, sizeOf, ""),
		loadRange(brokers, parts, rateOf, "/s"), loadRange(brokers, planned, rateOf, "/s"))
	var reassignment reassignmentPlan
	reassignment.Version = 1
	before := map[topicPartition][]int32{}
	for _, p := range parts {
		before[topicPartition{p.Topic, p.Partition}] = p.Replicas
	}
	for _, p := range plan.Partitions {
		reassignment.Partitions = append(reassignment.Partitions, plannedPartition{Topic: p.Topic, Partition: p.Partition, Replicas: p.Replicas})
	}
	if o.dryRun {
		fmt.Fprintln(errOut, summary)
		return printPlanJSON(out, reassignment)
	}
	fmt.Fprintln(out, summary)
	if len(plan.Partitions) == 0 {
		fmt.Fprintln(out, "the cluster is balanced")
		return nil
	}
	for _, p := range plan.Partitions {
		fmt.Fprintf(out, "  %s-%d: %s -> %s\n", p.Topic, p.Partition, idList(before[topicPartition{p.Topic, p.Partition}]), idList(p.Replicas))
	}
	if o.throttle > 0 {
		if err := setThrottle(ctx, g, adm, &o.throttle); err != nil {
			return err
		}
		fmt.Fprintf(out, "throttle: %d bytes/s for the new replicas\n", o.throttle)
		defer func() {
			// the throttle goes even when the moves fail or the command is interrupted
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.timeout)
			defer cancel()
			if err := setThrottle(rctx, g, adm, nil); err != nil {
				fmt.Fprintf(errOut, "removing the throttle: %v\n", err)
				return
			}
			fmt.Fprintln(out, "throttle removed")
		}()
	}
	if err := alterPlan(ctx, g, adm, out, reassignment, false); err != nil {
		return err
	}
	if err := waitMoves(ctx, g, adm, out, reassignment, before, o.wait); err != nil {
		return err
	}
	return electPreferred(ctx, g, adm, out, plan, before)
}

// loadRange is the least and the most of what any broker carries over parts, as text with unit after
// the byte unit.
func loadRange(brokers []balanceBroker, parts []balancePartition, what load, unit string) string {
	lo, hi := loadSpread(brokers, parts, what)
	return byteText(lo) + unit + "-" + byteText(hi) + unit
}

// loadSpread is the least and the most of what any of brokers carries over parts.
func loadSpread(brokers []balanceBroker, parts []balancePartition, what load) (lo, hi int64) {
	per := map[int32]int64{}
	for i := range parts {
		for _, r := range parts[i].Replicas {
			per[r] += what(&parts[i])
		}
	}
	for i, b := range brokers {
		if i == 0 || per[b.ID] < lo {
			lo = per[b.ID]
		}
		hi = max(hi, per[b.ID])
	}
	return lo, hi
}

// waitMoves prints progress every second until every partition of plan has its planned replicas, or
// wait passes.
func waitMoves(ctx context.Context, g *globalOpts, adm *kadm.Client, out io.Writer, plan reassignmentPlan,
	before map[topicPartition][]int32, wait time.Duration) error {
	set := kadm.TopicsSet{}
	for _, p := range plan.Partitions {
		set.Add(p.Topic, p.Partition)
	}
	tty := isTerminal(out)
	start := time.Now()
	deadline := start.Add(wait)
	var firstCopied int64
	var firstAt time.Time
	var sizes map[topicPartition]replicaSizes
	for {
		n, err := elsewhere(ctx, g, adm, plan)
		if err != nil {
			return err
		}
		// the sizes only feed the progress line, and a broker that is down (fenced, so unknown to the
		// client) fails the request for a while: the line then repeats the last sample's bytes
		if s, err := partitionSizes(ctx, g, adm, set); err == nil {
			sizes = s
		}
		copied, toCopy := copiedBytes(plan, before, sizes)
		now := time.Now()
		m := moveProgress{moved: len(plan.Partitions) - n, total: len(plan.Partitions), copied: copied, toCopy: toCopy,
			elapsed: now.Sub(start)}
		// the rate is measured from the first sample, not from zero: replicas of small partitions
		// may copy at once, before the throttle bites
		if firstAt.IsZero() {
			firstCopied, firstAt = copied, now
		} else if d := now.Sub(firstAt); copied > firstCopied {
			m.rate = float64(copied-firstCopied) / d.Seconds()
		}
		line := m.String()
		if tty {
			fmt.Fprintf(out, "\r%-100s", line)
		} else {
			fmt.Fprintln(out, line)
		}
		if n == 0 {
			if tty {
				fmt.Fprintln(out)
			}
			return nil
		}
		if time.Now().After(deadline) {
			if tty {
				fmt.Fprintln(out)
			}
			return fmt.Errorf("%w: %d partitions still moving after %s (weir cluster reassign --cancel stops them)", errMovesFailed, n, wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// copiedBytes sums, over the replicas plan adds, the bytes they hold so far and their partitions'
// sizes now (the largest replica's, which grows while producers write).
func copiedBytes(plan reassignmentPlan, before map[topicPartition][]int32, sizes map[topicPartition]replicaSizes) (copied, toCopy int64) {
	for _, p := range plan.Partitions {
		k := topicPartition{p.Topic, p.Partition}
		s := sizes[k]
		for _, r := range p.Replicas {
			if !slices.Contains(before[k], r) {
				copied += min(s.on[r], s.max)
				toCopy += s.max
			}
		}
	}
	return copied, toCopy
}

// moveProgress is one line of a rebalance's progress.
type moveProgress struct {
	moved, total   int
	copied, toCopy int64
	elapsed        time.Duration
	// rate is the bytes copied per second, 0 while unknown.
	rate float64
}

// String gives the partitions moved, the bytes copied and, once a rate is known, the time left at
// that rate; with every byte copied and moves left, the new replicas are catching up with the records
// written meanwhile.
func (m moveProgress) String() string {
	s := fmt.Sprintf("moved %d of %d partitions, copied %s of %s", m.moved, m.total, byteText(m.copied), byteText(max(m.toCopy, m.copied)))
	switch {
	case m.moved == m.total:
		s += fmt.Sprintf(", done in %s", m.elapsed.Round(time.Second))
	case m.copied >= m.toCopy && m.toCopy > 0:
		s += ", catching up"
	case m.rate > 0:
		eta := time.Duration(float64(m.toCopy-m.copied) / m.rate * float64(time.Second))
		s += fmt.Sprintf(", %s/s, ETA %s", byteText(int64(m.rate)), eta.Round(time.Second))
	default:
		s += ", ETA unknown"
	}
	return s
}

// byteText is n in the largest binary unit that keeps it at one or more.
func byteText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[i])
}

// electPreferred moves leadership to the new preferred replica of every partition whose first replica
// the plan changed. A partition whose leader is already its preferred replica is fine; one whose
// preferred replica cannot lead yet is reported, and the brokers' preferred-leader rebalancer moves
// it later.
func electPreferred(ctx context.Context, g *globalOpts, adm *kadm.Client, out io.Writer, plan balancePlan, before map[topicPartition][]int32) error {
	set := kadm.TopicsSet{}
	for _, p := range plan.Partitions {
		if old := before[topicPartition{p.Topic, p.Partition}]; len(old) == 0 || old[0] != p.Replicas[0] {
			set.Add(p.Topic, p.Partition)
		}
	}
	if len(set) == 0 {
		return nil
	}
	res, err := retrying(ctx, g, "elect leaders", func(ctx context.Context) (kadm.ElectLeadersResults, error) {
		return adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
	})
	if err != nil {
		return err
	}
	moved, already, later := 0, 0, 0
	for _, ps := range res {
		for _, r := range ps {
			switch {
			case r.Err == nil:
				moved++
			case errors.Is(r.Err, kerr.ElectionNotNeeded):
				already++
			default:
				later++
				fmt.Fprintf(out, "%s-%d: leadership not moved yet: %v\n", r.Topic, r.Partition, withMessage(r.Err, r.ErrMessage))
			}
		}
	}
	fmt.Fprintf(out, "leadership moved to the new preferred replica of %d partitions (%d were led by it already)", moved, already)
	if later > 0 {
		fmt.Fprintf(out, "; %d follow when their preferred replica can lead", later)
	}
	fmt.Fprintln(out)
	return nil
}
