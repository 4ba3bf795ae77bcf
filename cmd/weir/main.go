// Command weir is the weir broker and its command-line tools.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "weir:", err)
		os.Exit(1)
	}
}

// newRootCmd builds the whole command tree; tests build it too and run commands in-process.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "weir",
		Short:         "weir: a durable, Kafka-compatible message queue in one binary",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	g := addGlobalFlags(root)
	root.AddCommand(newServeCmd(), newTopicCmd(g), newProduceCmd(g), newConsumeCmd(g))
	root.AddCommand(newBenchCmd(g))
	root.AddCommand(newGroupCmd(g))
	root.AddCommand(newClusterCmd(g))
	return root
}
