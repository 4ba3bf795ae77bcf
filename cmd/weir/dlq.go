package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Dead-letter headers the broker adds to a copy (docs/queues.md, "Dead letters"); a redrive drops
// every header with this prefix.
const (
	dlqHeaderPrefix    = "weir.dlq."
	dlqHeaderTopic     = "weir.dlq.topic"
	dlqHeaderPartition = "weir.dlq.partition"
	dlqTopicConfig     = "errors.deadletterqueue.topic.name"
	redriveGroupPrefix = "weir-dlq-redrive-"
)

var (
	// errNoDeadLetterTopic is returned by redrive for a group without errors.deadletterqueue.topic.name.
	errNoDeadLetterTopic = errors.New("the group has no dead-letter topic (errors.deadletterqueue.topic.name)")
	// errNoSourceTopic is returned by redrive for a record that names no source topic, without --to.
	errNoSourceTopic = errors.New("a dead letter names no source topic (header weir.dlq.topic): give --to")
)

func newDLQCmd(g *globalOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Work with share groups' dead-letter topics",
	}
	cmd.AddCommand(newDLQRedriveCmd(g))
	return cmd
}

// redriveOpts are the flags of dlq redrive.
type redriveOpts struct {
	to   string
	rate float64
}

func newDLQRedriveCmd(g *globalOpts) *cobra.Command {
	var o redriveOpts
	cmd := &cobra.Command{
		Use:   "redrive GROUP",
		Short: "Produce the records of a share group's dead-letter topic back to their source topic",
		Long: "Reads GROUP's dead-letter topic (its errors.deadletterqueue.topic.name) up to its end when the\n" +
			"command starts and produces each record back to the topic and partition it came from (the\n" +
			"weir.dlq.topic and weir.dlq.partition headers), or to --to, with its key, value, and headers\n" +
			"except the weir.dlq.* ones. Each record is acknowledged (acks=all) before its position is\n" +
			"committed in the consumer group " + redriveGroupPrefix + "GROUP, so a stopped redrive resumes\n" +
			"where it stopped and a second run moves only what arrived since (a redrive stopped between the\n" +
			"two can produce a record twice, never lose one). Progress goes to stderr.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.rate < 0 {
				return fmt.Errorf("%w: --rate must not be negative, got %v", errUsage, o.rate)
			}
			if o.to != "" {
				if err := checkTopicName(o.to); err != nil {
					return err
				}
			}
			if err := g.resolve(cmd); err != nil {
				return err
			}
			adm, cl, err := g.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer cl.Close()
			return redrive(cmd.Context(), cmd, g, adm, cl, o, args[0])
		},
	}
	cmd.Flags().StringVar(&o.to, "to", "", "produce to this topic instead of each record's source topic (partitioned by key)")
	cmd.Flags().Float64Var(&o.rate, "rate", 0, "records per second at most (0: no limit)")
	return cmd
}

// deadLetterTopic returns group's dead-letter topic from its group configs.
func deadLetterTopic(ctx context.Context, g *globalOpts, cl *kgo.Client, group string) (string, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeGroupConfig, group, []string{dlqTopicConfig}
	req.Resources = append(req.Resources, rr)
	resp, err := call(ctx, g, "describe group configs", func(ctx context.Context) (*kmsg.DescribeConfigsResponse, error) {
		return req.RequestWith(ctx, cl)
	})
	if err != nil {
		return "", err
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return "", fmt.Errorf("describe group configs of %s: %w", group, err)
		}
		for _, c := range r.Configs {
			if c.Name == dlqTopicConfig && c.Value != nil && *c.Value != "" {
				return *c.Value, nil
			}
		}
	}
	return "", fmt.Errorf("%s: %w", group, errNoDeadLetterTopic)
}

// redrivePlan is where a redrive starts and ends in each partition of the dead-letter topic.
type redrivePlan struct {
	topic      string
	start, end map[int32]int64
	total      int64
}

// planRedrive reads the redrive group's committed positions and the dead-letter topic's offsets: each
// partition goes from its committed position (or log start) to the log end now.
func planRedrive(ctx context.Context, g *globalOpts, adm *kadm.Client, group, dlq string) (redrivePlan, error) {
	p := redrivePlan{topic: dlq, start: map[int32]int64{}, end: map[int32]int64{}}
	starts, err := call(ctx, g, "list offsets", func(ctx context.Context) (kadm.ListedOffsets, error) {
		return adm.ListStartOffsets(ctx, dlq)
	})
	if err != nil {
		return p, err
	}
	ends, err := call(ctx, g, "list offsets", func(ctx context.Context) (kadm.ListedOffsets, error) {
		return adm.ListEndOffsets(ctx, dlq)
	})
	if err != nil {
		return p, err
	}
	if err := ends.Error(); err != nil {
		return p, fmt.Errorf("dead-letter topic %s: %w", dlq, err)
	}
	committed, err := call(ctx, g, "fetch offsets", func(ctx context.Context) (kadm.OffsetResponses, error) {
		return adm.FetchOffsets(ctx, redriveGroupPrefix+group)
	})
	if err != nil {
		return p, err
	}
	ends.Each(func(e kadm.ListedOffset) {
		from := int64(0)
		if s, ok := starts.Lookup(dlq, e.Partition); ok {
			from = s.Offset
		}
		if c, ok := committed.Lookup(dlq, e.Partition); ok && c.Err == nil && c.At > from {
			from = c.At
		}
		if from < e.Offset {
			p.start[e.Partition], p.end[e.Partition] = from, e.Offset
			p.total += e.Offset - from
		}
	})
	return p, nil
}

// redrive moves the dead letters of group back, as the command's help says.
func redrive(ctx context.Context, cmd *cobra.Command, g *globalOpts, adm *kadm.Client, admCl *kgo.Client, o redriveOpts, group string) error {
	dlq, err := deadLetterTopic(ctx, g, admCl, group)
	if err != nil {
		return err
	}
	plan, err := planRedrive(ctx, g, adm, group, dlq)
	if err != nil {
		return err
	}
	if plan.total == 0 {
		fmt.Fprintf(cmd.OutOrStdout(), "redrove 0 records from %s: nothing new since the last redrive\n", dlq)
		return nil
	}
	parts := map[int32]kgo.Offset{}
	for p, at := range plan.start {
		parts[p] = kgo.NewOffset().At(at)
	}
	cl, err := g.connect(ctx, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{dlq: parts}),
		kgo.RecordPartitioner(redrivePartitioner()), kgo.FetchMaxWait(time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	r := &redriver{cl: cl, adm: adm, g: g, o: o, group: group, plan: plan, next: maps.Clone(plan.start), began: time.Now()}
	bar := newRedriveBar(cmd.ErrOrStderr(), plan.total)
	err = r.run(ctx, bar)
	bar.finish(r.moved)
	if err != nil {
		return fmt.Errorf("redrove %d of %d records: %w", r.moved, plan.total, err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "redrove %d records from %s in %s\n", r.moved, dlq, time.Since(r.began).Round(time.Millisecond))
	return nil
}

// redriver is one run of dlq redrive.
type redriver struct {
	cl    *kgo.Client
	adm   *kadm.Client
	g     *globalOpts
	o     redriveOpts
	group string
	plan  redrivePlan
	// next is each partition's next offset to move; moved counts the records moved.
	next  map[int32]int64
	moved int64
	began time.Time
}

// done reports whether every partition has reached the end of the plan.
func (r *redriver) done() bool {
	for p, end := range r.plan.end {
		if r.next[p] < end {
			return false
		}
	}
	return true
}

// redriveCommitEvery is how long a redrive paced by --rate goes at most between two commits, so that a
// slow one stopped midway loses little of its progress.
const redriveCommitEvery = time.Second

// run polls the dead-letter topic and moves what the plan covers: it produces the records (paced by
// --rate), waits for all of them, then commits the positions, at the end of each poll's records and,
// within a poll, every redriveCommitEvery.
func (r *redriver) run(ctx context.Context, bar *redriveBar) error {
	var pending []*kgo.Record
	lastFlush := time.Now()
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		if err := r.cl.ProduceSync(ctx, pending...).FirstErr(); err != nil {
			return err
		}
		if err := r.commit(ctx); err != nil {
			return err
		}
		r.moved += int64(len(pending))
		pending, lastFlush = pending[:0], time.Now()
		bar.set(r.moved)
		return nil
	}
	for !r.done() {
		fs := r.cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = errors.Join(ferr, err) })
		if ferr != nil {
			return ferr
		}
		for _, rec := range fs.Records() {
			if rec.Offset < r.next[rec.Partition] || rec.Offset >= r.plan.end[rec.Partition] {
				continue
			}
			back, err := r.back(rec)
			if err != nil {
				return fmt.Errorf("%s-%d@%d: %w", rec.Topic, rec.Partition, rec.Offset, err)
			}
			if err := r.pace(ctx, r.moved+int64(len(pending))); err != nil {
				return err
			}
			if time.Since(lastFlush) >= redriveCommitEvery {
				if err := flush(); err != nil {
					return err
				}
			}
			pending = append(pending, back)
			r.next[rec.Partition] = rec.Offset + 1
		}
		if err := flush(); err != nil {
			return err
		}
	}
	return nil
}

// back builds the record that goes back: the dead letter's key, value, timestamp and headers without
// the weir.dlq.* ones, to its source topic and partition or to --to.
func (r *redriver) back(rec *kgo.Record) (*kgo.Record, error) {
	out := &kgo.Record{Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp, Topic: r.o.to, Partition: -1}
	var srcTopic string
	srcPartition := int32(-1)
	for _, h := range rec.Headers {
		switch {
		case h.Key == dlqHeaderTopic:
			srcTopic = string(h.Value)
		case h.Key == dlqHeaderPartition:
			if p, err := strconv.ParseInt(string(h.Value), 10, 32); err == nil {
				srcPartition = int32(p)
			}
		case !strings.HasPrefix(h.Key, dlqHeaderPrefix):
			out.Headers = append(out.Headers, h)
		}
	}
	if out.Topic == "" {
		if srcTopic == "" {
			return nil, errNoSourceTopic
		}
		out.Topic, out.Partition = srcTopic, srcPartition
	}
	return out, nil
}

// redrivePartitioner sends a record to the partition it names, when the topic has it, else by its key
// (Kafka's murmur2), and records without a key round robin.
func redrivePartitioner() kgo.Partitioner {
	return kgo.BasicConsistentPartitioner(func(topic string) func(*kgo.Record, int) int {
		byKey := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
		next := 0
		return func(r *kgo.Record, n int) int {
			switch {
			case r.Partition >= 0 && int(r.Partition) < n:
				return int(r.Partition)
			case r.Key != nil:
				return byKey.Partition(r, n)
			}
			next = (next + 1) % n
			return next
		}
	})
}

// pace waits until the n-th record of the run may go at --rate.
func (r *redriver) pace(ctx context.Context, n int64) error {
	if r.o.rate <= 0 {
		return nil
	}
	at := r.began.Add(time.Duration(float64(n) / r.o.rate * float64(time.Second)))
	wait := time.Until(at)
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// commit stores every partition's next offset in the redrive group.
func (r *redriver) commit(ctx context.Context) error {
	offs := make(kadm.Offsets)
	for p, at := range r.next {
		offs.Add(kadm.Offset{Topic: r.plan.topic, Partition: p, At: at, LeaderEpoch: -1})
	}
	resp, err := call(ctx, r.g, "commit", func(ctx context.Context) (kadm.OffsetResponses, error) {
		return r.adm.CommitOffsets(ctx, redriveGroupPrefix+r.group, offs)
	})
	if err != nil {
		return err
	}
	return resp.Error()
}

// redriveBar draws the progress of a redrive: a bar redrawn in place on a terminal, else a line per
// second at most.
type redriveBar struct {
	w     io.Writer
	tty   bool
	total int64
	last  time.Time
	// drawn is the count last drawn, -1 before the first.
	drawn int64
}

func newRedriveBar(w io.Writer, total int64) *redriveBar {
	return &redriveBar{w: w, tty: isTerminal(w), total: total, drawn: -1}
}

// set shows n records moved.
func (b *redriveBar) set(n int64) {
	if now := time.Now(); b.tty || now.Sub(b.last) >= time.Second {
		b.last = now
		b.draw(n)
	}
}

// finish shows the final count, unless it is already shown.
func (b *redriveBar) finish(n int64) {
	if n != b.drawn {
		b.draw(n)
	}
	if b.tty {
		fmt.Fprintln(b.w)
	}
}

func (b *redriveBar) draw(n int64) {
	b.drawn = n
	const width = 30
	filled := int(n * width / max(b.total, 1))
	line := fmt.Sprintf("[%s%s] %d/%d records", strings.Repeat("#", filled), strings.Repeat(".", width-filled), n, b.total)
	if b.tty {
		fmt.Fprintf(b.w, "\r%s", line)
		return
	}
	fmt.Fprintln(b.w, line)
}
