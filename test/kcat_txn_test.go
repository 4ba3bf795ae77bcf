package test

import (
	"bytes"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKcatTxn drives librdkafka's transactional producer through kcat on one node. `kcat -P -X
// transactional.id=...` sends all its input in one transaction, committed when its input ends: c1..c10
// are committed; then a1..aK are written by a kcat interrupted with SIGINT before its input ends, which
// leaves the transaction uncommitted (kcat 1.7.1 exits without aborting it; the next kcat's
// InitProducerId with the same transactional id fences and aborts it); then c11..c20 are committed.
// kcat with isolation.level=read_committed then reads exactly c1..c20, with read_uncommitted all the
// records, and the log holds three markers.
func TestKcatTxn(t *testing.T) { kcatTxn(t, true, 1) }

// TestKcatTxnTV2 is TestKcatTxn on a node finalizing transaction.version 2: librdkafka keeps to the
// classic protocol (Produce up to v10, its own AddPartitionsToTxn) and must work there too.
func TestKcatTxnTV2(t *testing.T) { kcatTxn(t, true, 2) }

// TestKcatInterruptedPlain runs TestKcatTxn's steps without a transactional id: the records written
// before the SIGINT stay, so read_committed reads all thirty.
func TestKcatInterruptedPlain(t *testing.T) { kcatTxn(t, false, 1) }

func kcatTxn(t *testing.T, transactional bool, tv int) {
	bin := requireTool(t, "kcat")
	ctx := testContext(t, 90*time.Second)
	n := startNode(t, nodeOptions{Args: []string{"--transaction-version", strconv.Itoa(tv)}})
	topic := "kcat-plain-interrupted"
	produce := []string{"-P", "-t", topic, "-X", "acks=all", "-X", "enable.idempotence=true"}
	if transactional {
		topic = "kcat-txn"
		produce = []string{"-P", "-t", topic, "-X", "transactional.id=kcat-txn"}
	}
	n.createTopic(ctx, t, topic, 1, nil)
	lines := func(prefix string, from, to int) string {
		var b strings.Builder
		for i := from; i <= to; i++ {
			fmt.Fprintf(&b, "%s%d\n", prefix, i)
		}
		return b.String()
	}

	kcat(ctx, t, n, lines("c", 1, 10), produce...)

	// The second kcat keeps its input open until part of it is in the log, then is interrupted. kcat
	// reads its input in blocks and sends nothing of a block before it has read all of it, so it is
	// given far more lines than it is waited for.
	const nAborted = 20000
	adm := n.admin(t)
	hw := func() int64 {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			t.Fatalf("end offset of %s: %v", topic, err)
		}
		o, _ := ends.Lookup(topic, 0)
		return o.Offset
	}
	before := hw()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-b", n.kafkaAddr()}, produce...)...)
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start kcat: %v", err)
	}
	if _, err := stdin.Write([]byte(lines("a", 1, nAborted))); err != nil {
		t.Fatalf("write to kcat: %v", err)
	}
	for hw() < before+nAborted/2 {
		if ctx.Err() != nil {
			t.Fatalf("kcat's records never reached %s (end offset %d, %d before); kcat stderr:\n%s", topic, hw(), before, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// kcat waits for input in a read that SIGINT does not end: closing its input after the signal
	// (pending from kill's return on) lets it see the interruption.
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatalf("SIGINT kcat: %v", err)
	}
	stdin.Close()
	err = cmd.Wait()
	t.Logf("interrupted kcat: %v; stderr:\n%s", err, stderr.String())

	kcat(ctx, t, n, lines("c", 11, 20), produce...)

	consume := []string{"-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\n"}
	all := kcat(ctx, t, n, "", append(consume, "-X", "isolation.level=read_uncommitted")...)
	nWritten := checkInterrupted(t, "kcat read_uncommitted", all, lines)
	committed := kcat(ctx, t, n, "", append(consume, "-X", "isolation.level=read_committed")...)
	if !transactional {
		if committed != all {
			t.Errorf("kcat read_committed and read_uncommitted differ without transactions")
		}
		return
	}
	if want := lines("c", 1, 20); committed != want {
		t.Errorf("kcat read_committed read %d lines, want c1..c20:\n%s", strings.Count(committed, "\n"), abbrevLines(committed))
	}
	// Two commit markers and one abort marker sit between the records.
	if end, want := hw(), int64(20+nWritten+3); end != want {
		t.Errorf("%s ends at offset %d, want %d (%d records and 3 markers)", topic, end, want, 20+nWritten)
	}
}

// checkInterrupted checks that out is c1..c10, then a1..aK for some K > 0, then c11..c20, and
// returns K.
func checkInterrupted(t *testing.T, who, out string, lines func(string, int, int) string) int {
	t.Helper()
	head, tail := lines("c", 1, 10), lines("c", 11, 20)
	mid, ok := strings.CutPrefix(out, head)
	if ok {
		mid, ok = strings.CutSuffix(mid, tail)
	}
	k := strings.Count(mid, "\n")
	if !ok || k == 0 || mid != lines("a", 1, k) {
		t.Fatalf("%s read %d lines, want c1..c10, a1..aK, c11..c20:\n%s", who, strings.Count(out, "\n"), abbrevLines(out))
	}
	return k
}

// abbrevLines shortens kcat's output for a failure message.
func abbrevLines(out string) string {
	ls := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	return abbrev(ls)
}
