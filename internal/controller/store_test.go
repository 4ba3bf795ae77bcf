package controller

import (
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/vfs"
)

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

var (
	testClock = fixedClock{time.UnixMilli(1_700_000_000_000)}
	self      = Broker{NodeID: 1, Host: "localhost", Port: 9092}
)

func openStore(t *testing.T, fsys vfs.FS) *Store {
	t.Helper()
	s, err := OpenLocal(fsys, "/data/controller", self, testClock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestControllerStoreLifecycle(t *testing.T) {
	fsys := vfs.NewMem()
	s := openStore(t, fsys)
	ctx := context.Background()
	img := s.Image()
	if img.ClusterID == "" || img.ControllerID != 1 || len(img.Brokers) != 1 || !sameAddress(img.Brokers[0], self) {
		t.Fatalf("fresh image %+v", img)
	}
	ch, unsubscribe := s.Subscribe()
	defer unsubscribe()

	tp, err := s.CreateTopic(ctx, "orders", 3, map[string]string{"retention.ms": "1000"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if tp.ID.IsZero() || tp.Partitions != 3 || tp.CreatedMs != testClock.t.UnixMilli() {
		t.Fatalf("topic %+v", tp)
	}
	select {
	case <-ch:
	default:
		t.Fatal("no notification after CreateTopic")
	}
	if _, err := s.CreateTopic(ctx, "orders", 1, nil, false); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("second create: %v", err)
	}
	if _, err := s.CreateTopic(ctx, "dry", 1, nil, true); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Image().Topic("dry"); ok {
		t.Fatal("validateOnly created the topic")
	}
	select {
	case <-ch:
		t.Fatal("notification without a change")
	default:
	}
	def, err := s.CreateTopic(ctx, "defaulted", -1, nil, false)
	if err != nil || def.Partitions != 1 {
		t.Fatalf("default partitions: %+v %v", def, err)
	}
	if err := s.CreatePartitions(ctx, "orders", 5, false); err != nil {
		t.Fatal(err)
	}
	if err := s.AlterConfigs(ctx, "orders", map[string]string{"segment.bytes": "1024"}, []string{"retention.ms"}, false); err != nil {
		t.Fatal(err)
	}
	if err := s.AlterBrokerConfigs(ctx, map[string]string{"num.partitions": "4"}, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := s.AlterConfigs(ctx, "orders", map[string]string{"segment.bytes": "x"}, nil, false); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("bad config: %v", err)
	}
	first, err := s.AllocateProducerIDs(ctx, 1000)
	if err != nil || first != 0 {
		t.Fatalf("first block %d %v", first, err)
	}
	if err := s.DeleteTopic(ctx, "defaulted"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateInternalTopic(ctx, "__consumer_offsets", 50, map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTopic(ctx, "__consumer_offsets"); !errors.Is(err, ErrInternalTopic) {
		t.Fatalf("delete internal: %v", err)
	}
	want := s.Image()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AllocateProducerIDs(ctx, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: %v", err)
	}

	// Only synced state survives a power loss; every change above was acknowledged, so all of it must.
	crashed := fsys.CrashClone(rand.New(rand.NewPCG(1, 2)), vfs.CrashOptions{})
	s2 := openStore(t, crashed)
	got := s2.Image()
	if got.ClusterID != want.ClusterID || got.Version != want.Version || got.NextProducerID != 1000 {
		t.Fatalf("reopened image %+v, want %+v", got, want)
	}
	o, ok := got.Topic("orders")
	if !ok || o.ID != want.Topics["orders"].ID || o.Partitions != 5 || len(o.Configs) != 1 || o.Configs["segment.bytes"] != "1024" {
		t.Fatalf("orders after reopen %+v", o)
	}
	if _, ok := got.TopicByID(o.ID); !ok {
		t.Fatal("TopicByID after reopen")
	}
	if _, ok := got.Topic("defaulted"); ok {
		t.Fatal("deleted topic came back")
	}
	if got.DefaultPartitions() != 4 || !got.Topics["__consumer_offsets"].Internal {
		t.Fatal("broker config or internal flag lost")
	}
	next, err := s2.AllocateProducerIDs(ctx, 10)
	if err != nil || next != 1000 {
		t.Fatalf("block after reopen %d %v", next, err)
	}
}

func TestControllerStoreReregistersMovedBroker(t *testing.T) {
	fsys := vfs.NewMem()
	s := openStore(t, fsys)
	v := s.Image().Version
	_ = s.Close()
	moved := self
	moved.Port = 19092
	s2, err := OpenLocal(fsys, "/data/controller", moved, testClock)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if b, _ := s2.Image().Broker(1); !sameAddress(b, moved) || s2.Image().Version != v+1 {
		t.Fatalf("broker %+v version %d", b, s2.Image().Version)
	}
}

// TestControllerStoreWriteLocal: an image built with Apply and written with WriteLocal is what
// OpenLocal opens, unchanged (no re-registration) when it holds self at its address.
func TestControllerStoreWriteLocal(t *testing.T) {
	img := NewImage("seeded", 1)
	var err error
	for _, c := range []Command{
		RegisterBroker{Broker: self},
		RegisterBroker{Broker: Broker{NodeID: 2, Host: "other", Port: 9092}},
		CreateTopic{Name: "t", ID: TopicID{1}, Partitions: 4, ReplicationFactor: 2},
	} {
		if img, err = Apply(img, c); err != nil {
			t.Fatal(err)
		}
	}
	fsys := vfs.NewMem()
	if err := WriteLocal(fsys, "/data/controller", img); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, fsys)
	got := s.Image()
	if got.ClusterID != "seeded" || got.Version != img.Version || len(got.Brokers) != 2 {
		t.Fatalf("opened image: cluster %q version %d brokers %+v, want seeded, %d, 2 brokers", got.ClusterID, got.Version, got.Brokers, img.Version)
	}
	topic, ok := got.TopicByID(TopicID{1})
	if !ok || topic.Name != "t" || len(topic.States) != 4 || len(topic.States[0].Replicas) != 2 {
		t.Fatalf("opened topic %+v (found %v), want t with 4 partitions of 2 replicas", topic, ok)
	}
}

func TestControllerStoreCorruptFile(t *testing.T) {
	for name, content := range map[string]string{
		"not json":     "{{{",
		"bad checksum": `{"format":1,"crc32c":1,"image":{}}`,
		"bad format":   `{"format":9,"crc32c":0,"image":{}}`,
		"empty":        "",
	} {
		t.Run(name, func(t *testing.T) {
			fsys := vfs.NewMem()
			if err := fsys.MkdirAll("/c"); err != nil {
				t.Fatal(err)
			}
			f, err := fsys.Create(filepath.Join("/c", metadataFile))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write([]byte(content)); err != nil {
				t.Fatal(err)
			}
			_ = f.Close()
			if _, err := OpenLocal(fsys, "/c", self, testClock); !errors.Is(err, ErrCorruptMetadata) {
				t.Fatalf("OpenLocal: %v", err)
			}
		})
	}
}

func TestControllerDecodeRejectsInvalidImage(t *testing.T) {
	img, err := applyAll(CreateTopic{Name: "a", ID: idA, Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	bad := *img
	bad.Topics = map[string]*Topic{"a": {Name: "a", ID: idA, Partitions: 0}}
	s := &Store{fs: vfs.NewMem(), dir: "/c"}
	if err := s.fs.MkdirAll("/c"); err != nil {
		t.Fatal(err)
	}
	if err := s.persist(&bad); err != nil {
		t.Fatal(err)
	}
	if _, err := s.load(); !errors.Is(err, ErrCorruptMetadata) {
		t.Fatalf("load of a zero-partition topic: %v", err)
	}
}

func TestControllerStoreWriteFailureIsFatal(t *testing.T) {
	toggle := vfs.NewToggle(vfs.OnOp(vfs.OpSync, metadataTmpFile, nil))
	fsys := vfs.NewFaulty(vfs.NewMem(), toggle)
	s := openStore(t, fsys)
	ctx := context.Background()
	toggle.Enable()
	if _, err := s.CreateTopic(ctx, "a", 1, nil, false); err == nil {
		t.Fatal("create succeeded with failing fsync")
	}
	if _, ok := s.Image().Topic("a"); ok {
		t.Fatal("failed change published")
	}
	toggle.Disable()
	if _, err := s.CreateTopic(ctx, "b", 1, nil, false); !errors.Is(err, ErrFailed) {
		t.Fatalf("command after failed write: %v", err)
	}
}

func TestControllerStoreConcurrentCommands(t *testing.T) {
	s := openStore(t, vfs.NewMem())
	ctx := context.Background()
	var wg sync.WaitGroup
	firsts := make([]int64, 8)
	for i := range firsts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := s.AllocateProducerIDs(ctx, 10)
			if err != nil {
				t.Error(err)
			}
			firsts[i] = f
		}()
	}
	wg.Wait()
	seen := map[int64]bool{}
	for _, f := range firsts {
		if f%10 != 0 || seen[f] {
			t.Fatalf("blocks overlap: %v", firsts)
		}
		seen[f] = true
	}
	if s.Image().NextProducerID != 80 {
		t.Fatalf("next %d", s.Image().NextProducerID)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	s.turn <- struct{}{}
	if _, err := s.AllocateProducerIDs(cctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	<-s.turn
}

func TestControllerTopicIDText(t *testing.T) {
	id := TopicID{0xfb, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	b, _ := id.MarshalText()
	var back TopicID
	if err := back.UnmarshalText(b); err != nil || back != id || len(b) != 22 {
		t.Fatalf("round trip %q -> %v %v", b, back, err)
	}
	// Too long decodes past 16 bytes: refused, not a panic (a corrupt partition.metadata file, a
	// client's share-partition key).
	for _, bad := range []string{"short", string(b) + "A", string(b) + "AAAA", string(b[:21]) + "!"} {
		if err := back.UnmarshalText([]byte(bad)); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}
