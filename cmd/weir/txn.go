package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// errNoSuchTxn is returned by txn describe for a transactional id no coordinator knows.
var errNoSuchTxn = errors.New("no such transactional id")

func newTxnCmd(g *globalOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "txn",
		Short: "List and describe transactional ids, and abort a hanging transaction",
	}
	cmd.AddCommand(newTxnListCmd(g), newTxnDescribeCmd(g), newTxnAbortCmd(g))
	return cmd
}

// txnListEntry is one transactional id of txn list --json.
type txnListEntry struct {
	TransactionalID string `json:"transactional_id"`
	State           string `json:"state"`
	ProducerID      int64  `json:"producer_id"`
	Coordinator     int32  `json:"coordinator"`
}

func newTxnListCmd(g *globalOpts) *cobra.Command {
	var (
		states []string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List transactional ids: id, state, producer id and coordinator",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withAdmin(cmd, g, func(ctx context.Context, adm *kadm.Client) error {
				listed, err := call(ctx, g, "txn list", func(ctx context.Context) (kadm.ListedTransactions, error) {
					return adm.ListTransactions(ctx, nil, states)
				})
				if err != nil {
					return err
				}
				list := []txnListEntry{}
				for _, l := range listed.Sorted() {
					list = append(list, txnListEntry{TransactionalID: l.TxnID, State: l.State, ProducerID: l.ProducerID, Coordinator: l.Coordinator})
				}
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), list)
				}
				tw := newTable(cmd.OutOrStdout())
				fmt.Fprintln(tw, "TRANSACTIONAL-ID\tSTATE\tPRODUCER-ID\tCOORDINATOR")
				for _, l := range list {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", l.TransactionalID, l.State, l.ProducerID, l.Coordinator)
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().StringArrayVar(&states, "state", nil, "only ids in this state, e.g. Ongoing or PrepareCommit (repeatable)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of {transactional_id, state, producer_id, coordinator}")
	return cmd
}

// txnDescription is what txn describe shows, and its --json object.
type txnDescription struct {
	TransactionalID string   `json:"transactional_id"`
	State           string   `json:"state"`
	Coordinator     int32    `json:"coordinator"`
	ProducerID      int64    `json:"producer_id"`
	ProducerEpoch   int16    `json:"producer_epoch"`
	TimeoutMillis   int32    `json:"timeout_ms"`
	Start           *string  `json:"start"`
	Partitions      []string `json:"partitions"`
}

func newTxnDescribeCmd(g *globalOpts) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "describe ID",
		Short: "Show a transactional id's state, producer id and epoch, timeout, start and partitions",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withAdmin(cmd, g, func(ctx context.Context, adm *kadm.Client) error {
				what := "txn describe " + args[0]
				described, err := call(ctx, g, what, func(ctx context.Context) (kadm.DescribedTransactions, error) {
					return adm.DescribeTransactions(ctx, args[0])
				})
				if err != nil {
					return err
				}
				d, ok := described[args[0]]
				switch {
				case !ok:
					return fmt.Errorf("%s: not in the broker's answer", what)
				case errors.Is(d.Err, kerr.TransactionalIDNotFound):
					return fmt.Errorf("%s: %w", what, errNoSuchTxn)
				case d.Err != nil:
					return fmt.Errorf("%s: %w", what, d.Err)
				}
				out := txnDescription{
					TransactionalID: d.TxnID, State: d.State, Coordinator: d.Coordinator, ProducerID: d.ProducerID,
					ProducerEpoch: d.ProducerEpoch, TimeoutMillis: d.TimeoutMillis, Partitions: []string{},
				}
				if d.StartTimestamp >= 0 {
					s := time.UnixMilli(d.StartTimestamp).UTC().Format(time.RFC3339Nano)
					out.Start = &s
				}
				for _, tps := range d.Topics.Sorted() {
					for _, p := range tps.Partitions {
						out.Partitions = append(out.Partitions, tps.Topic+"-"+strconv.Itoa(int(p)))
					}
				}
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), out)
				}
				return out.writeText(cmd.OutOrStdout())
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object: state, coordinator, producer, timeout, start and partitions")
	return cmd
}

func (d txnDescription) writeText(w io.Writer) error {
	tw := newTable(w)
	start := "-"
	if d.Start != nil {
		start = *d.Start
	}
	fmt.Fprintf(tw, "TRANSACTIONAL-ID\t%s\n", d.TransactionalID)
	fmt.Fprintf(tw, "STATE\t%s\n", d.State)
	fmt.Fprintf(tw, "COORDINATOR\t%d\n", d.Coordinator)
	fmt.Fprintf(tw, "PRODUCER-ID\t%d\n", d.ProducerID)
	fmt.Fprintf(tw, "PRODUCER-EPOCH\t%d\n", d.ProducerEpoch)
	fmt.Fprintf(tw, "TIMEOUT\t%s\n", time.Duration(d.TimeoutMillis)*time.Millisecond)
	fmt.Fprintf(tw, "START\t%s\n", start)
	fmt.Fprintf(tw, "PARTITIONS\t%s\n", orDash(strings.Join(d.Partitions, ",")))
	return tw.Flush()
}

func newTxnAbortCmd(g *globalOpts) *cobra.Command {
	var (
		topic            string
		part             int32
		producerID       int64
		producerEpoch    int16
		coordinatorEpoch int32
	)
	cmd := &cobra.Command{
		Use:   "abort",
		Short: "Abort a hanging transaction on one partition: write an ABORT marker at its leader (as kafka-transactions.sh abort)",
		Long: "Writes an ABORT marker for the producer to the partition at its leader (WriteTxnMarkers), which\n" +
			"closes the producer's open transaction there and lets the last stable offset move. Take the\n" +
			"producer id and epoch from the partition's producers, and a coordinator epoch at least the one\n" +
			"of the producer's last marker there.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case topic == "":
				return fmt.Errorf("%w: txn abort needs --topic", errUsage)
			case part < 0 || producerID < 0 || producerEpoch < 0 || coordinatorEpoch < 0:
				return fmt.Errorf("%w: txn abort needs --partition, --producer-id, --producer-epoch and --coordinator-epoch, none negative", errUsage)
			}
			return withAdmin(cmd, g, func(ctx context.Context, adm *kadm.Client) error {
				what := fmt.Sprintf("txn abort %s-%d", topic, part)
				resps, err := call(ctx, g, what, func(ctx context.Context) (kadm.TxnMarkersResponses, error) {
					return adm.WriteTxnMarkers(ctx, kadm.TxnMarkers{
						ProducerID: producerID, ProducerEpoch: producerEpoch, CoordinatorEpoch: coordinatorEpoch,
						Topics: kadm.TopicsSet{topic: {part: {}}},
					})
				})
				if err != nil {
					return err
				}
				var perr error
				found := false
				resps.EachPartition(func(p kadm.TxnMarkersPartitionResponse) {
					if p.Topic == topic && p.Partition == part {
						found, perr = true, p.Err
					}
				})
				switch {
				case !found:
					return fmt.Errorf("%s: not in the broker's answer", what)
				case perr != nil:
					return fmt.Errorf("%s: %w", what, perr)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "aborted producer %d (epoch %d) on %s-%d\n", producerID, producerEpoch, topic, part)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&topic, "topic", "", "the partition's topic")
	f.Int32Var(&part, "partition", -1, "the partition")
	f.Int64Var(&producerID, "producer-id", -1, "the producer whose transaction to abort")
	f.Int16Var(&producerEpoch, "producer-epoch", -1, "the producer's epoch")
	f.Int32Var(&coordinatorEpoch, "coordinator-epoch", -1, "the transaction coordinator epoch to write the marker with")
	return cmd
}
