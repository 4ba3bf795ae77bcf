package vfs

import (
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// memBlockSize is the granularity at which CrashClone keeps or loses unsynced file data.
const memBlockSize = 4096

// Mem is an in-memory FS that can simulate a power loss. It is safe for concurrent use.
//
// Durability rules, which CrashClone applies:
//   - File bytes are durable once File.Sync returns; a Truncate (including Create of an existing
//     file) is durable once the file is synced after it.
//   - A create, mkdir, rename or remove is durable once SyncDir has returned on every directory it
//     changed (both directories for a rename across directories). An operation that a later durable
//     operation on the same directory entry builds on counts as durable too.
//   - A directory made by MkdirAll is an entry of its parent like a file: until the parent is synced,
//     a crash may remove it together with everything inside it.
//
// Paths are cleaned and taken relative to the root "/", so "a/b", "/a/b" and "/a/./b" name the same file.
// Errors are *fs.PathError (*os.LinkError for Rename) wrapping what the OS would report: fs.ErrNotExist,
// fs.ErrExist, fs.ErrClosed or a syscall.Errno such as ENOTDIR or ENOTEMPTY. Mem is stricter than the
// OS in two places: Open of a directory and SyncDir of a file fail. Mem has no clock: Stat reports a
// zero ModTime.
type Mem struct {
	mu   sync.RWMutex
	root *memNode
	// pending holds the directory operations not yet durable, oldest first.
	pending []dirOp
	// seq numbers directory operations; it is the seq the next operation gets.
	seq uint64
}

// CrashOptions tunes what CrashClone keeps of the state that was not made durable.
type CrashOptions struct {
	// KeepUnsyncedProbability is the chance that each unsynced 4 KiB block of a file, each unsynced
	// truncate and each directory operation not yet durable survives the crash. 0 keeps only what
	// was synced; 1 keeps everything, which models a process crash (kill -9) with the kernel's page
	// cache intact.
	KeepUnsyncedProbability float64
	// TornWrite lets the last kept unsynced block of a file be cut short at a random byte.
	TornWrite bool
}

// memNode is a file or a directory. Every field is guarded by Mem.mu.
type memNode struct {
	isDir bool

	// Directory state.
	entries map[string]*memNode
	// syncedSeq is the Mem.seq at the last SyncDir: operations with a smaller seq that changed only
	// synced directories are durable.
	syncedSeq uint64

	// File state.
	data []byte
	// stable is the length of the prefix of data that is durable and unchanged since the last Sync.
	stable int64
	// lostTail holds the durable bytes after stable that an unsynced Truncate cut off.
	lostTail []byte
}

type dirOpKind uint8

const (
	dirOpCreate dirOpKind = iota + 1 // a file or directory entry added to dir
	dirOpRemove                      // an entry removed from dir
	dirOpRename                      // an entry moved from dir/name to toDir/toName
)

// dirOp is one directory change, kept until it is durable so that a crash can undo it.
type dirOp struct {
	seq  uint64
	kind dirOpKind
	dir  *memNode
	name string
	node *memNode
	// Rename only: the destination and the node it replaced there, if any.
	toDir    *memNode
	toName   string
	replaced *memNode
}

// entryKey names one directory entry.
type entryKey struct {
	dir  *memNode
	name string
}

func (op *dirOp) keys() []entryKey {
	if op.kind == dirOpRename {
		return []entryKey{{op.dir, op.name}, {op.toDir, op.toName}}
	}
	return []entryKey{{op.dir, op.name}}
}

func (op *dirOp) synced() bool {
	if op.seq >= op.dir.syncedSeq {
		return false
	}
	return op.kind != dirOpRename || op.seq < op.toDir.syncedSeq
}

// NewMem returns an empty in-memory filesystem holding only its root directory "/".
func NewMem() *Mem {
	return &Mem{root: newDir()}
}

func newDir() *memNode { return &memNode{isDir: true, entries: map[string]*memNode{}} }

// cleanPath returns the absolute slash-separated form of name.
func cleanPath(name string) string {
	return path.Clean("/" + filepath.ToSlash(name))
}

func pathErr(op, name string, err error) error { return &fs.PathError{Op: op, Path: name, Err: err} }

// lookup returns the node at name. The caller holds m.mu.
func (m *Mem) lookup(name string) (*memNode, error) {
	n := m.root
	p := cleanPath(name)
	if p == "/" {
		return n, nil
	}
	for _, part := range strings.Split(p[1:], "/") {
		if !n.isDir {
			return nil, syscall.ENOTDIR
		}
		next, ok := n.entries[part]
		if !ok {
			return nil, fs.ErrNotExist
		}
		n = next
	}
	return n, nil
}

// lookupParent returns the directory holding name and name's last element, which is "" for the root.
// The caller holds m.mu.
func (m *Mem) lookupParent(name string) (*memNode, string, error) {
	p := cleanPath(name)
	if p == "/" {
		return m.root, "", nil
	}
	dir, base := path.Split(p)
	parent, err := m.lookup(dir)
	if err != nil {
		return nil, "", err
	}
	if !parent.isDir {
		return nil, "", syscall.ENOTDIR
	}
	return parent, base, nil
}

// record appends a directory operation to the pending list. The caller holds m.mu for writing.
func (m *Mem) record(op dirOp) {
	op.seq = m.seq
	m.seq++
	m.pending = append(m.pending, op)
}

// Create implements FS.
func (m *Mem) Create(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.lookupParent(name)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	if base == "" {
		return nil, pathErr("open", name, syscall.EISDIR)
	}
	if n, ok := dir.entries[base]; ok {
		if n.isDir {
			return nil, pathErr("open", name, syscall.EISDIR)
		}
		n.truncate(0)
		return &memFile{m: m, n: n, name: name}, nil
	}
	n := &memNode{}
	dir.entries[base] = n
	m.record(dirOp{kind: dirOpCreate, dir: dir, name: base, node: n})
	return &memFile{m: m, n: n, name: name}, nil
}

// OpenAppend implements FS.
func (m *Mem) OpenAppend(name string) (File, error) { return m.open(name, false) }

// Open implements FS. Unlike os.Open, it refuses directories.
func (m *Mem) Open(name string) (File, error) { return m.open(name, true) }

func (m *Mem) open(name string, readOnly bool) (File, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, err := m.lookup(name)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	if n.isDir {
		return nil, pathErr("open", name, syscall.EISDIR)
	}
	return &memFile{m: m, n: n, name: name, readOnly: readOnly}, nil
}

// Remove implements FS: it removes a file or an empty directory.
func (m *Mem) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.lookupParent(name)
	if err != nil {
		return pathErr("remove", name, err)
	}
	if base == "" {
		return pathErr("remove", name, syscall.EBUSY)
	}
	n, ok := dir.entries[base]
	if !ok {
		return pathErr("remove", name, fs.ErrNotExist)
	}
	if n.isDir && len(n.entries) > 0 {
		return pathErr("remove", name, syscall.ENOTEMPTY)
	}
	delete(dir.entries, base)
	m.record(dirOp{kind: dirOpRemove, dir: dir, name: base, node: n})
	return nil
}

// RemoveAll implements FS: it removes name and everything under it, and succeeds if name is missing.
func (m *Mem) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.lookupParent(name)
	if err != nil {
		if IsNotExist(err) {
			return nil
		}
		return pathErr("unlinkat", name, err)
	}
	if base == "" {
		return pathErr("unlinkat", name, syscall.EBUSY)
	}
	n, ok := dir.entries[base]
	if !ok {
		return nil
	}
	delete(dir.entries, base)
	m.record(dirOp{kind: dirOpRemove, dir: dir, name: base, node: n})
	return nil
}

// Rename implements FS as os.Rename does: a file replaces a file, and nothing replaces a directory.
func (m *Mem) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	fail := func(err error) error { return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err} }
	oldDir, oldBase, err := m.lookupParent(oldname)
	if err != nil {
		return fail(err)
	}
	newDir, newBase, err := m.lookupParent(newname)
	if err != nil {
		return fail(err)
	}
	if oldBase == "" || newBase == "" {
		return fail(syscall.EBUSY)
	}
	n, ok := oldDir.entries[oldBase]
	if !ok {
		return fail(fs.ErrNotExist)
	}
	replaced, exists := newDir.entries[newBase]
	switch {
	case exists && replaced.isDir:
		return fail(fs.ErrExist)
	case exists && replaced == n:
		return nil
	case exists && n.isDir:
		return fail(syscall.ENOTDIR)
	case n.isDir && strings.HasPrefix(cleanPath(newname), cleanPath(oldname)+"/"):
		return fail(syscall.EINVAL)
	}
	delete(oldDir.entries, oldBase)
	newDir.entries[newBase] = n
	m.record(dirOp{kind: dirOpRename, dir: oldDir, name: oldBase, node: n, toDir: newDir, toName: newBase, replaced: replaced})
	return nil
}

// MkdirAll implements FS.
func (m *Mem) MkdirAll(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.root
	p := cleanPath(dir)
	if p == "/" {
		return nil
	}
	for _, part := range strings.Split(p[1:], "/") {
		if !n.isDir {
			return pathErr("mkdir", dir, syscall.ENOTDIR)
		}
		next, ok := n.entries[part]
		if !ok {
			next = newDir()
			n.entries[part] = next
			m.record(dirOp{kind: dirOpCreate, dir: n, name: part, node: next})
		}
		n = next
	}
	if !n.isDir {
		return pathErr("mkdir", dir, syscall.ENOTDIR)
	}
	return nil
}

// ReadDir implements FS.
func (m *Mem) ReadDir(dir string) ([]string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, err := m.lookup(dir)
	if err != nil {
		return nil, pathErr("open", dir, err)
	}
	if !n.isDir {
		return nil, pathErr("readdirent", dir, syscall.ENOTDIR)
	}
	return n.names(), nil
}

func (n *memNode) names() []string {
	names := make([]string, 0, len(n.entries))
	for name := range n.entries {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Stat implements FS.
func (m *Mem) Stat(name string) (fs.FileInfo, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, err := m.lookup(name)
	if err != nil {
		return nil, pathErr("stat", name, err)
	}
	return memInfo{name: path.Base(cleanPath(name)), size: int64(len(n.data)), isDir: n.isDir}, nil
}

// SyncDir implements FS: it makes durable every pending operation on dir's entries whose other
// directories (for a rename) are synced as well.
func (m *Mem) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(dir)
	if err != nil {
		return pathErr("open", dir, err)
	}
	if !n.isDir {
		return pathErr("sync", dir, syscall.ENOTDIR)
	}
	n.syncedSeq = m.seq
	m.prunePending()
	return nil
}

// prunePending drops the operations that became durable. An operation is durable when its
// directories are synced, or when a later durable operation touches one of its entries (that later
// operation was applied on top of it, so it cannot be undone alone). The caller holds m.mu for writing.
func (m *Mem) prunePending() {
	pinned := map[entryKey]bool{}
	durable := make([]bool, len(m.pending))
	for i := len(m.pending) - 1; i >= 0; i-- {
		op := &m.pending[i]
		keys := op.keys()
		if !op.synced() && !pinned[keys[0]] && !(len(keys) > 1 && pinned[keys[1]]) {
			continue
		}
		durable[i] = true
		for _, k := range keys {
			pinned[k] = true
		}
	}
	kept := m.pending[:0]
	for i, op := range m.pending {
		if !durable[i] {
			kept = append(kept, op)
		}
	}
	clear(m.pending[len(kept):])
	m.pending = kept
}

// SyncAll makes every file's bytes and every directory entry durable, as if each file and directory
// had been synced. Tests use it to set up a baseline that a crash must not touch.
func (m *Mem) SyncAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	var walk func(n *memNode)
	walk = func(n *memNode) {
		if !n.isDir {
			n.sync()
			return
		}
		n.syncedSeq = m.seq
		for _, child := range n.entries {
			walk(child)
		}
	}
	walk(m.root)
	clear(m.pending)
	m.pending = nil
}

// String lists every directory and file with its size and durable length, one a line, in path order.
func (m *Mem) String() string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var b strings.Builder
	var walk func(p string, n *memNode)
	walk = func(p string, n *memNode) {
		for _, name := range n.names() {
			child := n.entries[name]
			cp := path.Join(p, name)
			if child.isDir {
				fmt.Fprintf(&b, "%s/\n", cp)
				walk(cp, child)
				continue
			}
			fmt.Fprintf(&b, "%s %d bytes, %d durable\n", cp, len(child.data), child.stable+int64(len(child.lostTail)))
		}
	}
	walk("/", m.root)
	return b.String()
}

// CrashClone returns a new Mem holding one state the disk may be in after a power loss now: every
// durable byte and entry is kept; of each file's unsynced bytes, each 4 KiB block (aligned to the file
// offset) is kept with probability opts.KeepUnsyncedProbability, lost blocks before a kept one read
// back as zeros and the file ends after its last kept block (cut at a random byte if opts.TornWrite);
// an unsynced truncate is undone with the complementary probability, bringing back the durable bytes
// (and dropping whatever was written after it); each pending directory operation is undone with the
// complementary probability, newest first, so that an undone create removes the entry, a reverted
// rename moves the file back and a removed file reappears. The result is deterministic for a given
// rng state, and everything in the clone is durable. m is not changed.
func (m *Mem) CrashClone(rng *rand.Rand, opts CrashOptions) *Mem {
	m.mu.RLock()
	defer m.mu.RUnlock()
	c := &crasher{rng: rng, opts: opts, clones: map[*memNode]*memNode{}}
	root := c.clone(m.root)
	kept := map[entryKey]bool{}
	for i := len(m.pending) - 1; i >= 0; i-- {
		op := &m.pending[i]
		keys := op.keys()
		if kept[keys[0]] || (len(keys) > 1 && kept[keys[1]]) || c.keep() {
			for _, k := range keys {
				kept[k] = true
			}
			continue
		}
		c.undo(op)
	}
	return &Mem{root: root}
}

// crasher builds a crash clone; clones maps each original node to its single copy, so a node
// reachable twice (through a pending operation and the tree) stays one node.
type crasher struct {
	rng    *rand.Rand
	opts   CrashOptions
	clones map[*memNode]*memNode
}

func (c *crasher) keep() bool { return c.rng.Float64() < c.opts.KeepUnsyncedProbability }

func (c *crasher) clone(n *memNode) *memNode {
	if n == nil {
		return nil
	}
	if cn, ok := c.clones[n]; ok {
		return cn
	}
	if !n.isDir {
		cn := &memNode{data: c.crashData(n)}
		cn.stable = int64(len(cn.data))
		c.clones[n] = cn
		return cn
	}
	cn := newDir()
	c.clones[n] = cn
	for _, name := range n.names() {
		cn.entries[name] = c.clone(n.entries[name])
	}
	return cn
}

// undo reverts op in the clone. Operations are undone newest first, and only when no later kept
// operation touched their entries, so each entry is in the state op left it in.
func (c *crasher) undo(op *dirOp) {
	dir := c.clone(op.dir)
	switch op.kind {
	case dirOpCreate:
		delete(dir.entries, op.name)
	case dirOpRemove:
		dir.entries[op.name] = c.clone(op.node)
	case dirOpRename:
		toDir := c.clone(op.toDir)
		if op.replaced != nil {
			toDir.entries[op.toName] = c.clone(op.replaced)
		} else {
			delete(toDir.entries, op.toName)
		}
		dir.entries[op.name] = c.clone(op.node)
	}
}

// crashData returns the bytes file n holds after the crash.
func (c *crasher) crashData(n *memNode) []byte {
	if len(n.lostTail) > 0 && !c.keep() {
		out := make([]byte, n.stable+int64(len(n.lostTail)))
		copy(out, n.data[:n.stable])
		copy(out[n.stable:], n.lostTail)
		return out
	}
	size := int64(len(n.data))
	out := make([]byte, size)
	copy(out, n.data[:n.stable])
	end, lastStart := n.stable, int64(-1)
	for start := n.stable; start < size; {
		stop := min((start/memBlockSize+1)*memBlockSize, size)
		if c.keep() {
			copy(out[start:stop], n.data[start:stop])
			end, lastStart = stop, start
		}
		start = stop
	}
	if c.opts.TornWrite && lastStart >= 0 {
		end = lastStart + 1 + c.rng.Int64N(end-lastStart)
	}
	return out[:end:end]
}

func (n *memNode) sync() {
	n.stable = int64(len(n.data))
	n.lostTail = nil
}

// truncate cuts or zero-extends the file to size, remembering the durable bytes it cuts off.
func (n *memNode) truncate(size int64) {
	cur := int64(len(n.data))
	if size >= cur {
		n.data = append(n.data, make([]byte, size-cur)...)
		return
	}
	if size < n.stable {
		lost := make([]byte, 0, n.stable-size+int64(len(n.lostTail)))
		lost = append(lost, n.data[size:n.stable]...)
		n.lostTail = append(lost, n.lostTail...)
		n.stable = size
	}
	n.data = n.data[:size]
}

// memFile is an open Mem file. The node's bytes are guarded by the Mem's lock, so ReadAt runs
// concurrently with other ReadAts and is serialised with Write.
type memFile struct {
	m        *Mem
	n        *memNode
	name     string
	readOnly bool
	closed   atomic.Bool
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) check(op string, write bool) error {
	if f.closed.Load() {
		return pathErr(op, f.name, fs.ErrClosed)
	}
	if write && f.readOnly {
		return pathErr(op, f.name, syscall.EBADF)
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("readat", f.name, syscall.EINVAL)
	}
	if len(p) == 0 {
		return 0, nil
	}
	f.m.mu.RLock()
	defer f.m.mu.RUnlock()
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	f.n.data = append(f.n.data, p...)
	return len(p), nil
}

func (f *memFile) Sync() error {
	if err := f.check("sync", true); err != nil {
		return err
	}
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	f.n.sync()
	return nil
}

func (f *memFile) Truncate(size int64) error {
	if err := f.check("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return pathErr("truncate", f.name, syscall.EINVAL)
	}
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	f.n.truncate(size)
	return nil
}

// WriteBack does nothing: in memory, only Sync makes bytes survive a crash.
func (f *memFile) WriteBack(int64, int64) {}

// Allocate only checks the file: memory needs no reservation, and the size does not change.
func (f *memFile) Allocate(size int64) error {
	if err := f.check("allocate", true); err != nil {
		return err
	}
	if size < 0 {
		return pathErr("allocate", f.name, syscall.EINVAL)
	}
	return nil
}

func (f *memFile) Size() (int64, error) {
	if err := f.check("stat", false); err != nil {
		return 0, err
	}
	f.m.mu.RLock()
	defer f.m.mu.RUnlock()
	return int64(len(f.n.data)), nil
}

func (f *memFile) Close() error {
	if f.closed.Swap(true) {
		return pathErr("close", f.name, fs.ErrClosed)
	}
	return nil
}

// memInfo is the fs.FileInfo of a Mem file or directory.
type memInfo struct {
	name  string
	size  int64
	isDir bool
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return i.size }
func (i memInfo) Mode() fs.FileMode {
	if i.isDir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.isDir }
func (i memInfo) Sys() any           { return nil }
