package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func newTopicCmd(g *globalOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topic",
		Short: "Create, list, describe, alter and delete topics",
	}
	cmd.AddCommand(
		newTopicCreateCmd(g),
		newTopicListCmd(g),
		newTopicDescribeCmd(g),
		newTopicAlterCmd(g),
		newTopicDeleteCmd(g),
	)
	return cmd
}

func newTopicCreateCmd(g *globalOpts) *cobra.Command {
	var (
		nPartitions       int32
		replicationFactor int16
		configs           []string
		wait              time.Duration
	)
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a topic and wait until every partition serves",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := checkTopicName(name); err != nil {
				return err
			}
			set, err := parseConfigs(configs)
			if err != nil {
				return err
			}
			cfg := make(map[string]*string, len(set))
			for _, kv := range set {
				cfg[kv.key] = &kv.value
			}
			return withAdmin(cmd, g, func(ctx context.Context, adm *kadm.Client) error {
				r, err := call(ctx, g, "topic create "+name, func(ctx context.Context) (kadm.CreateTopicResponse, error) {
					r, err := adm.CreateTopic(ctx, nPartitions, replicationFactor, cfg, name)
					return r, withMessage(err, r.ErrMessage)
				})
				if err != nil {
					return err
				}
				if wait > 0 {
					if err := awaitPartitions(ctx, cmd.ErrOrStderr(), g, adm, name, wait); err != nil {
						return err
					}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "created topic %s (partitions %s, replication factor %s)\n",
					name, orAsked(r.NumPartitions, nPartitions), orAsked(int32(r.ReplicationFactor), int32(replicationFactor)))
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.DurationVar(&wait, "wait", time.Minute, "how long to wait for every partition to serve once the topic is created (0: do not wait)")
	f.Int32VarP(&nPartitions, "partitions", "p", -1, "number of partitions (-1: the broker's default)")
	f.Int16VarP(&replicationFactor, "replication-factor", "r", -1, "replicas per partition (-1: the broker's default)")
	f.StringArrayVarP(&configs, "config", "c", nil, "topic config key=value (repeatable)")
	return cmd
}

// topicListEntry is one topic of topic list --json.
type topicListEntry struct {
	Topic             string `json:"topic"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"`
}

func newTopicListCmd(g *globalOpts) *cobra.Command {
	var (
		internal bool
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List topics: name, partitions, replication factor",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withAdmin(cmd, g, func(ctx context.Context, adm *kadm.Client) error {
				topics, err := call(ctx, g, "topic list", func(ctx context.Context) (kadm.TopicDetails, error) {
					if internal {
						return adm.ListTopicsWithInternal(ctx)
					}
					return adm.ListTopics(ctx)
				})
				if err != nil {
					return err
				}
				list := []topicListEntry{}
				for _, t := range topics.Sorted() {
					list = append(list, topicListEntry{Topic: t.Topic, Partitions: len(t.Partitions), ReplicationFactor: t.Partitions.NumReplicas()})
				}
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), list)
				}
				tw := newTable(cmd.OutOrStdout())
				fmt.Fprintln(tw, "TOPIC\tPARTITIONS\tREPLICAS")
				for _, t := range list {
					fmt.Fprintf(tw, "%s\t%d\t%d\n", t.Topic, t.Partitions, t.ReplicationFactor)
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&internal, "internal", false, "include internal topics such as __consumer_offsets")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of {topic, partitions, replication_factor}")
	return cmd
}

func newTopicDescribeCmd(g *globalOpts) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a topic's partitions (leader, replicas, ISR, offsets) and its non-default configs",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withAdmin(cmd, g, func(ctx context.Context, adm *kadm.Client) error {
				d, err := describeTopic(ctx, g, adm, args[0])
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
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object: id, partitions and configs")
	return cmd
}

// topicDescription is what topic describe shows, and its --json object. Offsets the broker did not
// give are null; configs are those not at their default, sorted by key.
type topicDescription struct {
	Topic             string              `json:"topic"`
	ID                string              `json:"id"`
	ReplicationFactor int                 `json:"replication_factor"`
	Partitions        []partitionDetail   `json:"partitions"`
	Configs           []topicConfigDetail `json:"configs"`
}

type partitionDetail struct {
	Partition      int32   `json:"partition"`
	Leader         int32   `json:"leader"`
	LeaderEpoch    int32   `json:"leader_epoch"`
	Replicas       []int32 `json:"replicas"`
	ISR            []int32 `json:"isr"`
	LogStartOffset *int64  `json:"log_start_offset"`
	LogEndOffset   *int64  `json:"log_end_offset"`
	Error          string  `json:"error,omitempty"`
}

// topicConfigDetail is one config; a sensitive value is null.
type topicConfigDetail struct {
	Key       string  `json:"key"`
	Value     *string `json:"value"`
	Source    string  `json:"source"`
	Sensitive bool    `json:"sensitive"`
}

func describeTopic(ctx context.Context, g *globalOpts, adm *kadm.Client, name string) (topicDescription, error) {
	what := "topic describe " + name
	topics, err := call(ctx, g, what, func(ctx context.Context) (kadm.TopicDetails, error) {
		return adm.ListTopics(ctx, name)
	})
	if err != nil {
		return topicDescription{}, err
	}
	td, ok := topics[name]
	if !ok {
		return topicDescription{}, fmt.Errorf("%s: topic not in the broker's answer", what)
	}
	if td.Err != nil {
		return topicDescription{}, fmt.Errorf("%s: %w", what, td.Err)
	}
	starts, err := call(ctx, g, what, func(ctx context.Context) (kadm.ListedOffsets, error) {
		return adm.ListStartOffsets(ctx, name)
	})
	if err != nil {
		return topicDescription{}, err
	}
	ends, err := call(ctx, g, what, func(ctx context.Context) (kadm.ListedOffsets, error) {
		return adm.ListEndOffsets(ctx, name)
	})
	if err != nil {
		return topicDescription{}, err
	}
	configs, err := call(ctx, g, what, func(ctx context.Context) (kadm.ResourceConfig, error) {
		rcs, err := adm.DescribeTopicConfigs(ctx, name)
		return topicAnswer(rcs, err, name, func(rc *kadm.ResourceConfig) error { return withMessage(rc.Err, rc.ErrMessage) })
	})
	if err != nil {
		return topicDescription{}, err
	}

	d := topicDescription{
		Topic:             name,
		ID:                base64.RawURLEncoding.EncodeToString(td.ID[:]),
		ReplicationFactor: td.Partitions.NumReplicas(),
		Partitions:        []partitionDetail{},
		Configs:           []topicConfigDetail{},
	}
	for _, p := range td.Partitions.Sorted() {
		pd := partitionDetail{Partition: p.Partition, Replicas: []int32{}, ISR: []int32{}}
		if p.Err != nil {
			pd.Error = p.Err.Error()
			d.Partitions = append(d.Partitions, pd)
			continue
		}
		pd.Leader, pd.LeaderEpoch = p.Leader, p.LeaderEpoch
		pd.Replicas = append(pd.Replicas, p.Replicas...)
		pd.ISR = append(pd.ISR, p.ISR...)
		pd.LogStartOffset = listedOffset(starts, name, p.Partition)
		pd.LogEndOffset = listedOffset(ends, name, p.Partition)
		d.Partitions = append(d.Partitions, pd)
	}
	for _, c := range configs.Configs {
		if c.Source == kmsg.ConfigSourceDefaultConfig {
			continue
		}
		cd := topicConfigDetail{Key: c.Key, Source: c.Source.String(), Sensitive: c.Sensitive}
		if !c.Sensitive {
			v := c.MaybeValue()
			cd.Value = &v
		}
		d.Configs = append(d.Configs, cd)
	}
	slices.SortFunc(d.Configs, func(a, b topicConfigDetail) int { return strings.Compare(a.Key, b.Key) })
	return d, nil
}

// writeText prints the description as three tables: the topic, its partitions, its configs.
func (d topicDescription) writeText(w io.Writer) error {
	tw := newTable(w)
	fmt.Fprintf(tw, "TOPIC\t%s\n", d.Topic)
	fmt.Fprintf(tw, "ID\t%s\n", d.ID)
	fmt.Fprintf(tw, "PARTITIONS\t%d\n", len(d.Partitions))
	fmt.Fprintf(tw, "REPLICATION\t%d\n", d.ReplicationFactor)
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	tw = newTable(w)
	fmt.Fprintln(tw, "PARTITION\tLEADER\tEPOCH\tREPLICAS\tISR\tSTART\tEND")
	for _, p := range d.Partitions {
		if p.Error != "" {
			fmt.Fprintf(tw, "%d\t-\t-\t-\t-\t-\t-\t%s\n", p.Partition, p.Error)
			continue
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%s\t%s\n", p.Partition, p.Leader, p.LeaderEpoch,
			joinIDs(p.Replicas), joinIDs(p.ISR), offsetText(p.LogStartOffset), offsetText(p.LogEndOffset))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	if len(d.Configs) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw = newTable(w)
	fmt.Fprintln(tw, "CONFIG\tVALUE\tSOURCE")
	for _, c := range d.Configs {
		v := "(sensitive)"
		if c.Value != nil {
			v = *c.Value
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Key, v, c.Source)
	}
	return tw.Flush()
}

func newTopicAlterCmd(g *globalOpts) *cobra.Command {
	var (
		configs     []string
		deletes     []string
		nPartitions int32
	)
	cmd := &cobra.Command{
		Use:   "alter NAME",
		Short: "Change a topic's configs (incrementally) or grow its partition count",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			set, err := parseConfigs(configs)
			if err != nil {
				return err
			}
			if len(set) == 0 && len(deletes) == 0 && nPartitions < 0 {
				return fmt.Errorf("%w: topic alter needs --config, --delete-config or --partitions", errUsage)
			}
			var alters []kadm.AlterConfig
			for _, kv := range set {
				alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: kv.key, Value: &kv.value})
			}
			for _, k := range deletes {
				alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
			}
			return withAdmin(cmd, g, func(ctx context.Context, adm *kadm.Client) error {
				out := cmd.OutOrStdout()
				if len(alters) > 0 {
					_, err := call(ctx, g, "topic alter "+name, func(ctx context.Context) (kadm.AlterConfigsResponse, error) {
						rs, err := adm.AlterTopicConfigs(ctx, alters, name)
						return topicAnswer(rs, err, name, func(r *kadm.AlterConfigsResponse) error { return withMessage(r.Err, r.ErrMessage) })
					})
					if err != nil {
						return err
					}
					for _, kv := range set {
						fmt.Fprintf(out, "altered topic %s: set %s=%s\n", name, kv.key, kv.value)
					}
					for _, k := range deletes {
						fmt.Fprintf(out, "altered topic %s: deleted %s\n", name, k)
					}
				}
				if nPartitions >= 0 {
					_, err := call(ctx, g, "topic alter "+name, func(ctx context.Context) (kadm.CreatePartitionsResponse, error) {
						rs, err := adm.UpdatePartitions(ctx, int(nPartitions), name)
						return topicAnswer(rs, err, name, func(r *kadm.CreatePartitionsResponse) error { return withMessage(r.Err, r.ErrMessage) })
					})
					if err != nil {
						return err
					}
					fmt.Fprintf(out, "altered topic %s: partitions %d\n", name, nPartitions)
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&configs, "config", "c", nil, "set topic config key=value (repeatable)")
	f.StringArrayVar(&deletes, "delete-config", nil, "remove a topic config override, back to the default (repeatable)")
	f.Int32VarP(&nPartitions, "partitions", "p", -1, "grow the topic to this many partitions")
	return cmd
}

func newTopicDeleteCmd(g *globalOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a topic and all its records",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			return withAdmin(cmd, g, func(ctx context.Context, adm *kadm.Client) error {
				_, err := call(ctx, g, "topic delete "+name, func(ctx context.Context) (kadm.DeleteTopicResponse, error) {
					r, err := adm.DeleteTopic(ctx, name)
					return r, withMessage(err, r.ErrMessage)
				})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "deleted topic %s\n", name)
				return nil
			})
		},
	}
}

// withAdmin resolves the global flags, connects, runs fn and closes the client.
// awaitPartitions waits, up to wait, until every partition of a topic just created answers ListOffsets: a
// broker answers CreateTopics once the metadata is committed and opens the replicas in the background, so a
// large topic is created but not yet served for a while. Progress goes to stderr once a check finds the
// topic not ready.
func awaitPartitions(ctx context.Context, progress io.Writer, g *globalOpts, adm *kadm.Client, topic string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		ready, total := 0, 0
		offs, err := call(ctx, g, "topic create "+topic, func(ctx context.Context) (kadm.ListedOffsets, error) {
			return adm.ListEndOffsets(ctx, topic)
		})
		if err == nil {
			offs.Each(func(o kadm.ListedOffset) {
				total++
				if o.Err == nil {
					ready++
				}
			})
		}
		if total > 0 && ready == total {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("topic create %s: created, but %d of %d partitions serve after %s; the broker goes on opening them", topic, ready, total, wait)
		}
		if total > 0 {
			fmt.Fprintf(progress, "weir: topic create %s: %d of %d partitions serve\n", topic, ready, total)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func withAdmin(cmd *cobra.Command, g *globalOpts, fn func(context.Context, *kadm.Client) error) error {
	if err := g.resolve(cmd); err != nil {
		return err
	}
	ctx := cmd.Context()
	adm, cl, err := g.admin(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	return fn(ctx, adm)
}

// maxTopicNameLen is Kafka's longest topic name.
const maxTopicNameLen = 249

// checkTopicName checks a name to create by Kafka's rule (1 to 249 of a-z, A-Z, 0-9, '.', '_' and '-',
// neither "." nor ".."), so a bad name is refused before a request, with the character at fault.
func checkTopicName(name string) error {
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: topic name %q has %q; use only a-z, A-Z, 0-9, '.', '_' and '-'", errUsage, name, c)
		}
	}
	switch {
	case name == "" || name == "." || name == "..":
		return fmt.Errorf("%w: topic name %q is not allowed", errUsage, name)
	case len(name) > maxTopicNameLen:
		return fmt.Errorf("%w: topic name has %d characters, at most %d", errUsage, len(name), maxTopicNameLen)
	}
	return nil
}

type configKV struct{ key, value string }

// parseConfigs splits each key=value at its first '='; values may contain '=' and ','.
func parseConfigs(raw []string) ([]configKV, error) {
	out := make([]configKV, 0, len(raw))
	for _, s := range raw {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%w: --config %q is not key=value", errUsage, s)
		}
		out = append(out, configKV{key: k, value: v})
	}
	return out, nil
}

// topicAnswer picks topic's answer out of the per-resource answers rs of an admin call that returned
// err, or passes err on; errOf turns the answer's error code and the broker's message into its error.
func topicAnswer[R any, Rs interface {
	On(string, func(*R) error) (R, error)
}](rs Rs, err error, topic string, errOf func(*R) error) (R, error) {
	if err != nil {
		var zero R
		return zero, err
	}
	return rs.On(topic, errOf)
}

// withMessage adds the broker's free-text explanation, when it sent one, to a Kafka error.
func withMessage(err error, msg string) error {
	if err == nil || msg == "" {
		return err
	}
	return fmt.Errorf("%w (%s)", err, msg)
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

func joinIDs(ids []int32) string {
	if len(ids) == 0 {
		return "-"
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}

// listedOffset is partition's offset in l, nil when l lacks it.
func listedOffset(l kadm.ListedOffsets, topic string, partition int32) *int64 {
	o, ok := l.Lookup(topic, partition)
	if !ok || o.Err != nil {
		return nil
	}
	return &o.Offset
}

// offsetText prints an offset, "-" for none.
func offsetText(o *int64) string {
	if o == nil {
		return "-"
	}
	return strconv.FormatInt(*o, 10)
}

// writeJSON prints v as one line of JSON.
func writeJSON(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// orAsked prints the broker's answer, or what was asked when the broker's version does not echo it.
func orAsked(got, asked int32) string {
	switch {
	case got > 0:
		return strconv.Itoa(int(got))
	case asked > 0:
		return strconv.Itoa(int(asked))
	}
	return "broker default"
}
