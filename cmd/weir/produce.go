package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
)

// errProduceFailed is returned when at least one record was not acknowledged.
var errProduceFailed = errors.New("produce failed")

type produceOpts struct {
	keySeparator string
	acks         string
	partition    int32
	compression  string
}

func newProduceCmd(g *globalOpts) *cobra.Command {
	var o produceOpts
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Produce one record per line of stdin and wait for every acknowledgement",
		Long: "Produce reads stdin and sends one record per line (the newline is not part of the value).\n" +
			"With --key-separator, the text before the first separator is the record key; a line without\n" +
			"the separator has no key. A summary goes to stderr; the exit status is non-zero if any record failed.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.resolve(cmd); err != nil {
				return err
			}
			return produce(cmd, g, o, args[0])
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.keySeparator, "key-separator", "K", "", "split each line into key and value at the first SEP")
	f.StringVar(&o.acks, "acks", "all", "acknowledgement to wait for: all, 1 or 0")
	f.Int32Var(&o.partition, "partition", -1, "send every record to this partition (-1: by key, sticky when no key)")
	f.StringVar(&o.compression, "compression", "none", "batch compression: none, gzip, snappy, lz4 or zstd")
	return cmd
}

func (o produceOpts) clientOpts(g *globalOpts) ([]kgo.Opt, error) {
	opts := []kgo.Opt{
		// kgo refuses a delivery timeout under a second.
		kgo.RecordDeliveryTimeout(max(g.timeout, time.Second)),
		kgo.ProduceRequestTimeout(g.timeout),
	}
	switch o.acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		return nil, fmt.Errorf("%w: --acks %q: want all, 1 or 0", errUsage, o.acks)
	}
	codec, err := parseCompression(o.compression)
	if err != nil {
		return nil, err
	}
	opts = append(opts, kgo.ProducerBatchCompression(codec))
	if o.partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	} else if o.partition != -1 {
		return nil, fmt.Errorf("%w: --partition %d is negative", errUsage, o.partition)
	}
	return opts, nil
}

func parseCompression(s string) (kgo.CompressionCodec, error) {
	switch s {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("%w: --compression %q: want none, gzip, snappy, lz4 or zstd", errUsage, s)
}

// produceTally counts acknowledgements; kgo calls its record callbacks from its own goroutines.
type produceTally struct {
	mu       sync.Mutex
	nOK      int
	nFailed  int
	firstErr error
}

func (t *produceTally) done(_ *kgo.Record, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err == nil {
		t.nOK++
		return
	}
	t.nFailed++
	if t.firstErr == nil {
		t.firstErr = err
	}
}

func produce(cmd *cobra.Command, g *globalOpts, o produceOpts, topic string) error {
	opts, err := o.clientOpts(g)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Like the Java producer, ask the broker to create a missing topic; the broker's
	// auto.create.topics.enable decides.
	cl, err := g.connect(ctx, append(opts, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())...)
	if err != nil {
		return err
	}
	defer cl.Close()

	var tally produceTally
	readErr := readLines(cmd.InOrStdin(), func(line []byte) {
		r := &kgo.Record{Value: line, Partition: o.partition}
		if o.keySeparator != "" {
			if k, v, ok := bytes.Cut(line, []byte(o.keySeparator)); ok {
				r.Key, r.Value = k, v
			}
		}
		cl.Produce(ctx, r, tally.done)
	})
	flushErr := cl.Flush(ctx)

	tally.mu.Lock()
	defer tally.mu.Unlock()
	fmt.Fprintf(cmd.ErrOrStderr(), "produced %d records to %s, %d failed\n", tally.nOK, topic, tally.nFailed)
	switch {
	case readErr != nil:
		return fmt.Errorf("produce: reading stdin: %w", readErr)
	case flushErr != nil:
		return fmt.Errorf("%w: %w", errProduceFailed, flushErr)
	case tally.nFailed > 0:
		return fmt.Errorf("%w: %d of %d records, first error: %w",
			errProduceFailed, tally.nFailed, tally.nFailed+tally.nOK, g.describe(tally.firstErr))
	}
	return nil
}

// describe makes a missed deadline say which bound was missed.
func (g *globalOpts) describe(err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kgo.ErrRecordTimeout) {
		return fmt.Errorf("%w within %s: %w", errNoAnswer, g.timeout, err)
	}
	return err
}

// readLines calls fn with every line of r, without its trailing newline; each slice is fn's to keep.
func readLines(r io.Reader, fn func([]byte)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			fn(bytes.TrimSuffix(line, []byte{'\n'}))
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
