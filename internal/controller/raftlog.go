package controller

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// raftLogger is the hclog.Logger that hashicorp/raft and its transport and snapshot store log
// through: each line becomes one slog record at the mapped level, with raft's key-value pairs as
// attributes and the logger's name as "component". slog's handler stamps the time and level, so
// none appears inside the message.
//
// Raft warns "heartbeat timeout reached, starting election" whenever a voter has heard from no
// leader for a heartbeat timeout, including at every start, before any leader exists. With no
// last leader (an empty last-leader-id) that election is the ordinary first one, and it is logged
// at Info; after a leader was lost it stays a warning.
type raftLogger struct {
	log   *slog.Logger
	name  string
	args  []any
	level *atomic.Int32 // an hclog.Level, shared with the loggers derived by With and Named
}

// newRaftLogger returns the logger raft logs through, passing levels from least upwards to sl.
func newRaftLogger(sl *slog.Logger, least hclog.Level) *raftLogger {
	l := &raftLogger{log: sl, name: "raft", level: new(atomic.Int32)}
	l.level.Store(int32(least))
	return l
}

// slogLevel maps an hclog level onto slog's: Trace lies below slog's Debug, the others match.
func slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

// routineRaftWarning reports whether a raft warning is an ordinary event of a start (see raftLogger).
func routineRaftWarning(msg string, args []any) bool {
	if msg != "heartbeat timeout reached, starting election" {
		return false
	}
	for i := 0; i+1 < len(args); i += 2 {
		if args[i] == "last-leader-id" {
			return fmt.Sprint(args[i+1]) == ""
		}
	}
	return false
}

func (l *raftLogger) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off || level < l.GetLevel() {
		return
	}
	if level == hclog.Warn && routineRaftWarning(msg, args) {
		level = hclog.Info
	}
	sl := slogLevel(level)
	ctx := context.Background()
	if !l.log.Enabled(ctx, sl) {
		return
	}
	attrs := make([]any, 0, 2+len(l.args)+len(args))
	attrs = append(attrs, "component", l.name)
	attrs = append(attrs, l.args...)
	for _, a := range args {
		if f, ok := a.(hclog.Format); ok && len(f) > 0 {
			a = fmt.Sprintf(fmt.Sprint(f[0]), f[1:]...)
		}
		attrs = append(attrs, a)
	}
	l.log.Log(ctx, sl, msg, attrs...)
}

func (l *raftLogger) Trace(msg string, args ...any) { l.Log(hclog.Trace, msg, args...) }
func (l *raftLogger) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }
func (l *raftLogger) Info(msg string, args ...any)  { l.Log(hclog.Info, msg, args...) }
func (l *raftLogger) Warn(msg string, args ...any)  { l.Log(hclog.Warn, msg, args...) }
func (l *raftLogger) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

func (l *raftLogger) enabled(level hclog.Level) bool {
	return level >= l.GetLevel() && l.log.Enabled(context.Background(), slogLevel(level))
}

func (l *raftLogger) IsTrace() bool { return l.enabled(hclog.Trace) }
func (l *raftLogger) IsDebug() bool { return l.enabled(hclog.Debug) }
func (l *raftLogger) IsInfo() bool  { return l.enabled(hclog.Info) }
func (l *raftLogger) IsWarn() bool  { return l.enabled(hclog.Warn) }
func (l *raftLogger) IsError() bool { return l.enabled(hclog.Error) }

func (l *raftLogger) ImpliedArgs() []any { return l.args }

func (l *raftLogger) With(args ...any) hclog.Logger {
	c := *l
	c.args = append(append([]any(nil), l.args...), args...)
	return &c
}

func (l *raftLogger) Name() string { return l.name }

func (l *raftLogger) Named(name string) hclog.Logger {
	c := *l
	c.name = l.name + "." + name
	return &c
}

func (l *raftLogger) ResetNamed(name string) hclog.Logger {
	c := *l
	c.name = name
	return &c
}

func (l *raftLogger) SetLevel(level hclog.Level) { l.level.Store(int32(level)) }

func (l *raftLogger) GetLevel() hclog.Level { return hclog.Level(l.level.Load()) }

func (l *raftLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(l.StandardWriter(opts), "", 0)
}

func (l *raftLogger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	level := hclog.Info
	if opts != nil && opts.ForceLevel != hclog.NoLevel {
		level = opts.ForceLevel
	}
	return raftWriter{l: l, level: level}
}

// raftWriter logs each line written to it at one level, for code that takes a standard library
// logger.
type raftWriter struct {
	l     *raftLogger
	level hclog.Level
}

func (w raftWriter) Write(p []byte) (int, error) {
	for line := range bytes.Lines(p) {
		if msg := strings.TrimSpace(string(line)); msg != "" {
			w.l.Log(w.level, msg)
		}
	}
	return len(p), nil
}
