package test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// netTraceEnv names a directory where a network-fault run writes what its producer did, to
// explain an unavailability: producer.log holds, with wall-clock times, every produce and
// metadata request the producer sent to each broker, when it was written and answered (or
// failed), and franz-go's debug log (each produce answer's per-partition outcome, each metadata
// update), and the fault windows; node-N.log holds node N's own log. Each run writes a
// subdirectory named after the test.
const netTraceEnv = "WEIR_NETFAULT_TRACE"

// netTrace is the producer's trace file of one run.
type netTrace struct {
	mu sync.Mutex
	f  *os.File
}

// newNetTrace opens the trace of the running test when netTraceEnv is set, and arranges for the
// nodes' logs to be written beside it at cleanup; it returns nil otherwise.
func newNetTrace(t testing.TB, nodes []*node) *netTrace {
	root := os.Getenv(netTraceEnv)
	if root == "" {
		return nil
	}
	dir := filepath.Join(root, filepath.Base(t.Name())+"-"+time.Now().Format("150405"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("trace: %v", err)
	}
	f, err := os.Create(filepath.Join(dir, "producer.log"))
	if err != nil {
		t.Fatalf("trace: %v", err)
	}
	tr := &netTrace{f: f}
	t.Logf("tracing the producer and the nodes into %s", dir)
	t.Cleanup(func() {
		tr.mu.Lock()
		f.Close()
		tr.mu.Unlock()
		for _, n := range nodes {
			path := filepath.Join(dir, fmt.Sprintf("node-%d.log", n.id))
			if err := os.WriteFile(path, []byte(n.output.String()), 0o644); err != nil {
				t.Errorf("trace: %v", err)
			}
		}
	})
	return tr
}

// printf writes one line stamped with the wall-clock time, as the nodes stamp theirs.
func (tr *netTrace) printf(format string, args ...any) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	fmt.Fprintf(tr.f, "%s %s\n", time.Now().UTC().Format("15:04:05.000000"), fmt.Sprintf(format, args...))
}

// opts are the producer options that write the trace: the hooks and a debug logger.
func (tr *netTrace) opts() []kgo.Opt {
	return []kgo.Opt{kgo.WithHooks(tr), kgo.WithLogger(kgo.BasicLogger(tr, kgo.LogLevelDebug, nil))}
}

// Write takes the lines of franz-go's logger.
func (tr *netTrace) Write(p []byte) (int, error) {
	tr.printf("kgo %s", p[:len(p)-1])
	return len(p), nil
}

// OnBrokerE2E traces each produce and metadata request to a broker: when it was written, how
// long the answer took, and any error of the connection.
func (tr *netTrace) OnBrokerE2E(meta kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key != kmsg.Produce.Int16() && key != kmsg.Metadata.Int16() {
		return
	}
	tr.printf("e2e broker=%d key=%s written=%s wait=%v read=%v err=%v", meta.NodeID, kmsg.NameForKey(key),
		time.Now().Add(-e2e.DurationE2E()).UTC().Format("15:04:05.000000"),
		e2e.ReadWait.Round(time.Millisecond), e2e.TimeToRead.Round(time.Millisecond), e2e.Err())
}

// OnBrokerConnect traces connections that fail, since a broker the producer cannot reach stalls
// what it leads.
func (tr *netTrace) OnBrokerConnect(meta kgo.BrokerMetadata, dial time.Duration, _ net.Conn, err error) {
	if err != nil {
		tr.printf("connect broker=%d after %v: %v", meta.NodeID, dial.Round(time.Millisecond), err)
	}
}
