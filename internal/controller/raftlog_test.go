package controller

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// recorded is one slog record as a recordingHandler saw it.
type recorded struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

// recordingHandler keeps every record at or above its level.
type recordingHandler struct {
	level slog.Level
	mu    sync.Mutex
	recs  []recorded
}

func (h *recordingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	rec := recorded{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	h.recs = append(h.recs, rec)
	h.mu.Unlock()
	return nil
}

func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { panic("not used") }
func (h *recordingHandler) WithGroup(string) slog.Handler      { panic("not used") }

func (h *recordingHandler) take() []recorded {
	h.mu.Lock()
	defer h.mu.Unlock()
	recs := h.recs
	h.recs = nil
	return recs
}

// TestControllerRaftLogger: raft's hclog lines reach slog at the mapped level, with the message as
// raft wrote it (no second timestamp or level inside), the key-value pairs as attributes and the
// logger's name as component; levels below the threshold are dropped, and the first election of a
// start is Info, not a warning.
func TestControllerRaftLogger(t *testing.T) {
	h := &recordingHandler{level: slog.LevelDebug - 4}
	l := newRaftLogger(slog.New(h), hclog.Trace)
	for _, tc := range []struct {
		name string
		log  func()
		want []recorded
	}{
		{
			name: "levels",
			log: func() {
				l.Trace("t", "k", 1)
				l.Debug("d")
				l.Info("i")
				l.Warn("w", "peer", "2", "err", fmt.Errorf("boom"))
				l.Error("e")
			},
			want: []recorded{
				{level: slog.LevelDebug - 4, msg: "t", attrs: map[string]string{"component": "raft", "k": "1"}},
				{level: slog.LevelDebug, msg: "d", attrs: map[string]string{"component": "raft"}},
				{level: slog.LevelInfo, msg: "i", attrs: map[string]string{"component": "raft"}},
				{level: slog.LevelWarn, msg: "w", attrs: map[string]string{"component": "raft", "peer": "2", "err": "boom"}},
				{level: slog.LevelError, msg: "e", attrs: map[string]string{"component": "raft"}},
			},
		},
		{
			name: "with and named",
			log: func() {
				l.Named("snapshot").With("id", "1-2-3").Info("creating new snapshot", "path", "/x", "n", hclog.Fmt("%d%%", 5))
			},
			want: []recorded{{level: slog.LevelInfo, msg: "creating new snapshot",
				attrs: map[string]string{"component": "raft.snapshot", "id": "1-2-3", "path": "/x", "n": "5%"}}},
		},
		{
			name: "first election",
			log: func() {
				l.Warn("heartbeat timeout reached, starting election", "last-leader-addr", "", "last-leader-id", "")
				l.Warn("heartbeat timeout reached, starting election", "last-leader-addr", "h:1", "last-leader-id", "2")
			},
			want: []recorded{
				{level: slog.LevelInfo, msg: "heartbeat timeout reached, starting election",
					attrs: map[string]string{"component": "raft", "last-leader-addr": "", "last-leader-id": ""}},
				{level: slog.LevelWarn, msg: "heartbeat timeout reached, starting election",
					attrs: map[string]string{"component": "raft", "last-leader-addr": "h:1", "last-leader-id": "2"}},
			},
		},
		{
			name: "standard logger",
			log: func() {
				l.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Error}).Print("bolt: closed\n")
			},
			want: []recorded{{level: slog.LevelError, msg: "bolt: closed", attrs: map[string]string{"component": "raft"}}},
		},
		{
			name: "below the threshold",
			log: func() {
				l.SetLevel(hclog.Warn)
				defer l.SetLevel(hclog.Trace)
				l.Info("dropped")
				l.Warn("kept")
				if l.IsInfo() || !l.IsWarn() {
					t.Errorf("IsInfo %v, IsWarn %v at level Warn", l.IsInfo(), l.IsWarn())
				}
			},
			want: []recorded{{level: slog.LevelWarn, msg: "kept", attrs: map[string]string{"component": "raft"}}},
		},
	} {
		tc.log()
		if got := h.take(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}
