// Package lint holds tests that check the code base itself: the layering ARCHITECTURE.md draws.
package lint

import (
	"go/build"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/weir-mq/weir/"

// layers lists, for each package, the weir packages it must never import (directly). Lower layers
// never import higher ones; record and vfs import only the standard library (checked separately).
var layers = map[string][]string{
	"internal/storage":    {"internal/partition", "internal/controller", "internal/group", "internal/kafka", "internal/server"},
	"internal/compress":   {"internal/storage", "internal/partition", "internal/controller", "internal/group", "internal/kafka", "internal/server"},
	"internal/partition":  {"internal/group", "internal/kafka", "internal/server"},
	"internal/controller": {"internal/partition", "internal/group", "internal/kafka", "internal/server", "internal/storage"},
	"internal/group":      {"internal/kafka", "internal/server"},
	"internal/kafka/wire": {"internal/kafka/api", "internal/server", "internal/partition", "internal/storage", "internal/controller", "internal/group"},
	"internal/kafka/api":  {"internal/server"},
}

// stdlibOnly packages may import nothing outside the standard library.
var stdlibOnly = []string{"internal/record", "internal/vfs", "internal/clock"}

// kafkaCodes may be imported, among internal packages, only by the Kafka API layer: it alone chooses
// Kafka error codes.
const kafkaCodes = "github.com/twmb/franz-go/pkg/kerr"

func TestLintLayers(t *testing.T) {
	root := moduleRoot(t)
	for pkg, banned := range layers {
		for _, imp := range imports(t, root, pkg) {
			for _, b := range banned {
				if imp == module+b || strings.HasPrefix(imp, module+b+"/") {
					t.Errorf("%s imports %s: a lower layer must not import a higher one", pkg, imp)
				}
			}
		}
	}
	for _, pkg := range stdlibOnly {
		for _, imp := range imports(t, root, pkg) {
			if first := strings.Split(imp, "/")[0]; strings.Contains(first, ".") {
				t.Errorf("%s imports %s: it may import only the standard library", pkg, imp)
			}
		}
	}
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if rel == "internal/kafka/api" || rel == "internal/lint" {
			return nil
		}
		for _, imp := range imports(t, root, rel) {
			if imp == kafkaCodes {
				t.Errorf("%s imports %s: only internal/kafka/api chooses Kafka error codes", rel, imp)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// imports lists the non-test imports of the package in dir (relative to the module root); none if the
// directory holds no Go package.
func imports(t *testing.T, root, dir string) []string {
	t.Helper()
	p, err := build.ImportDir(filepath.Join(root, dir), 0)
	if err != nil {
		if _, ok := err.(*build.NoGoError); ok {
			return nil
		}
		t.Fatalf("%s: %v", dir, err)
	}
	return p.Imports
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
