package storage

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/weir-mq/weir/internal/vfs"
)

// Names of the small files in a log directory (docs/storage.md).
const (
	epochCheckpointName    = "leader-epoch-checkpoint"
	startCheckpointName    = "log-start-offset-checkpoint"
	recoveryCheckpointName = "recovery-point-checkpoint"
	cleanShutdownName      = "clean-shutdown"
	checkpointVersion      = "0"
	maxCheckpointBytes     = 1 << 20
)

// writeFileAtomic writes data to name through name.tmp: write, fdatasync, rename, directory sync.
func writeFileAtomic(fsys vfs.FS, dir, name string, data []byte) error {
	if err := writeRenamed(fsys, filepath.Join(dir, name), data); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

// writeRenamed writes data to path through path.tmp (write, fdatasync, rename), so that path holds either its
// old content or all of data. The rename is durable once the caller syncs the directory.
func writeRenamed(fsys vfs.FS, path string, data []byte) error {
	tmp := path + tmpSuffix
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close() // the write error is the one to report
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close() // the sync error is the one to report
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return fsys.Rename(tmp, path)
}

// readCheckpoint returns the lines of a checkpoint file after its version line.
func readCheckpoint(fsys vfs.FS, path string) ([]string, error) {
	b, err := readWhole(fsys, path)
	if err != nil {
		return nil, err
	}
	if len(b) > maxCheckpointBytes {
		return nil, fmt.Errorf("%w: checkpoint %s of %d bytes", ErrCorruption, path, len(b))
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) == 0 || lines[0] != checkpointVersion {
		return nil, fmt.Errorf("%w: checkpoint %s: bad version line", ErrCorruption, path)
	}
	return lines[1:], nil
}

func parseInts(line string, n int) ([]int64, error) {
	fields := strings.Fields(line)
	if len(fields) != n {
		return nil, fmt.Errorf("%w: checkpoint line %q", ErrCorruption, line)
	}
	out := make([]int64, n)
	for i, f := range fields {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: checkpoint line %q", ErrCorruption, line)
		}
		out[i] = v
	}
	return out, nil
}

// readOffsetCheckpoint reads a checkpoint holding one line of n integers.
func readOffsetCheckpoint(fsys vfs.FS, path string, n int) ([]int64, error) {
	lines, err := readCheckpoint(fsys, path)
	if err != nil {
		return nil, err
	}
	if len(lines) != 1 {
		return nil, fmt.Errorf("%w: checkpoint %s: %d lines", ErrCorruption, path, len(lines))
	}
	return parseInts(lines[0], n)
}

func formatInts(vals ...int64) []byte {
	var b bytes.Buffer
	b.WriteString(checkpointVersion + "\n")
	for i, v := range vals {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatInt(v, 10))
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// epochEntry says leader epoch epoch starts at offset start.
type epochEntry struct {
	epoch int32
	start int64
}

// epochCache is the leader epoch → start offset map, in increasing epoch and offset order. The writer owns it.
type epochCache struct {
	entries []epochEntry
}

func (c *epochCache) latest() int32 {
	if len(c.entries) == 0 {
		return -1
	}
	return c.entries[len(c.entries)-1].epoch
}

// assign records that epoch starts at start if it is newer than the latest; it reports a change.
func (c *epochCache) assign(epoch int32, start int64) bool {
	if epoch < 0 || epoch <= c.latest() {
		return false
	}
	if n := len(c.entries); n > 0 && c.entries[n-1].start >= start {
		c.entries = c.entries[:n-1]
		for len(c.entries) > 0 && c.entries[len(c.entries)-1].start >= start {
			c.entries = c.entries[:len(c.entries)-1]
		}
	}
	c.entries = append(c.entries, epochEntry{epoch: epoch, start: start})
	return true
}

// truncateFromEnd drops the entries starting at or after end.
func (c *epochCache) truncateFromEnd(end int64) bool {
	n := len(c.entries)
	for n > 0 && c.entries[n-1].start >= end {
		n--
	}
	changed := n != len(c.entries)
	c.entries = c.entries[:n]
	return changed
}

// truncateFromStart drops the entries wholly below start and moves the one covering start to start.
func (c *epochCache) truncateFromStart(start int64) bool {
	i := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].start > start })
	if i == 0 {
		return false
	}
	changed := i > 1 || c.entries[i-1].start != start
	kept := append([]epochEntry{{epoch: c.entries[i-1].epoch, start: start}}, c.entries[i:]...)
	c.entries = kept
	return changed
}

// endOffsetFor answers OffsetForLeaderEpoch: the largest epoch at or below epoch and the offset where the
// next epoch starts (the log end for the latest epoch); (-1, -1) if unknown.
func (c *epochCache) endOffsetFor(epoch int32, logEnd int64) (int32, int64) {
	if epoch < 0 || len(c.entries) == 0 {
		return -1, -1
	}
	if epoch == c.latest() {
		return epoch, logEnd
	}
	hi := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].epoch > epoch })
	if hi == len(c.entries) {
		return -1, -1
	}
	if hi == 0 {
		return epoch, c.entries[0].start
	}
	return c.entries[hi-1].epoch, c.entries[hi].start
}

func (c *epochCache) encode() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\n%d\n", checkpointVersion, len(c.entries))
	for _, e := range c.entries {
		fmt.Fprintf(&b, "%d %d\n", e.epoch, e.start)
	}
	return b.Bytes()
}

func readEpochCheckpoint(fsys vfs.FS, path string) (epochCache, error) {
	lines, err := readCheckpoint(fsys, path)
	if err != nil {
		return epochCache{}, err
	}
	if len(lines) == 0 {
		return epochCache{}, fmt.Errorf("%w: epoch checkpoint without a count", ErrCorruption)
	}
	n, err := strconv.Atoi(lines[0])
	if err != nil || n != len(lines)-1 {
		return epochCache{}, fmt.Errorf("%w: epoch checkpoint count %q for %d lines", ErrCorruption, lines[0], len(lines)-1)
	}
	var c epochCache
	for _, line := range lines[1:] {
		v, err := parseInts(line, 2)
		if err != nil {
			return epochCache{}, err
		}
		e := epochEntry{epoch: int32(v[0]), start: v[1]}
		if v[0] < 0 || v[0] > 1<<31-1 || v[1] < 0 ||
			(len(c.entries) > 0 && (e.epoch <= c.latest() || e.start <= c.entries[len(c.entries)-1].start)) {
			return epochCache{}, fmt.Errorf("%w: epoch checkpoint line %q out of order", ErrCorruption, line)
		}
		c.entries = append(c.entries, e)
	}
	return c, nil
}
