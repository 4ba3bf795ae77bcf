package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// allCommands lists every command in the tree under root, root first, each before its subcommands.
func allCommands(root *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{root}
	for _, sub := range root.Commands() {
		out = append(out, allCommands(sub)...)
	}
	return out
}

// helpFlag matches a flag line of --help output and captures the long name.
var helpFlag = regexp.MustCompile(`^\s+(?:-\S, )?--([a-z0-9-]+)`)

// helpFlags returns the long names of the flags a --help output lists, in order, repeats included.
func helpFlags(help string) []string {
	var names []string
	for line := range strings.SplitSeq(help, "\n") {
		if m := helpFlag.FindStringSubmatch(line); m != nil {
			names = append(names, m[1])
		}
	}
	return names
}

func TestCLIHelpListsEachFlagOnce(t *testing.T) {
	helps := map[string]string{}
	for _, c := range allCommands(newRootCmd()) {
		name := c.CommandPath()
		out := mustRun(t, "", append(strings.Fields(name)[1:], "--help")...)
		helps[name] = out
		seen := map[string]bool{}
		for _, f := range helpFlags(out) {
			if seen[f] {
				t.Errorf("%s --help lists --%s twice:\n%s", name, f, out)
			}
			seen[f] = true
		}
		for line := range strings.SplitSeq(out, "\n") {
			if strings.Count(line, "(default") > 1 {
				t.Errorf("%s --help states a default twice: %q", name, line)
			}
		}
	}
	// Each command shows only the flags it uses.
	absent := map[string][]string{
		"weir serve":          {"brokers", "timeout"},
		"weir":                {"brokers", "timeout"},
		"weir cluster":        {"brokers"},
		"weir cluster status": {"brokers"},
		"weir bench produce":  {"consumers"},
		"weir bench consume":  {"producers", "size", "rate", "acks", "compression", "partitions", "linger", "batch-bytes", "topic-config", "replication-factor"},
	}
	for name, flags := range absent {
		help, ok := helps[name]
		if !ok {
			t.Fatalf("no command %q in the tree", name)
		}
		listed := helpFlags(help)
		for _, f := range flags {
			for _, l := range listed {
				if l == f {
					t.Errorf("%s --help lists --%s, which it does not use", name, f)
				}
			}
		}
	}
	if h := helps["weir serve"]; !strings.Contains(h, "/metrics") || !strings.Contains(h, "/debug/pprof/") {
		t.Errorf("weir serve --help does not name /metrics and /debug/pprof/ under --http-addr:\n%s", h)
	}
}
