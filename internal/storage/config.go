package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/weir-mq/weir/internal/vfs"
)

// FlushPolicy says when appended bytes are made durable (flush.policy).
type FlushPolicy uint8

const (
	// FlushAlways: WaitDurable returns only after the bytes were fdatasync'd, with syncs shared across logs
	// by the Syncer (group commit). The default.
	FlushAlways FlushPolicy = iota
	// FlushInterval: the log is synced asynchronously once FlushInterval has passed since the last sync,
	// checked on Append and Maintain; WaitDurable does not wait.
	FlushInterval
	// FlushNever: the log is synced only when a segment rolls, on Truncate and on Close; WaitDurable does not
	// wait. Weaker durability, opt-in.
	FlushNever
)

// String names the policy as the flush.policy config value does.
func (p FlushPolicy) String() string {
	switch p {
	case FlushAlways:
		return "always"
	case FlushInterval:
		return "interval"
	case FlushNever:
		return "never"
	default:
		return fmt.Sprintf("FlushPolicy(%d)", uint8(p))
	}
}

// ParseFlushPolicy parses "always", "interval" or "never".
func ParseFlushPolicy(s string) (FlushPolicy, error) {
	switch s {
	case "always":
		return FlushAlways, nil
	case "interval":
		return FlushInterval, nil
	case "never":
		return FlushNever, nil
	default:
		return 0, fmt.Errorf("%w: flush policy %q", ErrInvalidConfig, s)
	}
}

// Config is one log's configuration; the names follow Kafka's topic configs.
type Config struct {
	// SegmentBytes is segment.bytes: a segment rolls before it would grow past this. At most 2 GiB − 1.
	SegmentBytes int64
	// SegmentAge is segment.ms: a non-empty segment older than this rolls on the next Append or Maintain.
	SegmentAge time.Duration
	// RetentionBytes is retention.bytes: closed segments are deleted while the log stays at or above this
	// size without them. Negative means unlimited.
	RetentionBytes int64
	// RetentionAge is retention.ms: closed segments whose newest timestamp is older than this are deleted.
	// Negative means unlimited.
	RetentionAge time.Duration
	// MaxBatchBytes is max.message.bytes: the largest batch Append accepts.
	MaxBatchBytes int32
	// IndexIntervalBytes is index.interval.bytes: bytes appended between two index entries.
	IndexIntervalBytes int32
	// Flush is flush.policy; FlushInterval is the period for FlushInterval.
	Flush         FlushPolicy
	FlushInterval time.Duration
	// Delete and Compact are cleanup.policy. Retention applies only with Delete, compaction only with Compact;
	// DeleteRetention (delete.retention.ms) is how long compaction keeps tombstones (docs/storage.md).
	Delete, Compact bool
	DeleteRetention time.Duration
	// LogAppendTime is message.timestamp.type=LogAppendTime: Append stamps every batch with the broker's
	// clock instead of keeping the producer's timestamps.
	LogAppendTime bool
	// MinCompactionLag is min.compaction.lag.ms: compaction never touches a segment holding a record
	// younger than this (by the segment's largest timestamp), so a record stays at least this long.
	MinCompactionLag time.Duration
	// MaxCompactionLag is max.compaction.lag.ms: a dirty segment whose first batch is older than this is
	// compacted even below MinCleanableDirtyRatio, and an active segment of a compacted log rolls at this
	// age if it comes before SegmentAge. Negative or zero means no limit.
	MaxCompactionLag time.Duration
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio: a pass starts when the dirty bytes are more
	// than this share of the cleanable bytes (docs/storage.md, "Compaction").
	MinCleanableDirtyRatio float64
	// SegmentJitter is segment.jitter.ms: each segment rolls by age a random [0, SegmentJitter) earlier
	// than SegmentAge (never more than SegmentAge), drawn from Options.Rand when the segment starts.
	SegmentJitter time.Duration
	// FileDeleteDelay is file.delete.delay.ms: segments deleted by retention or DeleteRecords are renamed
	// <name>.deleted and removed this long after, by Maintain; zero removes them at once.
	FileDeleteDelay time.Duration
	// IndexMaxBytes is segment.index.bytes: the active segment rolls before its offset index would hold
	// more than IndexMaxBytes/8 entries or its time index more than IndexMaxBytes/12. Zero means no cap.
	IndexMaxBytes int32
	// Preallocate is preallocate: the file of every new segment gets SegmentBytes of disk reserved
	// (vfs.File.Allocate), without changing its size.
	Preallocate bool
}

// Defaults, as Kafka's.
const (
	DefaultSegmentBytes       = 1 << 30
	DefaultSegmentAge         = 7 * 24 * time.Hour
	DefaultRetentionAge       = 7 * 24 * time.Hour
	DefaultMaxBatchBytes      = 1048588
	DefaultIndexIntervalBytes = 4096
	DefaultDeleteRetention    = 24 * time.Hour
	DefaultFlushInterval      = time.Second
	DefaultDirtyRatio         = 0.5
	DefaultFileDeleteDelay    = time.Minute
	DefaultIndexMaxBytes      = 10 << 20
)

// DefaultConfig returns Kafka's defaults with the always flush policy.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:       DefaultSegmentBytes,
		SegmentAge:         DefaultSegmentAge,
		RetentionBytes:     -1,
		RetentionAge:       DefaultRetentionAge,
		MaxBatchBytes:      DefaultMaxBatchBytes,
		IndexIntervalBytes: DefaultIndexIntervalBytes,
		Flush:              FlushAlways,
		FlushInterval:      DefaultFlushInterval,
		Delete:             true,
		DeleteRetention:    DefaultDeleteRetention,

		MinCleanableDirtyRatio: DefaultDirtyRatio,
		FileDeleteDelay:        DefaultFileDeleteDelay,
		IndexMaxBytes:          DefaultIndexMaxBytes,
	}
}

// Validate reports a config the log cannot run with.
func (c Config) Validate() error {
	switch {
	case c.SegmentBytes < 1 || c.SegmentBytes > math.MaxInt32:
		return fmt.Errorf("%w: segment bytes %d", ErrInvalidConfig, c.SegmentBytes)
	case c.SegmentAge <= 0:
		return fmt.Errorf("%w: segment age %v", ErrInvalidConfig, c.SegmentAge)
	case c.MaxBatchBytes < 1:
		return fmt.Errorf("%w: max batch bytes %d", ErrInvalidConfig, c.MaxBatchBytes)
	case c.IndexIntervalBytes < 0:
		return fmt.Errorf("%w: index interval bytes %d", ErrInvalidConfig, c.IndexIntervalBytes)
	case c.Flush > FlushNever:
		return fmt.Errorf("%w: flush policy %d", ErrInvalidConfig, c.Flush)
	case c.Flush == FlushInterval && c.FlushInterval <= 0:
		return fmt.Errorf("%w: flush interval %v", ErrInvalidConfig, c.FlushInterval)
	case c.MinCompactionLag < 0:
		return fmt.Errorf("%w: min compaction lag %v", ErrInvalidConfig, c.MinCompactionLag)
	case !(c.MinCleanableDirtyRatio >= 0 && c.MinCleanableDirtyRatio <= 1):
		return fmt.Errorf("%w: min cleanable dirty ratio %v", ErrInvalidConfig, c.MinCleanableDirtyRatio)
	case c.SegmentJitter < 0:
		return fmt.Errorf("%w: segment jitter %v", ErrInvalidConfig, c.SegmentJitter)
	case c.FileDeleteDelay < 0:
		return fmt.Errorf("%w: file delete delay %v", ErrInvalidConfig, c.FileDeleteDelay)
	case c.IndexMaxBytes < 0:
		return fmt.Errorf("%w: index max bytes %d", ErrInvalidConfig, c.IndexMaxBytes)
	}
	return nil
}

// Clock tells the time; tests inject a fake one.
type Clock interface{ Now() time.Time }

// Options are a log's collaborators.
type Options struct {
	// FS is the filesystem; nil means vfs.OS.
	FS vfs.FS
	// Clock is the time source; nil means the wall clock.
	Clock Clock
	// Syncer batches fsyncs of every log in one data directory; nil gives the log a private one.
	Syncer *Syncer
	// Logger receives recovery and fault messages; nil means slog.Default().
	Logger *slog.Logger
	// Rand draws each segment's segment.jitter.ms; nil means a source seeded from the clock and the
	// directory. The log uses it only under its lock.
	Rand *rand.Rand
}

// Errors returned by Log methods.
var (
	// ErrOffsetOutOfRange is returned by Read, AdvanceStart and ScanBatches for offsets outside
	// [StartOffset, EndOffset].
	ErrOffsetOutOfRange = errors.New("storage: offset out of range")
	// ErrBatchTooLarge is returned by Append for a batch larger than MaxBatchBytes (MESSAGE_TOO_LARGE).
	ErrBatchTooLarge = errors.New("storage: batch larger than max.message.bytes")
	// ErrLogOffline wraps the write or fsync failure that took the log offline; every later write and
	// WaitDurable returns it. Reopening the log is the only way back.
	ErrLogOffline = errors.New("storage: log offline")
	// ErrClosed is returned by every method after Close.
	ErrClosed = errors.New("storage: log closed")
	// ErrCorruption marks errors caused by damaged files; test with errors.Is.
	ErrCorruption = errors.New("storage: corruption")
	// ErrStaleLeaderEpoch is returned by Append and AppendAsFollower for a leader epoch below the latest one
	// in the epoch cache.
	ErrStaleLeaderEpoch = errors.New("storage: leader epoch below the latest")
	// ErrOffsetNotMonotonic is returned by AppendAsFollower when a batch's base offset is below the log end.
	ErrOffsetNotMonotonic = errors.New("storage: batch offset below log end")
	// ErrInvalidConfig is returned by Open and SetConfig for a config Validate rejects.
	ErrInvalidConfig = errors.New("storage: invalid config")
)
