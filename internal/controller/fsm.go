package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// applyResult is what fsm.Apply returns to the proposer through raft's ApplyFuture.
type applyResult struct {
	next *Image
	// firstProducerID is the image's NextProducerID before the command: the first id of an
	// AllocateProducerIDs block.
	firstProducerID int64
	err             error
}

// fsm is the raft.FSM over Apply. Apply decodes a committed entry and applies it; a command that
// does not decode or that Apply rejects leaves the image as it was, identically on every node.
// Each change is published through publish (an atomic pointer store plus subscriber notification).
type fsm struct {
	cur     atomic.Pointer[Image]
	publish func(*Image)

	applied atomic.Uint64
	mu      sync.Mutex
	// changed is closed and replaced after every applied index (a broadcast to waitApplied).
	changed chan struct{}
}

func newFSM(initial *Image, publish func(*Image)) *fsm {
	f := &fsm{publish: publish, changed: make(chan struct{})}
	f.cur.Store(initial)
	return f
}

// Apply implements raft.FSM.
func (f *fsm) Apply(l *raft.Log) any {
	defer f.advance(l.Index)
	if l.Type != raft.LogCommand {
		return nil
	}
	cur := f.cur.Load()
	res := &applyResult{next: cur, firstProducerID: cur.NextProducerID}
	cmd, err := DecodeCommand(l.Data)
	if err != nil {
		res.err = err
		return res
	}
	next, err := Apply(cur, cmd)
	if err != nil {
		res.err = err
		return res
	}
	res.next = next
	f.cur.Store(next)
	f.publish(next)
	return res
}

// advance records that every command up to index has been applied and wakes waiters. Apply runs on
// raft's FSM goroutine only, so the image and the index move together.
func (f *fsm) advance(index uint64) {
	f.mu.Lock()
	if index > f.applied.Load() {
		f.applied.Store(index)
	}
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

// waitApplied returns once index has been applied locally, or the context ends.
func (f *fsm) waitApplied(ctx context.Context, index uint64) error {
	for {
		f.mu.Lock()
		ch := f.changed
		done := f.applied.Load() >= index
		f.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: waiting for index %d: %w", ErrTimeout, index, ctx.Err())
		}
	}
}

// Snapshot implements raft.FSM: it captures the current image, which is immutable; Persist encodes
// it off the apply goroutine.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	return &fsmSnapshot{img: f.cur.Load(), index: f.applied.Load()}, nil
}

// Restore implements raft.FSM: it replaces the image with the one in the snapshot.
// The snapshot encoding is the metadata file's envelope (format, checksum, image) plus the index.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxMetadataBytes+1))
	if err != nil {
		return fmt.Errorf("controller: read snapshot: %w", err)
	}
	if len(data) > maxMetadataBytes {
		return fmt.Errorf("%w: snapshot above %d bytes", ErrCorruptMetadata, maxMetadataBytes)
	}
	index, img, err := decodeSnapshot(data)
	if err != nil {
		return err
	}
	f.cur.Store(img)
	f.publish(img)
	f.advance(index)
	return nil
}

type fsmSnapshot struct {
	img *Image
	// index is the last command index applied into img.
	index uint64
}

// Persist implements raft.FSMSnapshot.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	data, err := encodeSnapshot(s.index, s.img)
	if err == nil {
		_, err = sink.Write(data)
	}
	if err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("controller: persist snapshot: %w", err)
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot.
func (*fsmSnapshot) Release() {}

type snapshotEnvelope struct {
	Index uint64 `json:"index"`
	metadataEnvelope
}

func encodeSnapshot(index uint64, img *Image) ([]byte, error) {
	data, err := encodeImage(img)
	if err != nil {
		return nil, err
	}
	var env snapshotEnvelope
	if err := json.Unmarshal(data, &env.metadataEnvelope); err != nil {
		return nil, fmt.Errorf("controller: encode snapshot: %w", err)
	}
	env.Index = index
	return json.Marshal(env)
}

func decodeSnapshot(data []byte) (uint64, *Image, error) {
	var env snapshotEnvelope
	if err := json.Unmarshal(data, &env); err != nil {
		return 0, nil, fmt.Errorf("%w: snapshot: %w", ErrCorruptMetadata, err)
	}
	inner, err := json.Marshal(env.metadataEnvelope)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: snapshot: %w", ErrCorruptMetadata, err)
	}
	img, err := decodeMetadata(inner)
	if err != nil {
		return 0, nil, err
	}
	return env.Index, img, nil
}
