package test

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// kcatGroup runs `kcat -G group topic -e` (a balanced consumer that commits what it read and exits at
// the end of every partition) and returns the values it printed, one per line.
func kcatGroup(t *testing.T, n *node, group, topic string) []string {
	t.Helper()
	ctx := testContext(t, 90*time.Second)
	out := kcat(ctx, t, n, "", "-G", group, topic, "-e", "-q", "-f", "%s\n",
		"-X", "auto.offset.reset=earliest", "-X", "enable.auto.commit=true", "-X", "auto.commit.interval.ms=100")
	out = strings.TrimSpace(out)
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

// TestKcatGroup reads a topic twice with `kcat -G`: the first run reads everything and commits, the
// second finds nothing new; a second group reads everything again.
func TestKcatGroup(t *testing.T) {
	requireTool(t, "kcat")
	ctx := testContext(t, 3*time.Minute)
	n := startNode(t, nodeOptions{})
	n.createTopic(ctx, t, "kcat-group", 3, nil)
	kcat(ctx, t, n, seqLines(100), "-P", "-t", "kcat-group", "-X", "acks=all")

	checkEachOnce(t, "first kcat -G", kcatGroup(t, n, "kg", "kcat-group"), 1, 100)
	if got := kcatGroup(t, n, "kg", "kcat-group"); len(got) != 0 {
		t.Fatalf("second kcat -G read %d records, want 0 (all committed): %v", len(got), got)
	}
	checkEachOnce(t, "another group", kcatGroup(t, n, "kg-other", "kcat-group"), 1, 100)
}

// checkEachOnce checks that got holds each of the numbers from..to exactly once, in any order.
func checkEachOnce(t *testing.T, who string, got []string, from, to int) {
	t.Helper()
	if len(got) != to-from+1 {
		t.Fatalf("%s read %d records, want %d..%d: %v", who, len(got), from, to, got)
	}
	seen := map[int]bool{}
	for _, v := range got {
		i, err := strconv.Atoi(v)
		if err != nil || i < from || i > to || seen[i] {
			t.Fatalf("%s read %q: outside %d..%d or twice", who, v, from, to)
		}
		seen[i] = true
	}
}

// TestKcatGroupResumesAfterKill commits with `kcat -G`, kills -9 the broker, restarts it, and checks
// that the group resumes from its committed offsets: it reads only the records produced after.
func TestKcatGroupResumesAfterKill(t *testing.T) {
	requireTool(t, "kcat")
	ctx := testContext(t, 3*time.Minute)
	n := startNode(t, nodeOptions{})
	n.createTopic(ctx, t, "kcat-resume", 3, nil)
	kcat(ctx, t, n, seqLines(100), "-P", "-t", "kcat-resume", "-X", "acks=all")
	checkEachOnce(t, "kcat -G", kcatGroup(t, n, "kr", "kcat-resume"), 1, 100)
	kcat(ctx, t, n, seqRange(101, 150), "-P", "-t", "kcat-resume", "-X", "acks=all")

	n.kill()
	n.restart()
	got := kcatGroup(t, n, "kr", "kcat-resume")
	if len(got) != 50 {
		t.Fatalf("after kill -9 the group read %d records, want the 50 new ones: %v", len(got), got)
	}
	seen := map[int]bool{}
	for _, v := range got {
		i, err := strconv.Atoi(v)
		if err != nil || i <= 100 || i > 150 || seen[i] {
			t.Fatalf("record %q: committed before the kill, unknown or read twice", v)
		}
		seen[i] = true
	}
}
