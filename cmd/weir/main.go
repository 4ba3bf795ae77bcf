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
	g := &globalOpts{}
	root.AddCommand(
		newServeCmd(),
		g.addClientFlags(newTopicCmd(g)),
		g.addClientFlags(newProduceCmd(g)),
		g.addClientFlags(newConsumeCmd(g)),
		g.addClientFlags(newGroupCmd(g)),
		g.addClientFlags(newDLQCmd(g)),
		g.addClientFlags(newTxnCmd(g)),
		g.addClientFlags(newUserCmd(g)),
		g.addClientFlags(newACLCmd(g)),
		g.addClientFlags(newQuotaCmd(g)),
		g.addTimeoutFlag(newClusterCmd(g)),
		g.addClientFlags(newBenchCmd(g)),
		g.addTimeoutFlag(newHealthCmd(g)),
		newVersionCmd(),
	)
	return root
}
