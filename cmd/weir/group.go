package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

var (
	// errGroupActive is returned by reset-offsets for a group that still has members.
	errGroupActive = errors.New("group has active members; stop its consumers first")
	// errNoSuchGroup is returned by describe for a group the coordinator does not know.
	errNoSuchGroup = errors.New("no such group")
)

func newGroupCmd(g *globalOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "group",
		Short: "List, describe, delete consumer groups and reset their offsets",
	}
	cmd.AddCommand(newGroupListCmd(g), newGroupDescribeCmd(g), newGroupDeleteCmd(g), newGroupResetCmd(g))
	return cmd
}

// groupListEntry is one group of group list --json.
type groupListEntry struct {
	Group        string `json:"group"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
}

func newGroupListCmd(g *globalOpts) *cobra.Command {
	var (
		states []string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List consumer groups: name, state, protocol type",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withAdmin(cmd, g, func(ctx context.Context, adm *kadm.Client) error {
				groups, err := call(ctx, g, "group list", func(ctx context.Context) (kadm.ListedGroups, error) {
					return adm.ListGroups(ctx, states...)
				})
				if err != nil {
					return err
				}
				list := []groupListEntry{}
				for _, l := range groups.Sorted() {
					list = append(list, groupListEntry{Group: l.Group, State: l.State, ProtocolType: l.ProtocolType})
				}
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), list)
				}
				tw := newTable(cmd.OutOrStdout())
				fmt.Fprintln(tw, "GROUP\tSTATE\tPROTOCOL-TYPE")
				for _, l := range list {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", l.Group, l.State, orDash(l.ProtocolType))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().StringArrayVar(&states, "state", nil, "only groups in this state, e.g. Stable or Empty (repeatable)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of {group, state, protocol_type}")
	return cmd
}

func newGroupDescribeCmd(g *globalOpts) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "describe GROUP",
		Short: "Show a group's state and members, and per partition its committed offset, log end offset, lag and member",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withAdmin(cmd, g, func(ctx context.Context, adm *kadm.Client) error {
				d, err := describeGroup(ctx, g, adm, args[0])
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), d)
				}
				return d.writeText(cmd.OutOrStdout())
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object: state, members and per-partition offsets and lag")
	return cmd
}

// groupDescription is what group describe shows, and its --json object. Offsets and lags the broker
// did not give are null, as is the member of a partition nobody consumes.
type groupDescription struct {
	Group      string           `json:"group"`
	State      string           `json:"state"`
	Protocol   string           `json:"protocol"`
	Members    []groupMember    `json:"members"`
	Lag        int64            `json:"lag"`
	Partitions []groupPartition `json:"partitions"`
}

type groupMember struct {
	MemberID string `json:"member_id"`
	ClientID string `json:"client_id"`
	Host     string `json:"host"`
}

type groupPartition struct {
	Topic        string       `json:"topic"`
	Partition    int32        `json:"partition"`
	Committed    *int64       `json:"committed"`
	LogEndOffset *int64       `json:"log_end_offset"`
	Lag          *int64       `json:"lag"`
	Member       *groupMember `json:"member"`
}

func describeGroup(ctx context.Context, g *globalOpts, adm *kadm.Client, name string) (groupDescription, error) {
	what := "group describe " + name
	lags, err := call(ctx, g, what, func(ctx context.Context) (kadm.DescribedGroupLags, error) {
		return adm.Lag(ctx, name)
	})
	if err != nil {
		return groupDescription{}, err
	}
	l, ok := lags[name]
	if !ok {
		return groupDescription{}, fmt.Errorf("%s: group not in the broker's answer", what)
	}
	// A coordinator answers for a group it does not know with the state Dead, and from DescribeGroups
	// v6 with GROUP_ID_NOT_FOUND too, as Kafka does.
	err = l.Error()
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return groupDescription{}, fmt.Errorf("%s: %w", what, err)
	}
	if err != nil || l.State == "Dead" {
		return groupDescription{}, fmt.Errorf("%s: %w", what, errNoSuchGroup)
	}
	d := groupDescription{
		Group: name, State: l.State, Protocol: l.Protocol, Lag: l.Lag.Total(),
		Members: []groupMember{}, Partitions: []groupPartition{},
	}
	for _, m := range l.Members {
		d.Members = append(d.Members, groupMember{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost})
	}
	for _, p := range l.Lag.Sorted() {
		gp := groupPartition{Topic: p.Topic, Partition: p.Partition}
		if p.Commit.At >= 0 {
			gp.Committed = &p.Commit.At
		}
		if p.Err == nil && p.Lag >= 0 {
			gp.Lag = &p.Lag
		}
		if p.End.Err == nil {
			gp.LogEndOffset = &p.End.Offset
		}
		if p.Member != nil {
			gp.Member = &groupMember{MemberID: p.Member.MemberID, ClientID: p.Member.ClientID, Host: p.Member.ClientHost}
		}
		d.Partitions = append(d.Partitions, gp)
	}
	return d, nil
}

// writeText prints the description as two tables: the group, then its partitions.
func (d groupDescription) writeText(w io.Writer) error {
	tw := newTable(w)
	fmt.Fprintf(tw, "GROUP\t%s\n", d.Group)
	fmt.Fprintf(tw, "STATE\t%s\n", d.State)
	fmt.Fprintf(tw, "PROTOCOL\t%s\n", orDash(d.Protocol))
	fmt.Fprintf(tw, "MEMBERS\t%d\n", len(d.Members))
	fmt.Fprintf(tw, "LAG\t%d\n", d.Lag)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = newTable(w)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCOMMITTED\tLOG-END\tLAG\tMEMBER\tCLIENT-ID\tHOST")
	for _, p := range d.Partitions {
		member, client, host := "-", "-", "-"
		if p.Member != nil {
			member, client, host = p.Member.MemberID, p.Member.ClientID, p.Member.Host
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Topic, p.Partition, offsetText(p.Committed),
			offsetText(p.LogEndOffset), offsetText(p.Lag), member, client, host)
	}
	return tw.Flush()
}

func newGroupDeleteCmd(g *globalOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "delete GROUP...",
		Short: "Delete groups without members, and their committed offsets",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withAdmin(cmd, g, func(ctx context.Context, adm *kadm.Client) error {
				resps, err := call(ctx, g, "group delete", func(ctx context.Context) (kadm.DeleteGroupResponses, error) {
					return adm.DeleteGroups(ctx, args...)
				})
				if err != nil {
					return err
				}
				var errs []error
				for _, name := range args {
					r, ok := resps[name]
					switch {
					case !ok:
						errs = append(errs, fmt.Errorf("group delete %s: not in the broker's answer", name))
					case r.Err != nil:
						errs = append(errs, fmt.Errorf("group delete %s: %w", name, r.Err))
					default:
						fmt.Fprintf(cmd.OutOrStdout(), "deleted group %s\n", name)
					}
				}
				return errors.Join(errs...)
			})
		},
	}
}

// resetTarget is where reset-offsets moves a group's offsets: exactly one of its modes.
type resetTarget struct {
	earliest, latest bool
	offset           int64
	datetime         string
}

func newGroupResetCmd(g *globalOpts) *cobra.Command {
	var (
		t      resetTarget
		topics []string
		dryRun bool
	)
	cmd := &cobra.Command{
		Use:   "reset-offsets GROUP",
		Short: "Move an empty group's committed offsets to the earliest, the latest, an offset or a time",
		Long: "Move the committed offsets of a group without members, for the given topics (default: every topic\n" +
			"the group has offsets for). Exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime.\n" +
			"Offsets are clamped to each partition's log start and end. --dry-run prints the plan only.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			t.offset = -1
			if f.Changed("to-offset") {
				t.offset, _ = f.GetInt64("to-offset")
				if t.offset < 0 {
					return fmt.Errorf("%w: --to-offset must not be negative", errUsage)
				}
			}
			n := 0
			for _, set := range []bool{t.earliest, t.latest, f.Changed("to-offset"), t.datetime != ""} {
				if set {
					n++
				}
			}
			if n != 1 {
				return fmt.Errorf("%w: give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime", errUsage)
			}
			var at time.Time
			if t.datetime != "" {
				var err error
				if at, err = time.Parse(time.RFC3339, t.datetime); err != nil {
					return fmt.Errorf("%w: --to-datetime %q is not RFC 3339 (2006-01-02T15:04:05Z07:00)", errUsage, t.datetime)
				}
			}
			return withAdmin(cmd, g, func(ctx context.Context, adm *kadm.Client) error {
				return resetOffsets(ctx, cmd.OutOrStdout(), g, adm, args[0], topics, t, at, dryRun)
			})
		},
	}
	f := cmd.Flags()
	f.BoolVar(&t.earliest, "to-earliest", false, "each partition's log start offset")
	f.BoolVar(&t.latest, "to-latest", false, "each partition's log end offset")
	f.Int64("to-offset", 0, "this offset in every partition")
	f.StringVar(&t.datetime, "to-datetime", "", "the first offset at or after this RFC 3339 time")
	f.StringArrayVar(&topics, "topic", nil, "topic to reset (repeatable; default: the group's committed topics)")
	f.BoolVar(&dryRun, "dry-run", false, "print the new offsets without committing them")
	return cmd
}

func resetOffsets(ctx context.Context, w io.Writer, g *globalOpts, adm *kadm.Client, name string, topics []string, t resetTarget, at time.Time, dryRun bool) error {
	what := "group reset-offsets " + name
	groups, err := call(ctx, g, what, func(ctx context.Context) (kadm.DescribedGroups, error) {
		return adm.DescribeGroups(ctx, name)
	})
	if err != nil {
		return err
	}
	// A group nobody has used yet is not found (DescribeGroups v6); its offsets can be set all the same.
	if d := groups[name]; d.Err != nil && !errors.Is(d.Err, kerr.GroupIDNotFound) {
		return fmt.Errorf("%s: %w", what, d.Err)
	} else if len(d.Members) > 0 {
		return fmt.Errorf("%s: %w (state %s, %d members)", what, errGroupActive, d.State, len(d.Members))
	}
	current, err := call(ctx, g, what, func(ctx context.Context) (kadm.OffsetResponses, error) {
		return adm.FetchOffsets(ctx, name)
	})
	if err != nil {
		return err
	}
	if len(topics) == 0 {
		for topic := range current {
			topics = append(topics, topic)
		}
		slices.Sort(topics)
	}
	if len(topics) == 0 {
		return fmt.Errorf("%w: the group has no committed offsets; name the topics with --topic", errUsage)
	}
	list := func(fn func(context.Context) (kadm.ListedOffsets, error)) (kadm.ListedOffsets, error) {
		l, err := call(ctx, g, what, fn)
		if err == nil {
			err = l.Error()
		}
		return l, err
	}
	starts, err := list(func(ctx context.Context) (kadm.ListedOffsets, error) { return adm.ListStartOffsets(ctx, topics...) })
	if err != nil {
		return err
	}
	ends, err := list(func(ctx context.Context) (kadm.ListedOffsets, error) { return adm.ListEndOffsets(ctx, topics...) })
	if err != nil {
		return err
	}
	var after kadm.ListedOffsets
	if !at.IsZero() {
		if after, err = list(func(ctx context.Context) (kadm.ListedOffsets, error) {
			return adm.ListOffsetsAfterMilli(ctx, at.UnixMilli(), topics...)
		}); err != nil {
			return err
		}
	}
	next := make(kadm.Offsets)
	ends.Each(func(end kadm.ListedOffset) {
		start, _ := starts.Lookup(end.Topic, end.Partition)
		var off int64
		switch {
		case t.earliest:
			off = start.Offset
		case t.latest:
			off = end.Offset
		case !at.IsZero():
			off = end.Offset
			if a, ok := after.Lookup(end.Topic, end.Partition); ok && a.Offset >= 0 {
				off = a.Offset
			}
		default:
			off = t.offset
		}
		off = min(max(off, start.Offset), end.Offset)
		next.Add(kadm.Offset{Topic: end.Topic, Partition: end.Partition, At: off, LeaderEpoch: -1})
	})

	tw := newTable(w)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tOLD\tNEW")
	for _, o := range next.Sorted() {
		old := "-"
		if c, ok := current.Lookup(o.Topic, o.Partition); ok && c.Err == nil && c.At >= 0 {
			old = strconv.FormatInt(c.At, 10)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\n", o.Topic, o.Partition, old, o.At)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if dryRun {
		fmt.Fprintln(w, "dry run: nothing committed")
		return nil
	}
	if _, err := call(ctx, g, what, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, adm.CommitAllOffsets(ctx, name, next)
	}); err != nil {
		return err
	}
	fmt.Fprintf(w, "committed %d offsets for group %s\n", len(next.Sorted()), name)
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
