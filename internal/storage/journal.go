package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/weir-mq/weir/internal/vfs"
)

// The journal is the core of the design in docs/storage.md, "Journal (design)": framed records appended to
// <firstSeq>.wj files in one directory, made durable one round at a time with one fdatasync, scanned back
// after a crash up to the first torn or invalid record, and trimmed below a checkpoint. The Syncer owns it
// (journal_sync.go); logs add records to it (journal_log.go).

// journalKind says what a journal record records.
type journalKind int8

// The journal's record kinds.
const (
	journalAppend   journalKind = 1 // bytes appended to a log's segment
	journalTruncate journalKind = 2 // a log cut at offset
	journalPoint    journalKind = 3 // a log's segments durable up to offset
	journalDrop     journalKind = 4 // a log deleted
)

// journalRecord is one record of the journal (docs/storage.md, "Files" of "Journal (design)").
type journalRecord struct {
	seq         int64
	kind        journalKind
	name        string // the log's directory name
	offset      int64
	leaderEpoch int32
	segmentBase int64
	position    int32
	data        []byte
}

const (
	// journalRecordFixed is a record's size without its name and data: length, crc, seq, kind, flags,
	// nameLength, offset, leaderEpoch, segmentBase, position.
	journalRecordFixed = 4 + 4 + 8 + 1 + 1 + 2 + 8 + 4 + 8 + 4
	journalHeaderBytes = 32
	journalSuffix      = ".wj"
	journalMagic       = "WEIRJRNL"
	journalVersion     = 1
	// journalMaxName bounds a record's name: a topic name (249 bytes), '-' and a partition number.
	journalMaxName = 512
)

var (
	journalCRC = crc32.MakeTable(crc32.Castagnoli)
	// errJournalRecord is what parseJournalRecord reports for bytes that are not a whole, valid record.
	errJournalRecord = errors.New("storage: invalid journal record")
	// errJournalName is what add reports for a record whose name could not be read back.
	errJournalName = errors.New("storage: journal record name empty or too long")
)

func (r *journalRecord) size() int { return journalRecordFixed + len(r.name) + len(r.data) }

// appendJournalRecord appends r, framed, to dst.
func appendJournalRecord(dst []byte, r *journalRecord) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, uint32(r.size()-4))
	dst = binary.BigEndian.AppendUint32(dst, 0) // the CRC, set below
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.seq))
	dst = append(dst, byte(r.kind), 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(r.name)))
	dst = append(dst, r.name...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.offset))
	dst = binary.BigEndian.AppendUint32(dst, uint32(r.leaderEpoch))
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.segmentBase))
	dst = binary.BigEndian.AppendUint32(dst, uint32(r.position))
	dst = append(dst, r.data...)
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(dst[start+8:], journalCRC))
	return dst
}

// journalRecordLength returns the whole size of the record whose first 4 bytes are b, or false if that
// length cannot be a record's.
func journalRecordLength(b []byte) (int64, bool) {
	n := int64(binary.BigEndian.Uint32(b)) + 4
	return n, n >= journalRecordFixed
}

// parseJournalRecord decodes b, exactly one framed record. The record's name and data alias b.
func parseJournalRecord(b []byte) (journalRecord, error) {
	if len(b) < journalRecordFixed || int64(binary.BigEndian.Uint32(b))+4 != int64(len(b)) {
		return journalRecord{}, errJournalRecord
	}
	if binary.BigEndian.Uint32(b[4:]) != crc32.Checksum(b[8:], journalCRC) {
		return journalRecord{}, errJournalRecord
	}
	r := journalRecord{seq: int64(binary.BigEndian.Uint64(b[8:])), kind: journalKind(b[16])}
	nameLen := int(binary.BigEndian.Uint16(b[18:]))
	if r.kind < journalAppend || r.kind > journalDrop || b[17] != 0 || nameLen == 0 || nameLen > journalMaxName ||
		len(b) < journalRecordFixed+nameLen {
		return journalRecord{}, errJournalRecord
	}
	r.name = string(b[20 : 20+nameLen])
	rest := b[20+nameLen:]
	r.offset = int64(binary.BigEndian.Uint64(rest))
	r.leaderEpoch = int32(binary.BigEndian.Uint32(rest[8:]))
	r.segmentBase = int64(binary.BigEndian.Uint64(rest[12:]))
	r.position = int32(binary.BigEndian.Uint32(rest[20:]))
	r.data = rest[24:]
	return r, nil
}

// journalHeader returns the header of the journal file whose first record is firstSeq.
func journalHeader(firstSeq int64) []byte {
	h := make([]byte, journalHeaderBytes)
	copy(h, journalMagic)
	binary.BigEndian.PutUint16(h[8:], journalVersion)
	binary.BigEndian.PutUint64(h[16:], uint64(firstSeq))
	binary.BigEndian.PutUint32(h[28:], crc32.Checksum(h[:28], journalCRC))
	return h
}

// parseJournalHeader returns the firstSeq a header records, or false if h is not a valid header.
func parseJournalHeader(h []byte) (int64, bool) {
	if len(h) != journalHeaderBytes || string(h[:8]) != journalMagic ||
		binary.BigEndian.Uint16(h[8:]) != journalVersion ||
		binary.BigEndian.Uint32(h[28:]) != crc32.Checksum(h[:28], journalCRC) {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(h[16:])), true
}

func journalFileName(firstSeq int64) string { return fmt.Sprintf("%020d%s", firstSeq, journalSuffix) }

// parseJournalFileName returns the firstSeq a journal file's name carries, or false for another name.
func parseJournalFileName(name string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, journalSuffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return n, err == nil && n > 0
}

// journal appends records to the files of one directory. add may run concurrently with sync; rounds
// (sync) and trims run one at a time. After a failed write or sync the journal is offline for good: every
// later call returns that error, as a log's does (the kernel may have dropped the pages it failed to write).
type journal struct {
	fs        vfs.FS
	dir       string
	fileBytes int64

	mu       sync.Mutex
	next     int64          // the seq the next record gets
	chunks   []journalChunk // the open round: records not written yet, by file
	started  bool           // records go to a file started since the journal was opened
	curBytes int64          // the size of that file once the open round is written
	err      error

	syncMu  sync.Mutex
	file    vfs.File // the file the last round wrote to
	files   []int64  // the firstSeq of every journal file on disk, ascending
	durable int64    // the last seq a round made durable
	// written counts the bytes rounds wrote since the last trim.
	written atomic.Int64
	// free holds the buffers of rounds written, emptied, for the next rounds (under mu): a round's buffer
	// grows to the round's size once rather than in every round.
	free [][]byte
}

// journalFreeBuffers and journalFreeBytes bound the buffers kept for reuse: their count, and the size of
// one (a larger one, left by an unusual round, goes to the garbage collector).
const (
	journalFreeBuffers = 4
	journalFreeBytes   = 16 << 20
)

// buffer returns an empty buffer for a round's chunk. Callers hold mu.
func (j *journal) buffer() []byte {
	n := len(j.free)
	if n == 0 {
		return nil
	}
	b := j.free[n-1]
	j.free = j.free[:n-1]
	return b
}

// recycle gives the buffers of written chunks back for later rounds.
func (j *journal) recycle(chunks []journalChunk) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, c := range chunks {
		if len(j.free) < journalFreeBuffers && cap(c.data) <= journalFreeBytes {
			j.free = append(j.free, c.data[:0])
		}
	}
}

// journalChunk is the part of a round that goes to one file.
type journalChunk struct {
	first  int64 // the file's firstSeq
	create bool  // the round creates the file (data starts with its header)
	data   []byte
	last   int64 // the last seq in data
}

// journalRecovery describes what openJournal found.
type journalRecovery struct {
	records   int   // records scanned past the checkpoint
	tornBytes int64 // bytes cut from the file where the scan ended, and in the files removed after it
}

// errJournalGap is returned by openJournal when the records just past the checkpoint are not in any file:
// synced data is missing, which no crash explains.
var errJournalGap = fmt.Errorf("%w: journal records after the checkpoint are missing", ErrCorruption)

// openJournal opens the journal in dir (created if missing) whose records up to after are covered by a
// checkpoint: it calls fn with every record past after, in seq order, up to the first torn or invalid one,
// cuts that tail away and returns the journal ready to append the next seq in a new file. fn must not keep a
// record's name or data; an error from fn ends the scan and is returned. Files of at most fileBytes are
// written (64 MiB in the design; tests use a few hundred bytes).
func openJournal(fsys vfs.FS, dir string, after, fileBytes int64, fn func(*journalRecord) error) (*journal, journalRecovery, error) {
	var rec journalRecovery
	if err := fsys.MkdirAll(dir); err != nil {
		return nil, rec, err
	}
	if err := fsys.SyncDir(filepath.Dir(dir)); err != nil {
		return nil, rec, err
	}
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, rec, err
	}
	var files []int64
	for _, name := range names {
		if seq, ok := parseJournalFileName(name); ok {
			files = append(files, seq)
		}
	}
	slices.Sort(files)
	j := &journal{fs: fsys, dir: dir, fileBytes: fileBytes, next: after + 1, durable: after}
	start := -1
	for i, first := range files {
		if first <= after+1 {
			start = i
		}
	}
	if start < 0 {
		if len(files) > 0 {
			return nil, rec, fmt.Errorf("%w: the first file holds %d, the checkpoint covers up to %d", errJournalGap, files[0], after)
		}
		return j, rec, nil
	}
	s := journalScan{j: j, after: after, fn: fn}
	end := start // files[:end] are kept
	for end < len(files) {
		keep, whole, err := s.file(files[end], end == start)
		if err != nil {
			return nil, rec, err
		}
		if !keep {
			if end > start || start == 0 {
				break
			}
			// The start file holds no record (created by a round that never completed): the records past
			// the checkpoint, if any, end in the file before it, which becomes the start.
			if err := s.remove(files[start:]); err != nil {
				return nil, rec, err
			}
			files = files[:start]
			start--
			end = start
			continue
		}
		end++
		if !whole || end == len(files) || files[end] != s.expect {
			break
		}
	}
	if err := s.remove(files[end:]); err != nil {
		return nil, rec, err
	}
	if err := fsys.SyncDir(dir); err != nil {
		return nil, rec, err
	}
	j.files = files[:end]
	j.next = max(after, s.last) + 1
	j.durable = j.next - 1
	return j, journalRecovery{records: s.records, tornBytes: s.torn}, nil
}

// remove removes the journal files whose firstSeqs are given, counting their bytes as torn.
func (s *journalScan) remove(firsts []int64) error {
	for _, first := range firsts {
		path := s.j.path(first)
		size, err := fileSize(s.j.fs, path)
		if err != nil {
			return err
		}
		if err := s.j.fs.Remove(path); err != nil {
			return err
		}
		s.torn += size
	}
	return nil
}

func fileSize(fsys vfs.FS, path string) (int64, error) {
	st, err := fsys.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// journalScan walks journal files in seq order for openJournal.
type journalScan struct {
	j       *journal
	after   int64
	expect  int64 // the seq the next record must carry
	last    int64 // the last valid record's seq
	fn      func(*journalRecord) error
	buf     []byte
	records int
	torn    int64
}

// file scans the journal file first. keep is false if it holds no valid record (its header is invalid,
// or not the one the scan expects, or its first record is): openJournal removes it. Otherwise whole reports
// that it ended exactly after a valid record; a file that ends early is cut there. A kept file is synced,
// the scan having perhaps read bytes only the page cache held.
func (s *journalScan) file(first int64, isStart bool) (keep, whole bool, err error) {
	f, err := s.j.fs.OpenAppend(s.j.path(first))
	if err != nil {
		return false, false, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return false, false, err
	}
	if size < journalHeaderBytes {
		return false, false, nil
	}
	h := make([]byte, journalHeaderBytes)
	if _, err := f.ReadAt(h, 0); err != nil {
		return false, false, err
	}
	if seq, ok := parseJournalHeader(h); !ok || seq != first || (!isStart && seq != s.expect) {
		return false, false, nil
	}
	s.expect = first
	pos, err := s.records1(f, journalHeaderBytes, size)
	if err != nil || pos == journalHeaderBytes {
		return false, false, err
	}
	if pos < size {
		s.torn += size - pos
		if err := f.Truncate(pos); err != nil {
			return false, false, err
		}
	}
	return true, pos == size, f.Sync()
}

// records1 reads the records of f from pos and returns where the valid ones end.
func (s *journalScan) records1(f vfs.File, pos, size int64) (int64, error) {
	var lenBuf [4]byte
	for pos+4 <= size {
		if _, err := f.ReadAt(lenBuf[:], pos); err != nil {
			return 0, err
		}
		n, ok := journalRecordLength(lenBuf[:])
		if !ok || n > size-pos {
			break
		}
		if int64(cap(s.buf)) < n {
			s.buf = make([]byte, n)
		}
		b := s.buf[:n]
		if _, err := f.ReadAt(b, pos); err != nil {
			return 0, err
		}
		r, err := parseJournalRecord(b)
		if err != nil || r.seq != s.expect {
			break
		}
		if r.seq > s.after {
			if err := s.fn(&r); err != nil {
				return 0, err
			}
			s.records++
		}
		s.last = r.seq
		s.expect++
		pos += n
	}
	return pos, nil
}

func (j *journal) path(first int64) string { return filepath.Join(j.dir, journalFileName(first)) }

// add gives r the next seq and puts it in the open round, returning the seq. The round writes it; sync
// waits for that.
func (j *journal) add(r *journalRecord) (int64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return 0, j.err
	}
	if len(r.name) == 0 || len(r.name) > journalMaxName {
		return 0, errJournalName
	}
	r.seq = j.next
	size := int64(r.size())
	switch {
	case !j.started || (j.curBytes+size > j.fileBytes && j.curBytes > journalHeaderBytes):
		j.chunks = append(j.chunks, journalChunk{first: r.seq, create: true, data: append(j.buffer(), journalHeader(r.seq)...)})
		j.started, j.curBytes = true, journalHeaderBytes
	case len(j.chunks) == 0:
		j.chunks = append(j.chunks, journalChunk{data: j.buffer()})
	}
	c := &j.chunks[len(j.chunks)-1]
	c.data = appendJournalRecord(c.data, r)
	c.last = r.seq
	j.curBytes += size
	j.next++
	return r.seq, nil
}

// sync writes the open round and fdatasyncs it, returning the last seq durable: every record added before
// sync was called is.
func (j *journal) sync() (int64, error) {
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	j.mu.Lock()
	chunks, err := j.chunks, j.err
	j.chunks = nil
	j.mu.Unlock()
	if err != nil {
		return j.durable, err
	}
	if len(chunks) == 0 {
		return j.durable, nil
	}
	created := false
	for _, c := range chunks {
		j.written.Add(int64(len(c.data)))
		if c.create {
			if err := j.startFile(c.first); err != nil {
				return j.durable, j.fail(err)
			}
			created = true
		}
		if _, err := j.file.Write(c.data); err != nil {
			return j.durable, j.fail(err)
		}
	}
	if err := j.file.Sync(); err != nil {
		return j.durable, j.fail(err)
	}
	j.recycle(chunks)
	if created {
		if err := j.fs.SyncDir(j.dir); err != nil {
			return j.durable, j.fail(err)
		}
	}
	j.durable = chunks[len(chunks)-1].last
	return j.durable, nil
}

// startFile syncs and closes the file being written, if any, and creates the file whose first record is
// first, reserved at fileBytes.
func (j *journal) startFile(first int64) error {
	if j.file != nil {
		if err := j.file.Sync(); err != nil {
			return err
		}
		if err := j.file.Close(); err != nil {
			return err
		}
		j.file = nil
	}
	f, err := j.fs.Create(j.path(first))
	if err != nil {
		return err
	}
	j.file = f
	j.files = append(j.files, first)
	return f.Allocate(j.fileBytes)
}

func (j *journal) fail(err error) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err == nil {
		j.err = fmt.Errorf("%w: journal: %w", ErrLogOffline, err)
	}
	return j.err
}

// trim removes the files whose records are all at or below upTo, which a durable checkpoint covers; the
// file being written stays.
func (j *journal) trim(upTo int64) error {
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	if err := j.Err(); err != nil {
		return err
	}
	j.written.Store(0)
	n := 0
	for n+1 < len(j.files) && j.files[n+1] <= upTo+1 {
		if err := j.fs.Remove(j.path(j.files[n])); err != nil {
			return j.fail(err)
		}
		n++
	}
	if n == 0 {
		return nil
	}
	j.files = slices.Delete(j.files, 0, n)
	if err := j.fs.SyncDir(j.dir); err != nil {
		return j.fail(err)
	}
	return nil
}

// lastSeq is the seq of the last record added.
func (j *journal) lastSeq() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.next - 1
}

// writtenSince is how many bytes rounds wrote since the last trim.
func (j *journal) writtenSince() int64 { return j.written.Load() }

// Err returns the error that took the journal offline, or nil.
func (j *journal) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

// close closes the file being written; records added since the last sync are dropped.
func (j *journal) close() error {
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	if j.file == nil {
		return nil
	}
	err := j.file.Close()
	j.file = nil
	return err
}
