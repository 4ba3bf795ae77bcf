package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// errConsumeFailed is returned when the broker reports an error on a partition being consumed.
var errConsumeFailed = errors.New("consume failed")

type consumeOpts struct {
	from      string
	partition int32
	group     string
	count     int
	exit      bool
	format    string
}

// startAt is where a partition's consumption starts: the log start, the log end or an offset.
type startAt struct {
	kind   string // "beginning", "end" or "offset"
	offset int64
}

func parseFrom(s string) (startAt, error) {
	switch s {
	case "beginning", "end":
		return startAt{kind: s}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return startAt{}, fmt.Errorf("%w: --from %q: want beginning, end or an offset >= 0", errUsage, s)
	}
	return startAt{kind: "offset", offset: n}, nil
}

// resolve gives the offset consumption starts at in a partition whose log spans [logStart, logEnd).
func (s startAt) resolve(logStart, logEnd int64) int64 {
	switch s.kind {
	case "beginning":
		return logStart
	case "end":
		return logEnd
	}
	return min(max(s.offset, logStart), logEnd)
}

// resetOffset is the kgo form of s, used by groups for partitions with no committed offset.
func (s startAt) resetOffset() kgo.Offset {
	switch s.kind {
	case "beginning":
		return kgo.NewOffset().AtStart()
	case "end":
		return kgo.NewOffset().AtEnd()
	}
	return kgo.NewOffset().At(s.offset)
}

func newConsumeCmd(g *globalOpts) *cobra.Command {
	var o consumeOpts
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print a topic's records to stdout",
		Long: "Consume prints records as they arrive until interrupted, --count records were printed, or, with\n" +
			"--exit, every partition reached the end its log had when consume started.\n" +
			"With --group the consumer joins the group, starts at the group's committed offsets (--from applies\n" +
			"to partitions without one) and commits the offsets of the records it printed.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.resolve(cmd); err != nil {
				return err
			}
			return consume(cmd, g, o, args[0])
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.from, "from", "o", "end", "where to start in each partition: beginning, end or an offset")
	f.Int32VarP(&o.partition, "partition", "p", -1, "consume only this partition (-1: every partition)")
	f.StringVarP(&o.group, "group", "G", "", "consume as a member of this consumer group and commit offsets")
	f.IntVarP(&o.count, "count", "c", 0, "stop after printing this many records (0: no limit)")
	f.BoolVarP(&o.exit, "exit", "e", false, "stop once every partition reaches the log end seen at start")
	f.StringVarP(&o.format, "format", "f", "plain", "output: plain (value), kv (key<TAB>value) or json (one object a line)")
	return cmd
}

// consumePlan is what consume decides before it fetches: where each partition starts, and where it
// stops when --exit is set.
type consumePlan struct {
	starts map[int32]int64
	ends   map[int32]int64
}

func consume(cmd *cobra.Command, g *globalOpts, o consumeOpts, topic string) error {
	from, err := parseFrom(o.from)
	if err != nil {
		return err
	}
	format, err := recordWriter(o.format)
	if err != nil {
		return err
	}
	switch {
	case o.count < 0:
		return fmt.Errorf("%w: --count %d is negative", errUsage, o.count)
	case o.group != "" && o.partition >= 0:
		return fmt.Errorf("%w: --partition cannot be used with --group: the group assigns partitions", errUsage)
	}

	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	plan, err := planConsume(ctx, cmd.ErrOrStderr(), g, o, from, topic)
	if err != nil {
		return err
	}

	opts := []kgo.Opt{kgo.KeepControlRecords()}
	if o.group != "" {
		opts = append(opts,
			kgo.ConsumeTopics(topic),
			kgo.ConsumerGroup(o.group),
			kgo.ConsumeResetOffset(from.resetOffset()),
			kgo.AutoCommitMarks(),
		)
	} else {
		offsets := make(map[int32]kgo.Offset, len(plan.starts))
		for p, off := range plan.starts {
			offsets[p] = kgo.NewOffset().At(off)
		}
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	}
	cl, err := g.connect(ctx, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()

	loopErr := consumeLoop(ctx, cl, o, plan, cmd.OutOrStdout(), cmd.ErrOrStderr(), format)
	if o.group != "" {
		if _, err := call(cmd.Context(), g, "consume: commit", func(ctx context.Context) (struct{}, error) {
			return struct{}{}, cl.CommitMarkedOffsets(ctx)
		}); err != nil && loopErr == nil {
			loopErr = err
		}
		lctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
		defer cancel()
		if err := cl.LeaveGroupContext(lctx); err != nil && loopErr == nil {
			loopErr = fmt.Errorf("consume: leaving group %s: %w", o.group, g.describe(err))
		}
	}
	return loopErr
}

// planConsume looks the topic up (it must exist) and lists its log bounds, to place each partition's
// start and, for --exit, its stop. It says on errOut where an offset outside a partition's log is
// moved to.
func planConsume(ctx context.Context, errOut io.Writer, g *globalOpts, o consumeOpts, from startAt, topic string) (consumePlan, error) {
	adm, cl, err := g.admin(ctx)
	if err != nil {
		return consumePlan{}, err
	}
	defer cl.Close()
	what := "consume " + topic
	topics, err := call(ctx, g, what, func(ctx context.Context) (kadm.TopicDetails, error) {
		return adm.ListTopics(ctx, topic)
	})
	if err != nil {
		return consumePlan{}, err
	}
	td, ok := topics[topic]
	if !ok {
		return consumePlan{}, fmt.Errorf("%s: topic not in the broker's answer", what)
	}
	if td.Err != nil {
		return consumePlan{}, fmt.Errorf("%s: %w", what, td.Err)
	}
	partitions := td.Partitions.Numbers()
	if o.partition >= 0 {
		if _, ok := td.Partitions[o.partition]; !ok {
			return consumePlan{}, fmt.Errorf("%w: %s has no partition %d", errUsage, topic, o.partition)
		}
		partitions = []int32{o.partition}
	}
	logStarts, err := call(ctx, g, what, func(ctx context.Context) (kadm.ListedOffsets, error) {
		return adm.ListStartOffsets(ctx, topic)
	})
	if err != nil {
		return consumePlan{}, err
	}
	logEnds, err := call(ctx, g, what, func(ctx context.Context) (kadm.ListedOffsets, error) {
		return adm.ListEndOffsets(ctx, topic)
	})
	if err != nil {
		return consumePlan{}, err
	}
	var committed kadm.OffsetResponses
	if o.group != "" {
		committed, err = call(ctx, g, what, func(ctx context.Context) (kadm.OffsetResponses, error) {
			rs, err := adm.FetchOffsetsForTopics(ctx, o.group, topic)
			if errors.Is(err, kerr.GroupIDNotFound) {
				return nil, nil
			}
			if err != nil {
				return rs, err
			}
			return rs, rs.Error()
		})
		if err != nil {
			return consumePlan{}, err
		}
	}

	plan := consumePlan{starts: make(map[int32]int64, len(partitions)), ends: make(map[int32]int64, len(partitions))}
	for _, p := range partitions {
		ls, ok1 := logStarts.Lookup(topic, p)
		le, ok2 := logEnds.Lookup(topic, p)
		switch {
		case !ok1 || !ok2:
			return consumePlan{}, fmt.Errorf("%s: no offsets for partition %d in the broker's answer", what, p)
		case ls.Err != nil:
			return consumePlan{}, fmt.Errorf("%s: partition %d: %w", what, p, ls.Err)
		case le.Err != nil:
			return consumePlan{}, fmt.Errorf("%s: partition %d: %w", what, p, le.Err)
		}
		start := from.resolve(ls.Offset, le.Offset)
		if c, ok := committed.Lookup(topic, p); ok && c.At >= 0 {
			start = c.At
		} else if from.kind == "offset" && start != from.offset {
			where := "past the end"
			if from.offset < start {
				where = "before the start"
			}
			fmt.Fprintf(errOut, "weir: consume: offset %d is %s of %s/%d (%d); reading from %d\n", from.offset, where, topic, p, start, start)
		}
		plan.starts[p] = start
		plan.ends[p] = le.Offset
	}
	return plan, nil
}

// consumeLoop polls and prints until interrupted, --count records were printed, or with --exit every
// partition's position reached its planned end (records past that end are not printed). Control
// records (transaction markers) are never printed but still move a partition's position, so --exit
// does not wait for a record that never comes.
func consumeLoop(ctx context.Context, cl *kgo.Client, o consumeOpts, plan consumePlan, out, errOut io.Writer, format recordFormatter) error {
	pending := make(map[int32]bool, len(plan.ends))
	for p, end := range plan.ends {
		if plan.starts[p] < end {
			pending[p] = true
		}
	}
	nPrinted := 0
	finished := func() bool {
		return (o.exit && len(pending) == 0) || (o.count > 0 && nPrinted >= o.count)
	}
	var buf []byte
	for !finished() {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var fetchErr error
		fetches.EachError(func(t string, p int32, err error) {
			var dataLoss *kgo.ErrDataLoss
			if errors.As(err, &dataLoss) {
				fmt.Fprintf(errOut, "weir: consume: %s[%d]: %v\n", t, p, err)
				return
			}
			if fetchErr == nil {
				fetchErr = fmt.Errorf("%w: %s[%d]: %w", errConsumeFailed, t, p, err)
			}
		})
		if fetchErr != nil {
			return fetchErr
		}
		buf = buf[:0]
		var printed []*kgo.Record
		var ferr error
		fetches.EachRecord(func(r *kgo.Record) {
			if ferr != nil || finished() {
				return
			}
			end := plan.ends[r.Partition]
			if r.Offset+1 >= end {
				delete(pending, r.Partition)
			}
			if r.Attrs.IsControl() || (o.exit && r.Offset >= end) {
				return
			}
			if buf, ferr = format(buf, r); ferr != nil {
				return
			}
			nPrinted++
			printed = append(printed, r)
		})
		if ferr != nil {
			return ferr
		}
		if _, err := out.Write(buf); err != nil {
			return err
		}
		if o.group != "" {
			cl.MarkCommitRecords(printed...)
		}
	}
	return nil
}

// recordFormatter appends one record's output line, newline included, to dst.
type recordFormatter func(dst []byte, r *kgo.Record) ([]byte, error)

func recordWriter(format string) (recordFormatter, error) {
	switch format {
	case "plain":
		return func(dst []byte, r *kgo.Record) ([]byte, error) {
			return append(append(dst, r.Value...), '\n'), nil
		}, nil
	case "kv":
		return func(dst []byte, r *kgo.Record) ([]byte, error) {
			dst = append(append(dst, r.Key...), '\t')
			return append(append(dst, r.Value...), '\n'), nil
		}, nil
	case "json":
		return appendJSON, nil
	}
	return nil, fmt.Errorf("%w: --format %q: want plain, kv or json", errUsage, format)
}

// jsonRecord is one line of --format json. Key and value are strings (null when absent); bytes that
// are not UTF-8 are replaced by U+FFFD. Timestamp is in milliseconds since the Unix epoch.
type jsonRecord struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Timestamp int64   `json:"timestamp"`
	Key       *string `json:"key"`
	Value     *string `json:"value"`
}

func appendJSON(dst []byte, r *kgo.Record) ([]byte, error) {
	line, err := json.Marshal(jsonRecord{
		Topic:     r.Topic,
		Partition: r.Partition,
		Offset:    r.Offset,
		Timestamp: r.Timestamp.UnixMilli(),
		Key:       bytesOrNil(r.Key),
		Value:     bytesOrNil(r.Value),
	})
	if err != nil {
		return dst, err
	}
	return append(append(dst, line...), '\n'), nil
}

func bytesOrNil(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}
