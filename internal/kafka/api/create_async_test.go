package api_test

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/vfs"
)

// TestAPICreationInTheBackground: a topic's replicas are opened in the background, after CreateTopics has
// answered; while they are being opened the node goes on answering other admin calls, and deleting the
// topic cancels the creations still pending instead of finishing them first. The data directory is an
// in-memory filesystem whose first replica creation of the big topic blocks until the test releases it.
func TestAPICreationInTheBackground(t *testing.T) {
	mem := vfs.NewMem()
	release := make(chan struct{})
	var blocked sync.Once
	var bigDirs atomic.Int64
	inj := vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if op == vfs.OpMkdirAll && strings.Contains(path, "/big-") && !strings.HasSuffix(path, "-delete") {
			bigDirs.Add(1)
			blocked.Do(func() { <-release })
		}
		return nil
	})
	dir := t.TempDir() // the controller's Raft store is on the real disk, the logs in memory
	cfg := nodeConfig(dir)
	cfg.FS = vfs.NewFaulty(mem, inj)
	n := startNodeWith(t, cfg)
	adm := newAdmin(t, n)
	ctx := testCtx(t)

	const partitions = 2000
	createTopic(t, adm, "big", partitions, nil)
	// the pass opening big's replicas is blocked on its first one: admin calls are answered all the same
	createTopic(t, adm, "small", 1, nil)
	if _, err := adm.ListTopics(ctx); err != nil {
		t.Fatalf("ListTopics during the creation: %v", err)
	}
	resp, err := adm.DeleteTopics(ctx, "big")
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("deleting the topic being created: %v", err)
	}
	close(release)

	cl := newClient(t, n, kgo.DefaultProduceTopic("small"))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce to the small topic: %v", err)
	}
	deadline := time.Now().Add(testTimeout)
	for {
		names, err := mem.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		left := 0
		for _, name := range names {
			if strings.HasPrefix(name, "big-") {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d directories of the deleted topic are left", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if made := bigDirs.Load(); made >= partitions {
		t.Fatalf("all %d replicas of the deleted topic were created before it was deleted", made)
	}
}
