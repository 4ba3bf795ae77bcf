package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weir-mq/weir/internal/record"
	"github.com/weir-mq/weir/internal/vfs"
)

const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	tmpSuffix       = ".tmp"
	cleanedSuffix   = ".cleaned"
	offsetEntrySize = 8
	timeEntrySize   = 12
	baseDigits      = 20
)

// errSegmentGone says a segment was deleted (retention, truncation or close) while a reader held an older view.
var errSegmentGone = errors.New("storage: segment deleted")

// offsetEntry maps the last offset of a batch, relative to the segment base, to the batch's position.
type offsetEntry struct {
	rel int32
	pos int32
}

// timeEntry maps the largest timestamp so far to the offset, relative to the base, of the batch carrying it.
type timeEntry struct {
	ts  int64
	rel int32
}

func segmentName(base int64) string {
	s := strconv.FormatInt(base, 10)
	return strings.Repeat("0", baseDigits-len(s)) + s
}

// parseSegmentName returns the base offset of a "<20 digits>.log" name.
func parseSegmentName(name string) (int64, bool) {
	stem, ok := strings.CutSuffix(name, logSuffix)
	if !ok || len(stem) != baseDigits {
		return 0, false
	}
	base, err := strconv.ParseInt(stem, 10, 64)
	if err != nil || base < 0 {
		return 0, false
	}
	return base, true
}

// segment is one <base>.log with its indexes. base and path never change. size and next are fixed before
// the segment is published as closed; for the active segment readers use the view's copies instead.
// mu guards the lazily opened file, the lazily loaded indexes and the reference count.
type segment struct {
	fs   vfs.FS
	base int64
	path string
	size int64
	next int64

	mu   sync.Mutex
	file vfs.File
	// appendable says the segment is active: its file is opened for appending (acquire opens it so when
	// it was parked), so that the writer and readers share one handle.
	appendable bool
	refs       int
	dead       bool
	used       bool
	loaded     bool
	idx        []offsetEntry
	tidx       []timeEntry
	maxTs      int64
	maxTsOK    bool
	sealedAt   time.Time

	// The aborted transactions whose marker lies in the segment, in marker order, and whether its
	// .txnindex file exists and was found damaged at Open: owned by the log's writer (under Log.mu).
	txns       []TxnIndexEntry
	txnFile    bool
	txnDamaged bool
}

func newSegment(fsys vfs.FS, dir string, base int64) *segment {
	return &segment{fs: fsys, base: base, path: filepath.Join(dir, segmentName(base)+logSuffix)}
}

// filePaths lists the segment's files: the log, its offset, time and transaction indexes.
func (s *segment) filePaths() []string {
	return []string{s.path, s.indexPath(), s.timeIndexPath(), s.txnIndexPath()}
}

func (s *segment) indexPath() string { return strings.TrimSuffix(s.path, logSuffix) + indexSuffix }
func (s *segment) timeIndexPath() string {
	return strings.TrimSuffix(s.path, logSuffix) + timeIndexSuffix
}

// acquire returns the segment's file, opening it if needed, and holds a reference until release.
func (s *segment) acquire() (vfs.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return nil, errSegmentGone
	}
	if s.file == nil {
		open := s.fs.Open
		if s.appendable {
			open = s.fs.OpenAppend
		}
		f, err := open(s.path)
		if err != nil {
			return nil, fmt.Errorf("storage: open segment: %w", err)
		}
		s.file = f
	}
	s.refs++
	s.used = true
	return s.file, nil
}

func (s *segment) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refs--
	if s.dead && s.refs == 0 {
		s.closeFileLocked()
	}
}

func (s *segment) closeFileLocked() {
	if s.file != nil {
		_ = s.file.Close() // read handle or an already synced append handle: nothing to lose
		s.file = nil
	}
}

// kill marks the segment deleted; its file is closed once no reader holds it.
func (s *segment) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dead = true
	if s.refs == 0 {
		s.closeFileLocked()
	}
}

// setFile installs an already open file (the active segment's append handle).
func (s *segment) setFile(f vfs.File) {
	s.mu.Lock()
	s.file, s.appendable = f, true
	s.mu.Unlock()
}

// closeIfIdle closes the active segment's file if quiet (the writer's own judgement), nobody used it since
// the last call and nobody holds it; it starts the next "since the last call" either way.
func (s *segment) closeIfIdle(quiet bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !quiet || s.used || s.refs > 0 {
		s.used = false
		return false
	}
	s.closeFileLocked()
	return true
}

// seal records a closed segment's indexes, built in memory while it was active.
func (s *segment) seal(idx []offsetEntry, tidx []timeEntry, maxTs int64, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.idx, s.tidx, s.loaded = idx, tidx, true
	s.maxTs, s.maxTsOK = maxTs, true
	s.sealedAt = now
	s.appendable = false
}

// dropIfIdle closes the file and forgets the indexes of a closed segment nobody used since the last call.
func (s *segment) dropIfIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used || s.refs > 0 {
		s.used = false
		return
	}
	s.closeFileLocked()
	s.idx, s.tidx, s.loaded = nil, nil, false
}

// indexes returns a closed segment's indexes, loading them on first use. Index files that fail the sanity
// check are rebuilt in memory from the log.
func (s *segment) indexes() ([]offsetEntry, []timeEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used = true
	if s.loaded {
		return s.idx, s.tidx, nil
	}
	idx, tidx, err := loadIndexes(s.fs, s.indexPath(), s.timeIndexPath(), s.base, s.next, s.size)
	if err != nil {
		idx, tidx, err = s.rebuildLocked()
		if err != nil {
			return nil, nil, err
		}
	}
	s.idx, s.tidx, s.loaded = idx, tidx, true
	if !s.maxTsOK && len(tidx) > 0 {
		s.maxTs, s.maxTsOK = tidx[len(tidx)-1].ts, true
	}
	return idx, tidx, nil
}

func (s *segment) rebuildLocked() ([]offsetEntry, []timeEntry, error) {
	f, err := s.fs.Open(s.path)
	if err != nil {
		return nil, nil, fmt.Errorf("storage: open segment: %w", err)
	}
	defer f.Close()
	var b indexBuilder
	b.reset(s.base)
	r := newSegReader(f, s.size)
	end, err := r.walk(0, s.size, true, b.track)
	if err != nil {
		return nil, nil, err
	}
	if end != s.size {
		return nil, nil, fmt.Errorf("%w: segment %s: batches end at %d of %d bytes", ErrCorruption, s.path, end, s.size)
	}
	b.finish()
	return b.idx, b.tidx, nil
}

// maxTimestamp returns the largest batch timestamp in a closed segment (-1 if none), reading only the last
// time index entry when the indexes are not loaded.
func (s *segment) maxTimestamp() (int64, error) {
	s.mu.Lock()
	if s.maxTsOK {
		ts := s.maxTs
		s.mu.Unlock()
		return ts, nil
	}
	s.mu.Unlock()
	ts, err := lastTimeEntry(s.fs, s.timeIndexPath())
	if err != nil {
		if _, tidx, ierr := s.indexes(); ierr == nil {
			ts = -1
			if len(tidx) > 0 {
				ts = tidx[len(tidx)-1].ts
			}
			err = nil
		}
	}
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.maxTs, s.maxTsOK = ts, true
	s.mu.Unlock()
	return ts, nil
}

func lastTimeEntry(fsys vfs.FS, path string) (int64, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		return 0, err
	}
	if n%timeEntrySize != 0 {
		return 0, fmt.Errorf("%w: time index %s of %d bytes", ErrCorruption, path, n)
	}
	if n == 0 {
		return -1, nil
	}
	var b [timeEntrySize]byte
	if _, err := f.ReadAt(b[:], n-timeEntrySize); err != nil {
		return 0, err
	}
	return int64(binary.BigEndian.Uint64(b[:])), nil
}

// loadIndexes reads and checks both index files of a closed segment.
func loadIndexes(fsys vfs.FS, indexPath, timePath string, base, next, size int64) ([]offsetEntry, []timeEntry, error) {
	ib, err := readWhole(fsys, indexPath)
	if err != nil {
		return nil, nil, err
	}
	tb, err := readWhole(fsys, timePath)
	if err != nil {
		return nil, nil, err
	}
	idx, err := decodeOffsetIndex(ib, base, next, size)
	if err != nil {
		return nil, nil, err
	}
	tidx, err := decodeTimeIndex(tb, base, next)
	if err != nil {
		return nil, nil, err
	}
	return idx, tidx, nil
}

func readWhole(fsys vfs.FS, path string) ([]byte, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil && !(errors.Is(err, io.EOF) && n == 0) {
		return nil, err
	}
	return b, nil
}

// decodeOffsetIndex parses an offset index and checks it against the segment: entries strictly increase,
// offsets lie below next and positions inside the file.
func decodeOffsetIndex(b []byte, base, next, size int64) ([]offsetEntry, error) {
	if len(b)%offsetEntrySize != 0 {
		return nil, fmt.Errorf("%w: offset index of %d bytes", ErrCorruption, len(b))
	}
	idx := make([]offsetEntry, len(b)/offsetEntrySize)
	for i := range idx {
		e := offsetEntry{
			rel: int32(binary.BigEndian.Uint32(b[i*offsetEntrySize:])),
			pos: int32(binary.BigEndian.Uint32(b[i*offsetEntrySize+4:])),
		}
		if e.rel < 0 || e.pos < 0 || base+int64(e.rel) >= next || int64(e.pos)+record.HeaderSize > size ||
			(i > 0 && (e.rel <= idx[i-1].rel || e.pos <= idx[i-1].pos)) {
			return nil, fmt.Errorf("%w: offset index entry %d out of order or range", ErrCorruption, i)
		}
		idx[i] = e
	}
	return idx, nil
}

func decodeTimeIndex(b []byte, base, next int64) ([]timeEntry, error) {
	if len(b)%timeEntrySize != 0 {
		return nil, fmt.Errorf("%w: time index of %d bytes", ErrCorruption, len(b))
	}
	tidx := make([]timeEntry, len(b)/timeEntrySize)
	for i := range tidx {
		e := timeEntry{
			ts:  int64(binary.BigEndian.Uint64(b[i*timeEntrySize:])),
			rel: int32(binary.BigEndian.Uint32(b[i*timeEntrySize+8:])),
		}
		if e.rel < 0 || base+int64(e.rel) >= next || (i > 0 && e.ts <= tidx[i-1].ts) {
			return nil, fmt.Errorf("%w: time index entry %d out of order or range", ErrCorruption, i)
		}
		tidx[i] = e
	}
	return tidx, nil
}

func encodeOffsetIndex(idx []offsetEntry) []byte {
	b := make([]byte, len(idx)*offsetEntrySize)
	for i, e := range idx {
		binary.BigEndian.PutUint32(b[i*offsetEntrySize:], uint32(e.rel))
		binary.BigEndian.PutUint32(b[i*offsetEntrySize+4:], uint32(e.pos))
	}
	return b
}

func encodeTimeIndex(tidx []timeEntry) []byte {
	b := make([]byte, len(tidx)*timeEntrySize)
	for i, e := range tidx {
		binary.BigEndian.PutUint64(b[i*timeEntrySize:], uint64(e.ts))
		binary.BigEndian.PutUint32(b[i*timeEntrySize+8:], uint32(e.rel))
	}
	return b
}

// lookupPosition returns the position of the last indexed batch whose last offset is at or below target, or 0.
func lookupPosition(idx []offsetEntry, base, target int64) int64 {
	i := sort.Search(len(idx), func(i int) bool { return base+int64(idx[i].rel) > target })
	if i == 0 {
		return 0
	}
	return int64(idx[i-1].pos)
}

// lookupTime returns the offset of the last time index entry whose timestamp is below ts, or -1.
func lookupTime(tidx []timeEntry, base, ts int64) int64 {
	i := sort.Search(len(tidx), func(i int) bool { return tidx[i].ts >= ts })
	if i == 0 {
		return -1
	}
	return base + int64(tidx[i-1].rel)
}

// indexBuilder applies Kafka's sparse index rule to the batches of one segment, in order.
type indexBuilder struct {
	base       int64
	interval   int64
	idx        []offsetEntry
	tidx       []timeEntry
	sinceIndex int64
	size       int64
	next       int64
	maxTs      int64
	maxTsOff   int64
	nBatches   int
}

func (b *indexBuilder) reset(base int64) {
	*b = indexBuilder{base: base, interval: b.interval, next: base, maxTs: -1, maxTsOff: base}
}

// track records the batch h at position pos. It returns an error if h does not follow the previous batch.
func (b *indexBuilder) track(h record.Header, pos int64) error {
	if h.BaseOffset < b.next || h.LastOffset()-b.base > maxRelOffset || pos+int64(h.Size()) > maxSegmentPos {
		return fmt.Errorf("%w: batch at %d has offset %d, expected at least %d", ErrCorruption, pos, h.BaseOffset, b.next)
	}
	if h.MaxTimestamp > b.maxTs {
		b.maxTs, b.maxTsOff = h.MaxTimestamp, h.LastOffset()
	}
	if b.sinceIndex > b.interval {
		b.idx = append(b.idx, offsetEntry{rel: int32(h.LastOffset() - b.base), pos: int32(pos)})
		b.appendTime()
		b.sinceIndex = 0
	}
	b.sinceIndex += int64(h.Size())
	b.size = pos + int64(h.Size())
	b.next = h.NextOffset()
	b.nBatches++
	return nil
}

func (b *indexBuilder) appendTime() {
	if b.maxTs >= 0 && (len(b.tidx) == 0 || b.maxTs > b.tidx[len(b.tidx)-1].ts) {
		b.tidx = append(b.tidx, timeEntry{ts: b.maxTs, rel: int32(b.maxTsOff - b.base)})
	}
}

// finish adds the final time index entry a closed segment carries: its largest timestamp.
func (b *indexBuilder) finish() { b.appendTime() }

const (
	maxRelOffset  = 1<<31 - 1
	maxSegmentPos = 1<<31 - 1
)

// segReader reads batch headers and batches of one file through a read-ahead buffer.
type segReader struct {
	f     vfs.File
	limit int64
	ahead int
	buf   []byte
	at    int64
}

// Read-ahead sizes: large for walking a whole segment, small for finding one batch near an index entry.
const (
	walkReadAhead = 64 << 10
	seekReadAhead = 4 << 10
)

func newSegReader(f vfs.File, limit int64) *segReader {
	return &segReader{f: f, limit: limit, ahead: walkReadAhead}
}

func newSeekReader(f vfs.File, limit int64) *segReader {
	return &segReader{f: f, limit: limit, ahead: seekReadAhead}
}

// read returns n bytes at pos (valid until the next call), or io.ErrUnexpectedEOF past the limit.
func (r *segReader) read(pos int64, n int) ([]byte, error) {
	if pos < 0 || pos+int64(n) > r.limit {
		return nil, io.ErrUnexpectedEOF
	}
	if pos >= r.at && pos+int64(n) <= r.at+int64(len(r.buf)) {
		return r.buf[pos-r.at : pos-r.at+int64(n)], nil
	}
	want := max(n, r.ahead)
	if rest := r.limit - pos; int64(want) > rest {
		want = int(rest)
	}
	if cap(r.buf) < want {
		r.buf = make([]byte, want)
	}
	r.buf = r.buf[:want]
	m, err := r.f.ReadAt(r.buf, pos)
	if m < n {
		r.buf, r.at = r.buf[:0], 0
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	r.buf, r.at = r.buf[:m], pos
	return r.buf[:n], nil
}

func (r *segReader) header(pos int64) (record.Header, error) {
	b, err := r.read(pos, record.HeaderSize)
	if err != nil {
		return record.Header{}, err
	}
	return record.ParseHeader(b)
}

// walk visits the batches from position from until to, calling fn for each. With validate it reads every
// batch whole and checks it (length, magic, CRC, counts); otherwise it reads headers only. It stops at the
// first batch that is torn, invalid or rejected by fn and returns the position reached. A read error that
// is not a short read is returned as such.
func (r *segReader) walk(from, to int64, validate bool, fn func(h record.Header, pos int64) error) (int64, error) {
	pos := from
	for pos < to {
		h, err := r.header(pos)
		if err != nil {
			return pos, ignoreTorn(err)
		}
		if pos+int64(h.Size()) > to {
			return pos, nil
		}
		if validate {
			b, err := r.read(pos, h.Size())
			if err != nil {
				return pos, ignoreTorn(err)
			}
			if _, err := record.Validate(b); err != nil {
				return pos, nil
			}
		}
		if fn(h, pos) != nil {
			return pos, nil
		}
		pos += int64(h.Size())
	}
	return pos, nil
}

// ignoreTorn drops the errors that only say the bytes are not a whole batch.
func ignoreTorn(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, record.ErrCorrupt) ||
		errors.Is(err, record.ErrUnsupportedMagic) || errors.Is(err, record.ErrInvalidRecord) {
		return nil
	}
	return err
}
