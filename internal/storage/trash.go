package storage

import (
	"fmt"
	"time"

	"github.com/weir-mq/weir/internal/vfs"
)

// deletedSuffix marks the files of a segment that retention or DeleteRecords deleted and whose removal
// waits for file.delete.delay.ms (Config.FileDeleteDelay), as Kafka names them. Open removes any left.
const deletedSuffix = ".deleted"

// trashed is a deleted segment's renamed files and when Maintain removes them (the delay may change
// between deletions, so the list is not in due order).
type trashed struct {
	paths []string
	due   time.Time
}

// discardSegment removes a deleted segment's files, or, under a file delete delay, renames them to
// <name>.deleted for removeDueTrash to remove once the delay has passed. Readers of an older view that
// hold the segment's file open keep reading it either way; one that opens it by name after this finds
// nothing and, the deletion being a change (beginChange), reads again on the new view. The caller syncs
// the directory. Callers hold mu.
func (l *Log) discardSegment(seg *segment) error {
	if l.cfg.FileDeleteDelay <= 0 {
		return l.removeSegmentFiles(seg)
	}
	t := trashed{due: l.clock.Now().Add(l.cfg.FileDeleteDelay)}
	for _, p := range seg.filePaths() {
		if err := l.fs.Rename(p, p+deletedSuffix); err != nil {
			if vfs.IsNotExist(err) {
				continue
			}
			return fmt.Errorf("storage: rename %s: %w", p, err)
		}
		t.paths = append(t.paths, p+deletedSuffix)
	}
	l.trash = append(l.trash, t)
	return nil
}

// removeDueTrash removes the renamed files of deleted segments whose delay has passed. Callers hold mu.
func (l *Log) removeDueTrash(now time.Time) error {
	kept := l.trash[:0]
	for i, t := range l.trash {
		if now.Before(t.due) {
			kept = append(kept, t)
			continue
		}
		for _, p := range t.paths {
			if err := l.fs.Remove(p); err != nil && !vfs.IsNotExist(err) {
				l.trash = append(kept, l.trash[i:]...)
				return l.fail("remove "+p, err)
			}
		}
	}
	l.trash = kept
	return nil
}
