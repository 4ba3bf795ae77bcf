package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

var updateDocs = flag.Bool("update", false, "rewrite the generated reference in docs/cli.md from the command tree")

const (
	cliDoc   = "../../docs/cli.md"
	refBegin = "<!-- Generated from the command tree by `go test ./cmd/weir -run TestCLIDocs -update`; do not edit by hand. -->\n"
	refEnd   = "<!-- End of the generated reference. -->\n"
)

// cliReference renders every command of the tree under root: its usage line (a parent's names its
// subcommands), what it does, a table of the flags it defines (hidden ones and --help left out), then
// the flags it inherits.
func cliReference(root *cobra.Command) string {
	var b strings.Builder
	for _, c := range allCommands(root)[1:] {
		use := c.UseLine()
		if !c.Runnable() {
			var subs []string
			for _, sub := range c.Commands() {
				subs = append(subs, sub.Name())
			}
			use += " " + strings.Join(subs, "|")
		}
		fmt.Fprintf(&b, "### `%s`\n\n%s.\n\n```\n%s\n```\n", c.CommandPath(), c.Short, use)
		var rows []string
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden || f.Name == "help" {
				return
			}
			name := "`--" + f.Name
			if typ, _ := pflag.UnquoteUsage(f); typ != "" {
				name += " " + typ
			}
			name += "`"
			if f.Shorthand != "" {
				name = "`-" + f.Shorthand + "`, " + name
			}
			def := ""
			switch f.DefValue {
			case "", "0", "0s", "false", "[]":
			default:
				def = "`" + f.DefValue + "`"
			}
			_, usage := pflag.UnquoteUsage(f)
			rows = append(rows, fmt.Sprintf("| %s | %s | %s |", name, def, tableCell(usage)))
		})
		if len(rows) > 0 {
			fmt.Fprintf(&b, "\n| flag | default | meaning |\n|---|---|---|\n%s\n", strings.Join(rows, "\n"))
		}
		var inherited []string
		c.InheritedFlags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden && f.Name != "help" {
				inherited = append(inherited, "`--"+f.Name+"`")
			}
		})
		if len(inherited) > 0 {
			fmt.Fprintf(&b, "\nInherited: %s.\n", strings.Join(inherited, ", "))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// tableCell escapes what would break a Markdown table cell or be read as HTML.
func tableCell(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s)
}

// TestCLIDocsReference keeps the reference part of docs/cli.md equal to the command tree: a command
// or flag added, removed or reworded in one and not the other fails it. -update rewrites the part.
func TestCLIDocsReference(t *testing.T) {
	raw, err := os.ReadFile(cliDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i, j := strings.Index(doc, refBegin), strings.Index(doc, refEnd)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the markers of its generated reference:\n%s%s", cliDoc, refBegin, refEnd)
	}
	have, want := doc[i+len(refBegin):j], "\n"+cliReference(newRootCmd())
	if have == want {
		return
	}
	if *updateDocs {
		if err := os.WriteFile(cliDoc, []byte(doc[:i+len(refBegin)]+want+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	haveLines, wantLines := strings.Split(have, "\n"), strings.Split(want, "\n")
	for k := range min(len(haveLines), len(wantLines)) {
		if haveLines[k] != wantLines[k] {
			t.Fatalf("%s's reference differs from the command tree at its line %d:\n doc:  %q\n tree: %q\n"+
				"run go test ./cmd/weir -run TestCLIDocs -update", cliDoc, k+1, haveLines[k], wantLines[k])
		}
	}
	t.Fatalf("%s's reference has %d lines, the command tree %d; run go test ./cmd/weir -run TestCLIDocs -update",
		cliDoc, len(haveLines), len(wantLines))
}

// mdLink matches the target of an inline Markdown link or image.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsLinksStayInRepository checks that every relative link in README.md, CONTRIBUTING.md and
// docs/*.md names a file or directory of the repository: a clone must explain itself, so no link may
// leave it (../shared, say) or point at a file that is gone.
func TestDocsLinksStayInRepository(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, filepath.Join(root, "README.md"), filepath.Join(root, "CONTRIBUTING.md"))
	for _, doc := range docs {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(raw), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path := filepath.Join(filepath.Dir(doc), target)
			rel, err := filepath.Rel(root, path)
			if err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s links to %s, outside the repository", filepath.Base(doc), m[1])
				continue
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links to %s, which is not in the repository", filepath.Base(doc), m[1])
			}
		}
	}
}
