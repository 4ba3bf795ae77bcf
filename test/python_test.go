package test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// debianPython is the interpreter Debian's python3-kafka package installs into; the pyenv python
// first on PATH does not have it.
const debianPython = "/usr/bin/python3"

// requireKafkaPython skips the test (fails it under CI=true) when Debian's python3 with the kafka
// module is not installed.
func requireKafkaPython(t *testing.T) {
	t.Helper()
	err := exec.Command(debianPython, "-c", "import kafka").Run()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s cannot import kafka under CI=true (.ci/run installs python3-kafka): %v", debianPython, err)
	}
	t.Skipf("%s cannot import kafka (apt-get install python3-kafka, or run .ci/run): %v", debianPython, err)
}

// TestPython produces and consumes 100 records with kafka-python 2.0.2, which speaks the oldest
// protocol versions weir serves (Metadata v1, Fetch v4, ListOffsets v1), to a topic created with
// franz-go and to one kafka-python's Metadata request creates.
func TestPython(t *testing.T) {
	requireKafkaPython(t)
	ctx := testContext(t, 90*time.Second)
	n := startNode(t, nodeOptions{})

	var want strings.Builder
	for i := range 100 {
		fmt.Fprintf(&want, "%d py-%03d\n", i, i)
	}
	run := func(t *testing.T, topic string) {
		cmd := exec.CommandContext(ctx, debianPython, "testdata/kafka_python_roundtrip.py", n.kafkaAddr(), topic)
		cmd.WaitDelay = 5 * time.Second
		var stdout, stderr bytes.Buffer
		cmd.Stdout = &stdout
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("kafka-python round trip on %s: %v\nstderr:\n%s\nstdout:\n%s", topic, err, stderr.String(), stdout.String())
		}
		if got := stdout.String(); got != want.String() {
			t.Errorf("kafka-python read back (offset value):\n%s\nwant offsets 0..99 with py-000..py-099", got)
		}
	}
	t.Run("created topic", func(t *testing.T) {
		n.createTopic(ctx, t, "py-created", 1, nil)
		run(t, "py-created")
	})
	t.Run("auto-created topic", func(t *testing.T) { run(t, "py-auto") })
}
