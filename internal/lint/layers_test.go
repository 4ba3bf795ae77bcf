// Package lint holds tests that check the code base itself: the layering docs/architecture.md draws.
package lint

import (
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/weir-mq/weir/"

// allowed lists, for every package under internal/, what it may import directly besides the standard
// library: weir packages by their path in the module, other modules' packages by import path, each
// matched exactly (a subpackage needs its own entry). Lower layers never import higher ones. Only
// non-test files count: a test may reach up to drive its package from above.
//
// A package under internal/ that is not in the table fails the test until it is given an entry.
var allowed = map[string][]string{
	"internal/clock":  nil,
	"internal/record": nil,
	"internal/vfs":    nil,
	// console is static files; the page reaches the node only through the HTTP API.
	"internal/console": nil,
	// acl is the pure access-control model: bindings, filters, decisions.
	"internal/acl": nil,

	"internal/clock/clocktest": nil,
	// sasl is pure: the SASL mechanisms' messages and SCRAM credentials on the standard library.
	"internal/sasl": nil,
	// tlstest makes throwaway certificates for tests; freeport picks their loopback ports.
	"internal/tlstest":           {"internal/vfs"},
	"internal/freeport":          {"internal/vfs"},
	"internal/record/recordtest": {"internal/record"},
	"internal/compress": {
		"github.com/klauspost/compress/gzip",
		"github.com/klauspost/compress/snappy",
		"github.com/klauspost/compress/zstd",
		"github.com/pierrec/lz4/v4",
	},
	"internal/storage": {"internal/clock", "internal/compress", "internal/record", "internal/vfs"},
	// share is the pure core of share groups (docs/queues.md): state machines and their records.
	"internal/share": nil,
	// delay is the core of delay topics (docs/queues.md): the index, its progress and the releaser's
	// loop over a Log interface.
	"internal/delay": nil,
	// sharestate keeps share-partitions' state in __share_group_state through coordshard, placed by
	// group's hash (group.PartitionFor), in share's records.
	"internal/sharestate": {
		"internal/controller", "internal/coordshard", "internal/group", "internal/partition", "internal/record",
		"internal/share",
	},
	"internal/controller": {
		"internal/acl", "internal/vfs",
		"github.com/hashicorp/go-hclog",
		"github.com/hashicorp/raft",
		"github.com/hashicorp/raft-boltdb/v2",
	},
	"internal/partition": {"internal/clock", "internal/controller", "internal/record", "internal/storage", "internal/vfs"},
	// coordshard is the coordinators' shared machinery: an internal topic and an owner goroutine per
	// led partition of it; it knows no record format.
	"internal/coordshard": {"internal/controller", "internal/partition", "internal/storage"},
	// group keeps its offsets and metadata in __consumer_offsets in Kafka's own record formats,
	// which kmsg encodes, and drives share groups' membership (share.Group) on its shards.
	"internal/group": {
		"internal/compress", "internal/controller", "internal/coordshard", "internal/partition", "internal/record",
		"internal/share", kafkaMessages,
	},
	// txn keeps transactional ids in __transaction_state in Kafka's own record formats, which kmsg
	// encodes; it places ids with group's hash (group.PartitionFor).
	"internal/txn": {
		"internal/controller", "internal/coordshard", "internal/group", "internal/partition", "internal/record",
		kafkaMessages,
	},
	// wire's client authenticates with a franz-go SASL mechanism (docs/security.md, Node to node).
	"internal/kafka/wire": {"internal/clock", kafkaMessages, "github.com/twmb/franz-go/pkg/sasl"},
	"internal/kafka/api": {
		"internal/acl", "internal/compress", "internal/controller", "internal/delay", "internal/group", "internal/kafka/wire", "internal/partition", "internal/record",
		"internal/sasl", "internal/share", "internal/sharestate", "internal/storage", "internal/txn",
		kafkaCodes, kafkaMessages,
	},
	// httpapi is a Kafka client of its own node (docs/http.md): it reads the Kafka error codes its node
	// answers, to name them in its JSON errors, and chooses none. It encodes the batches of the
	// publishes its node serves in process (record).
	"internal/httpapi": {
		"internal/acl", "internal/clock", "internal/record",
		"github.com/twmb/franz-go/pkg/kadm", "github.com/twmb/franz-go/pkg/kgo", "github.com/twmb/franz-go/pkg/sasl",
		kafkaCodes, kafkaMessages,
	},
	"internal/server": {
		"internal/acl", "internal/clock", "internal/console", "internal/controller", "internal/group", "internal/httpapi", "internal/kafka/api", "internal/kafka/wire",
		"internal/partition", "internal/sasl", "internal/share", "internal/sharestate", "internal/storage", "internal/txn", "internal/vfs",
		"github.com/prometheus/client_golang/prometheus",
		"github.com/prometheus/client_golang/prometheus/collectors",
		"github.com/prometheus/client_golang/prometheus/promhttp",
		// the node's SCRAM credentials on a SASL inter-broker listener.
		"github.com/twmb/franz-go/pkg/sasl/scram",
		kafkaMessages,
	},
}

// stdlibOnly packages import nothing outside the standard library: their entries in allowed stay
// empty.
var stdlibOnly = []string{"internal/record", "internal/vfs", "internal/clock", "internal/console", "internal/share", "internal/sasl", "internal/acl", "internal/delay"}

const (
	kafkaCodes    = "github.com/twmb/franz-go/pkg/kerr"
	kafkaMessages = "github.com/twmb/franz-go/pkg/kmsg"
)

// owners names the other modules' packages that belong to one layer alone, and the packages an
// entry of allowed may grant them to: only the Kafka API layer chooses Kafka error codes (the HTTP
// API, a client of it, reads them), and only the controller runs Raft.
var owners = map[string][]string{
	kafkaCodes:                            {"internal/kafka/api", "internal/httpapi"},
	"github.com/hashicorp/raft":           {"internal/controller"},
	"github.com/hashicorp/raft-boltdb/v2": {"internal/controller"},
}

func TestLintLayers(t *testing.T) {
	root := moduleRoot(t)
	seen := map[string]bool{}
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if d.Name() == "testdata" {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(root, path)
		imps, ok := imports(t, root, rel)
		if !ok {
			return nil
		}
		seen[rel] = true
		may, listed := allowed[rel]
		if !listed {
			t.Errorf("%s is not in the allow-list: add it to allowed in internal/lint/layers_test.go with what it may import", rel)
			return nil
		}
		for _, imp := range imps {
			name := strings.TrimPrefix(imp, module)
			if isStdlib(imp) || slices.Contains(may, name) {
				continue
			}
			t.Errorf("%s imports %s, which its entry in allowed does not list (lower layers never import higher ones)", rel, imp)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for pkg, may := range allowed {
		if !seen[pkg] {
			t.Errorf("allowed lists %s, which is not a package: remove its entry", pkg)
		}
		for _, imp := range may {
			if owner, ok := owners[imp]; ok && !slices.Contains(owner, pkg) {
				t.Errorf("allowed lets %s import %s, which belongs to %s alone", pkg, imp, strings.Join(owner, ", "))
			}
		}
	}
	for _, pkg := range stdlibOnly {
		if may, ok := allowed[pkg]; !ok || len(may) > 0 {
			t.Errorf("%s may import only the standard library: its entry in allowed must be there and empty", pkg)
		}
	}
}

// isStdlib reports whether imp is a standard library package: its first element has no dot.
func isStdlib(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	return !strings.Contains(first, ".")
}

// imports lists the non-test imports of the package in dir (relative to the module root), and
// false if the directory holds no Go files but tests (internal/lint itself) or none at all.
func imports(t *testing.T, root, dir string) ([]string, bool) {
	t.Helper()
	p, err := build.ImportDir(filepath.Join(root, dir), 0)
	if err != nil {
		if _, ok := err.(*build.NoGoError); ok {
			return nil, false
		}
		t.Fatalf("%s: %v", dir, err)
	}
	return p.Imports, len(p.GoFiles)+len(p.CgoFiles) > 0
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test's directory")
		}
		dir = parent
	}
}
