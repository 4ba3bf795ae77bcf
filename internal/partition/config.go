package partition

import (
	"math"
	"time"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/storage"
)

// StorageConfig turns a topic's resolved configs into its logs' storage config.
func StorageConfig(lc controller.LogConfig) storage.Config {
	cfg := storage.DefaultConfig()
	cfg.SegmentBytes = int64(max(lc.SegmentBytes, 1))
	cfg.SegmentAge = millis(max(lc.SegmentMs, 1))
	cfg.RetentionBytes = lc.RetentionBytes
	cfg.RetentionAge = -1
	if lc.RetentionMs >= 0 {
		cfg.RetentionAge = millis(lc.RetentionMs)
	}
	// max.message.bytes=0 is valid in Kafka and refuses every batch; storage wants at least 1, which
	// refuses every batch too (a batch header alone is 61 bytes).
	cfg.MaxBatchBytes = max(lc.MaxMessageBytes, 1)
	switch lc.FlushPolicy {
	case controller.FlushInterval:
		cfg.Flush = storage.FlushInterval
	case controller.FlushNever:
		cfg.Flush = storage.FlushNever
	default:
		cfg.Flush = storage.FlushAlways
	}
	cfg.FlushInterval = millis(max(lc.FlushMs, 1))
	cfg.Delete = lc.CleanupDelete
	cfg.Compact = lc.CleanupCompact
	cfg.DeleteRetention = millis(lc.DeleteRetentionMs)
	cfg.LogAppendTime = lc.TimestampType == controller.LogAppendTime
	cfg.MinCompactionLag = millis(lc.MinCompactionLagMs)
	cfg.MaxCompactionLag = millis(lc.MaxCompactionLagMs)
	cfg.MinCleanableDirtyRatio = lc.MinCleanableDirtyRatio
	cfg.SegmentJitter = millis(lc.SegmentJitterMs)
	cfg.FileDeleteDelay = millis(lc.FileDeleteDelayMs)
	cfg.IndexIntervalBytes = lc.IndexIntervalBytes
	cfg.IndexMaxBytes = lc.SegmentIndexBytes
	cfg.Preallocate = lc.Preallocate
	return cfg
}

// millis converts milliseconds to a Duration, saturating instead of overflowing.
func millis(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}
