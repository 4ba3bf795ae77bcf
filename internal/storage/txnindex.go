package storage

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/weir-mq/weir/internal/vfs"
)

// The transaction index of a segment (docs/storage.md, "Transaction index").
const (
	txnIndexSuffix = ".txnindex"
	// txnEntrySize is one entry: int16 version, int64 producer id, first offset, last offset and last
	// stable offset.
	txnEntrySize    = 34
	txnIndexVersion = 0
)

// TxnIndexEntry is one aborted transaction in Kafka's .txnindex format: the producer's records from
// FirstOffset up to its ABORT marker at LastOffset are to be dropped by read_committed consumers.
// LastStableOffset is the partition's last stable offset just after the marker, as its log says it: no
// transaction aborted later began below it.
type TxnIndexEntry struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

func (s *segment) txnIndexPath() string {
	return strings.TrimSuffix(s.path, logSuffix) + txnIndexSuffix
}

// encodeTxnIndex encodes entries as a .txnindex file.
func encodeTxnIndex(es []TxnIndexEntry) []byte {
	b := make([]byte, 0, len(es)*txnEntrySize)
	for _, e := range es {
		b = binary.BigEndian.AppendUint16(b, txnIndexVersion)
		b = binary.BigEndian.AppendUint64(b, uint64(e.ProducerID))
		b = binary.BigEndian.AppendUint64(b, uint64(e.FirstOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(e.LastOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(e.LastStableOffset))
	}
	return b
}

// decodeTxnIndex decodes the .txnindex file of the segment [base, next): whole entries of version 0,
// markers inside the segment in increasing order, each transaction beginning at or before its marker.
// Anything else is ErrCorruption.
func decodeTxnIndex(b []byte, base, next int64) ([]TxnIndexEntry, error) {
	if len(b)%txnEntrySize != 0 {
		return nil, fmt.Errorf("%w: transaction index of %d bytes", ErrCorruption, len(b))
	}
	es := make([]TxnIndexEntry, 0, len(b)/txnEntrySize)
	for ; len(b) > 0; b = b[txnEntrySize:] {
		if v := binary.BigEndian.Uint16(b); v != txnIndexVersion {
			return nil, fmt.Errorf("%w: transaction index entry version %d", ErrCorruption, v)
		}
		e := TxnIndexEntry{
			ProducerID:       int64(binary.BigEndian.Uint64(b[2:])),
			FirstOffset:      int64(binary.BigEndian.Uint64(b[10:])),
			LastOffset:       int64(binary.BigEndian.Uint64(b[18:])),
			LastStableOffset: int64(binary.BigEndian.Uint64(b[26:])),
		}
		switch {
		case e.ProducerID < 0 || e.FirstOffset < 0 || e.FirstOffset > e.LastOffset:
			return nil, fmt.Errorf("%w: transaction index entry %+v", ErrCorruption, e)
		case e.LastOffset < base || e.LastOffset >= next:
			return nil, fmt.Errorf("%w: transaction index entry at %d outside [%d, %d)", ErrCorruption, e.LastOffset, base, next)
		case len(es) > 0 && e.LastOffset <= es[len(es)-1].LastOffset:
			return nil, fmt.Errorf("%w: transaction index entries out of order at %d", ErrCorruption, e.LastOffset)
		}
		es = append(es, e)
	}
	return es, nil
}

// loadTxnIndex reads a closed segment's .txnindex at Open. A missing file holds no entry; a damaged one
// is reported and counted as none, and the owner's SetAborted writes it again.
func (l *Log) loadTxnIndex(seg *segment) {
	b, err := readWhole(l.fs, seg.txnIndexPath())
	if vfs.IsNotExist(err) {
		return
	}
	seg.txnFile = true
	if err == nil {
		seg.txns, err = decodeTxnIndex(b, seg.base, seg.next)
	}
	if err != nil {
		l.logger.Warn("ignoring transaction index", "segment", seg.path, "err", err)
		seg.txns = nil
		seg.txnDamaged = true
	}
}

// AddAborted records the aborted transaction e, whose ABORT marker the log holds at e.LastOffset, in the
// transaction index of the marker's segment. The owner calls it after appending the marker (or, on a
// follower, the batches holding it). The active segment keeps its entries in memory until the roll's
// job writes them; a closed segment (a roll by age came in between) has its file written again at once.
// An entry below the log start or at or past its end is ignored.
func (l *Log) AddAborted(e TxnIndexEntry) error {
	l.settle()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if e.LastOffset < l.start || e.LastOffset >= l.act.b.next {
		return nil
	}
	if e.LastOffset >= l.act.seg.base {
		l.act.txns = append(l.act.txns, e)
		return nil
	}
	l.waitJob()
	if err := l.writable(); err != nil {
		return err
	}
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].next > e.LastOffset })
	seg := l.segs[i]
	return l.writeTxnIndex(seg, insertEntry(seg.txns, e))
}

// insertEntry returns es with e in marker order, replacing an entry of the same marker.
func insertEntry(es []TxnIndexEntry, e TxnIndexEntry) []TxnIndexEntry {
	i, found := slices.BinarySearchFunc(es, e.LastOffset, cmpLast)
	out := slices.Clone(es)
	if found {
		out[i] = e
		return out
	}
	return slices.Insert(out, i, e)
}

// SetAborted gives the log every aborted transaction of its partition, as the owner's scan of the batch
// headers and markers found them at open (that scan, not the files, is what the partition relies on).
// Each closed segment's .txnindex is made to agree with it: written again, or removed, when it differs,
// is missing or is damaged. The active segment's entries are kept in memory. Entries below the log start
// are ignored. Until SetAborted is called, compaction keeps every transactional batch as it is.
func (l *Log) SetAborted(es []TxnIndexEntry) error {
	l.settle()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waitJob()
	if err := l.writable(); err != nil {
		return err
	}
	es = slices.Clone(es)
	slices.SortFunc(es, func(a, b TxnIndexEntry) int { return cmp.Compare(a.LastOffset, b.LastOffset) })
	changed := false
	for _, seg := range l.segs[:len(l.segs)-1] {
		lo, _ := slices.BinarySearchFunc(es, seg.base, cmpLast)
		hi, _ := slices.BinarySearchFunc(es, seg.next, cmpLast)
		want := es[lo:hi:hi]
		if slices.Equal(seg.txns, want) && seg.txnFile == (len(want) > 0) && !seg.txnDamaged {
			continue
		}
		if err := l.writeTxnIndexNoSync(seg, want); err != nil {
			return err
		}
		changed = true
	}
	lo, _ := slices.BinarySearchFunc(es, l.act.seg.base, cmpLast)
	hi, _ := slices.BinarySearchFunc(es, l.act.b.next, cmpLast)
	l.act.txns = slices.Clone(es[lo:hi])
	l.txnKnown = true
	if changed {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return l.fail("sync dir "+l.dir, err)
		}
	}
	return nil
}

func cmpLast(e TxnIndexEntry, off int64) int { return cmp.Compare(e.LastOffset, off) }

// writeTxnIndex makes closed segment seg's .txnindex hold es (removed when es is empty) and syncs the
// directory. Callers hold mu and waited for the job in flight.
func (l *Log) writeTxnIndex(seg *segment, es []TxnIndexEntry) error {
	if err := l.writeTxnIndexNoSync(seg, es); err != nil {
		return err
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail("sync dir "+l.dir, err)
	}
	return nil
}

// writeTxnIndexNoSync is writeTxnIndex without the directory sync.
func (l *Log) writeTxnIndexNoSync(seg *segment, es []TxnIndexEntry) error {
	p := seg.txnIndexPath()
	if len(es) == 0 {
		if err := l.fs.Remove(p); err != nil && !vfs.IsNotExist(err) {
			return l.fail("remove "+p, err)
		}
	} else if err := writeRenamed(l.fs, p, encodeTxnIndex(es)); err != nil {
		return l.fail("write "+p, err)
	}
	seg.txns, seg.txnFile, seg.txnDamaged = es, len(es) > 0, false
	return nil
}

// abortedEntries returns every aborted transaction the log knows, in marker order, and whether SetAborted
// told it them all. Callers hold mu.
func (l *Log) abortedEntries() ([]TxnIndexEntry, bool) {
	var out []TxnIndexEntry
	for _, seg := range l.segs[:len(l.segs)-1] {
		out = append(out, seg.txns...)
	}
	return append(out, l.act.txns...), l.txnKnown
}
