package server

import (
	"bufio"
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/weir-mq/weir/internal/vfs"
)

const (
	metaFile    = "meta.properties"
	metaTmpFile = "meta.properties.tmp"
	// metaFormatVersion is the layout version of a weir data directory.
	metaFormatVersion = 1
	// maxMetaBytes bounds what is read of meta.properties.
	maxMetaBytes = 64 << 10
)

// metaProperties is what <data-dir>/meta.properties records: whose directory this is.
type metaProperties struct {
	version   int
	nodeID    int32
	clusterID string
}

// checkMetaNode checks, before anything else opens the directory, that an existing
// meta.properties is readable and names this node: a node must not start Raft on another node's
// controller state.
func checkMetaNode(fsys vfs.FS, dataDir string, nodeID int32) error {
	have, found, err := readMeta(fsys, dataDir)
	if err != nil || !found {
		return err
	}
	if have.nodeID != nodeID {
		return fmt.Errorf("%w: %s belongs to node %d, this is node %d", ErrBadDataDir, filepath.Join(dataDir, metaFile), have.nodeID, nodeID)
	}
	return nil
}

// readMeta reads and parses meta.properties; found is false when there is none.
func readMeta(fsys vfs.FS, dataDir string) (_ metaProperties, found bool, _ error) {
	path := filepath.Join(dataDir, metaFile)
	data, err := vfs.ReadFile(fsys, path)
	if vfs.IsNotExist(err) {
		return metaProperties{}, false, nil
	}
	if err != nil {
		return metaProperties{}, false, fmt.Errorf("server: read %s: %w", path, err)
	}
	if len(data) > maxMetaBytes {
		return metaProperties{}, false, fmt.Errorf("%w: %s is %d bytes", ErrBadDataDir, path, len(data))
	}
	have, err := parseMeta(data)
	if err != nil {
		return metaProperties{}, false, fmt.Errorf("%w: %s: %w", ErrBadDataDir, path, err)
	}
	return have, true, nil
}

// ensureMeta checks meta.properties against this node (same node id and cluster id, a known format
// version), or writes it durably if the directory has none yet.
func ensureMeta(fsys vfs.FS, dataDir string, want metaProperties) error {
	path := filepath.Join(dataDir, metaFile)
	have, found, err := readMeta(fsys, dataDir)
	if err != nil {
		return err
	}
	if !found {
		return writeMeta(fsys, dataDir, want)
	}
	switch {
	case have.version != metaFormatVersion:
		return fmt.Errorf("%w: %s has format version %d, this weir knows %d", ErrBadDataDir, path, have.version, metaFormatVersion)
	case have.nodeID != want.nodeID:
		return fmt.Errorf("%w: %s belongs to node %d, this is node %d", ErrBadDataDir, path, have.nodeID, want.nodeID)
	case have.clusterID != want.clusterID:
		return fmt.Errorf("%w: %s belongs to cluster %s, the metadata names %s", ErrBadDataDir, path, have.clusterID, want.clusterID)
	}
	return nil
}

// parseMeta reads the key=value lines of meta.properties ('#' starts a comment).
func parseMeta(data []byte) (metaProperties, error) {
	var m metaProperties
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return m, fmt.Errorf("line %q is not key=value", line)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		seen[k] = true
		switch k {
		case "version":
			n, err := strconv.Atoi(v)
			if err != nil {
				return m, fmt.Errorf("version %q: %w", v, err)
			}
			m.version = n
		case "node.id":
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return m, fmt.Errorf("node.id %q: %w", v, err)
			}
			m.nodeID = int32(n)
		case "cluster.id":
			m.clusterID = v
		}
	}
	if err := sc.Err(); err != nil {
		return m, err
	}
	for _, k := range []string{"version", "node.id", "cluster.id"} {
		if !seen[k] {
			return m, fmt.Errorf("no %s", k)
		}
	}
	return m, nil
}

// writeMeta writes meta.properties atomically and durably: a temporary file, synced, renamed into
// place, and the directory synced.
func writeMeta(fsys vfs.FS, dataDir string, m metaProperties) error {
	content := fmt.Sprintf("# weir node metadata: do not edit\nversion=%d\nnode.id=%d\ncluster.id=%s\n",
		m.version, m.nodeID, m.clusterID)
	tmp := filepath.Join(dataDir, metaTmpFile)
	f, err := fsys.Create(tmp)
	if err != nil {
		return fmt.Errorf("server: write %s: %w", metaFile, err)
	}
	_, err = f.Write([]byte(content))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, filepath.Join(dataDir, metaFile))
	}
	if err == nil {
		err = fsys.SyncDir(dataDir)
	}
	if err != nil {
		return fmt.Errorf("server: write %s: %w", metaFile, err)
	}
	return nil
}
