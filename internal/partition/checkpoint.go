package partition

import (
	"bufio"
	"bytes"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/weir-mq/weir/internal/storage"
	"github.com/weir-mq/weir/internal/vfs"
)

// The high-watermark checkpoint (<data-dir>/replication-offset-checkpoint) is Kafka's offset
// checkpoint format: a line "0" (the version), a line with the entry count, then one line
// "<topic> <partition> <high watermark>" per hosted replica. It is written atomically (temporary file,
// fsync, rename, directory fsync). A lower high watermark than the real one is always safe, so a lost
// or stale checkpoint only delays consumers after a restart.

// hwCheckpointMax bounds what readHWCheckpoint reads, so a damaged file cannot exhaust memory.
const hwCheckpointMax = 64 << 20

// readHWCheckpoint reads the checkpoint at path; a missing file is an empty checkpoint. A malformed
// one gives an error wrapping storage.ErrCorruption.
func readHWCheckpoint(fsys vfs.FS, path string) (map[replicaKey]int64, error) {
	out := map[replicaKey]int64{}
	st, err := fsys.Stat(path)
	if vfs.IsNotExist(err) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("partition: read %s: %w", path, err)
	}
	if st.Size() > hwCheckpointMax {
		return nil, fmt.Errorf("partition: %s: %w: %d bytes", path, storage.ErrCorruption, st.Size())
	}
	buf, err := vfs.ReadFile(fsys, path)
	if err != nil {
		return nil, fmt.Errorf("partition: read %s: %w", path, err)
	}
	return parseHWCheckpoint(buf)
}

// parseHWCheckpoint decodes the checkpoint format.
func parseHWCheckpoint(b []byte) (map[replicaKey]int64, error) {
	bad := func(what string) error {
		return fmt.Errorf("partition: %s: %w: %s", hwCheckpointFile, storage.ErrCorruption, what)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if sc.Err() != nil || len(lines) < 2 || lines[0] != "0" {
		return nil, bad("no version line")
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n != len(lines)-2 {
		return nil, bad("count does not match")
	}
	out := make(map[replicaKey]int64, n)
	for _, line := range lines[2:] {
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, bad("line " + strconv.Quote(line))
		}
		p, err1 := strconv.ParseInt(f[1], 10, 32)
		hw, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || p < 0 || hw < 0 {
			return nil, bad("line " + strconv.Quote(line))
		}
		out[replicaKey{f[0], int32(p)}] = hw
	}
	return out, nil
}

// encodeHWCheckpoint encodes hws, sorted by topic and partition.
func encodeHWCheckpoint(hws map[replicaKey]int64) []byte {
	keys := make([]replicaKey, 0, len(hws))
	for k := range hws {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].topic != keys[j].topic {
			return keys[i].topic < keys[j].topic
		}
		return keys[i].partition < keys[j].partition
	})
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(keys))
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %d %d\n", k.topic, k.partition, hws[k])
	}
	return b.Bytes()
}

// writeHWCheckpoint writes the high watermarks of the hosted replicas atomically.
func (m *Manager) writeHWCheckpoint(all map[replicaKey]*hosted) error {
	hws := make(map[replicaKey]int64, len(all))
	for k, h := range all {
		hws[k] = h.r.HighWatermark()
	}
	m.ckptMu.Lock()
	defer m.ckptMu.Unlock()
	tmp := filepath.Join(m.dataDir, hwCheckpointFile+".tmp")
	f, err := m.fs.Create(tmp)
	if err != nil {
		return fmt.Errorf("partition: write %s: %w", tmp, err)
	}
	_, err = f.Write(encodeHWCheckpoint(hws))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = m.fs.Rename(tmp, filepath.Join(m.dataDir, hwCheckpointFile))
	}
	if err == nil {
		err = m.fs.SyncDir(m.dataDir)
	}
	if err != nil {
		return fmt.Errorf("partition: write %s: %w", hwCheckpointFile, err)
	}
	return nil
}
