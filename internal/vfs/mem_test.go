package vfs

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

const crashSeeds = 64

func seeded(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

func memMust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// memWrite creates name in m with content, optionally syncing the file.
func memWrite(t *testing.T, m *Mem, name string, content []byte, sync bool) File {
	t.Helper()
	f, err := m.Create(name)
	memMust(t, err)
	_, err = f.Write(content)
	memMust(t, err)
	if sync {
		memMust(t, f.Sync())
	}
	return f
}

// memRead returns name's content in m, and whether it exists.
func memRead(t *testing.T, m *Mem, name string) ([]byte, bool) {
	t.Helper()
	b, err := ReadFile(m, name)
	if IsNotExist(err) {
		return nil, false
	}
	memMust(t, err)
	return b, true
}

// pattern returns n bytes that differ between blocks and are never zero.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i/memBlockSize%250 + 1)
	}
	return b
}

func half() CrashOptions { return CrashOptions{KeepUnsyncedProbability: 0.5} }

func TestMemCrashSyncedDataSurvives(t *testing.T) {
	m := NewMem()
	memMust(t, m.MkdirAll("/d"))
	memMust(t, m.SyncDir("/"))
	synced := pattern(3*memBlockSize + 100)
	f := memWrite(t, m, "/d/log", synced, true)
	memMust(t, m.SyncDir("/d"))
	_, err := f.Write(pattern(5 * memBlockSize))
	memMust(t, err)

	for seed := range uint64(crashSeeds) {
		c := m.CrashClone(seeded(seed), CrashOptions{KeepUnsyncedProbability: 0.5, TornWrite: true})
		got, ok := memRead(t, c, "/d/log")
		if !ok {
			t.Fatalf("seed %d: synced file vanished", seed)
		}
		if !bytes.HasPrefix(got, synced) {
			t.Fatalf("seed %d: synced prefix lost (len %d)", seed, len(got))
		}
	}
	c := m.CrashClone(seeded(1), CrashOptions{})
	if got, _ := memRead(t, c, "/d/log"); !bytes.Equal(got, synced) {
		t.Fatalf("with nothing kept: len %d, want exactly the %d synced bytes", len(got), len(synced))
	}
}

func TestMemCrashKeepAllIsCurrentState(t *testing.T) {
	m := NewMem()
	memMust(t, m.MkdirAll("/a/b"))
	memWrite(t, m, "/a/b/x", pattern(10000), false)
	memWrite(t, m, "/a/y", []byte("y"), true)
	memMust(t, m.Rename("/a/y", "/a/b/z"))
	memWrite(t, m, "/a/gone", []byte("g"), true)
	memMust(t, m.Remove("/a/gone"))
	c := m.CrashClone(seeded(7), CrashOptions{KeepUnsyncedProbability: 1})
	if got, want := c.String(), "/a/\n/a/b/\n/a/b/x 10000 bytes, 10000 durable\n/a/b/z 1 bytes, 1 durable\n"; got != want {
		t.Fatalf("clone:\n%s\nwant:\n%s", got, want)
	}
	if got, _ := memRead(t, c, "/a/b/x"); !bytes.Equal(got, pattern(10000)) {
		t.Fatal("content differs after a crash that keeps everything")
	}
}

func TestMemCrashUnsyncedCreateCanVanish(t *testing.T) {
	m := NewMem()
	memWrite(t, m, "/new", []byte("synced data, unsynced entry"), true)
	var vanished, survived int
	for seed := range uint64(crashSeeds) {
		if _, ok := memRead(t, m.CrashClone(seeded(seed), half()), "/new"); ok {
			survived++
		} else {
			vanished++
		}
	}
	if vanished == 0 || survived == 0 {
		t.Fatalf("vanished %d, survived %d over %d seeds; want both", vanished, survived, crashSeeds)
	}
	memMust(t, m.SyncDir("/"))
	for seed := range uint64(crashSeeds) {
		if _, ok := memRead(t, m.CrashClone(seeded(seed), CrashOptions{}), "/new"); !ok {
			t.Fatalf("seed %d: file vanished after SyncDir", seed)
		}
	}
}

func TestMemCrashUnsyncedTail(t *testing.T) {
	m := NewMem()
	synced := pattern(1000)
	f := memWrite(t, m, "/log", synced, true)
	memMust(t, m.SyncDir("/"))
	full := pattern(8 * memBlockSize)
	_, err := f.Write(full[len(synced):])
	memMust(t, err)

	lengths := map[int]bool{}
	var sawHole bool
	for seed := range uint64(crashSeeds) {
		got, _ := memRead(t, m.CrashClone(seeded(seed), half()), "/log")
		lengths[len(got)] = true
		if len(got) != len(synced) && len(got)%memBlockSize != 0 && len(got) != len(full) {
			t.Fatalf("seed %d: length %d is not at a block boundary without TornWrite", seed, len(got))
		}
		for off := 0; off < len(got); off += memBlockSize {
			end := min(off+memBlockSize, len(got))
			start := max(off, len(synced))
			if start >= end {
				continue
			}
			block := got[start:end]
			switch {
			case bytes.Equal(block, full[start:end]):
			case bytes.Equal(block, make([]byte, end-start)):
				sawHole = true
			default:
				t.Fatalf("seed %d: block at %d is neither the written bytes nor zeros", seed, off)
			}
		}
	}
	if len(lengths) < 3 {
		t.Fatalf("only %d distinct lengths over %d seeds", len(lengths), crashSeeds)
	}
	if !sawHole {
		t.Fatal("no lost block before a kept one read back as zeros")
	}
}

func TestMemCrashTornWrite(t *testing.T) {
	m := NewMem()
	memWrite(t, m, "/log", pattern(4*memBlockSize), false)
	memMust(t, m.SyncDir("/"))
	var torn bool
	for seed := range uint64(crashSeeds) {
		got, _ := memRead(t, m.CrashClone(seeded(seed), CrashOptions{KeepUnsyncedProbability: 0.5, TornWrite: true}), "/log")
		if len(got)%memBlockSize != 0 {
			torn = true
		}
		want := pattern(len(got))
		for i, b := range got {
			if b != want[i] && b != 0 {
				t.Fatalf("seed %d: byte %d is %d, want %d or a zero", seed, i, b, want[i])
			}
		}
	}
	if !torn {
		t.Fatal("no torn write over all seeds")
	}
}

func TestMemCrashDeterministic(t *testing.T) {
	m := NewMem()
	memMust(t, m.MkdirAll("/p/q"))
	for i, name := range []string{"/p/a", "/p/q/b", "/c"} {
		memWrite(t, m, name, pattern(3000*(i+1)), i == 1)
	}
	opts := CrashOptions{KeepUnsyncedProbability: 0.5, TornWrite: true}
	for seed := range uint64(8) {
		a, b := m.CrashClone(seeded(seed), opts), m.CrashClone(seeded(seed), opts)
		if a.String() != b.String() {
			t.Fatalf("seed %d: two clones differ:\n%s\n%s", seed, a, b)
		}
	}
}

func TestMemCrashRenameRevertsAtomically(t *testing.T) {
	m := NewMem()
	memWrite(t, m, "/ckpt", []byte("old"), true)
	memWrite(t, m, "/ckpt.tmp", []byte("new"), true)
	memMust(t, m.SyncDir("/"))
	memMust(t, m.Rename("/ckpt.tmp", "/ckpt"))

	outcomes := map[string]bool{}
	for seed := range uint64(crashSeeds) {
		c := m.CrashClone(seeded(seed), half())
		got, ok := memRead(t, c, "/ckpt")
		tmp, tmpOK := memRead(t, c, "/ckpt.tmp")
		switch {
		case ok && string(got) == "new" && !tmpOK:
			outcomes["renamed"] = true
		case ok && string(got) == "old" && tmpOK && string(tmp) == "new":
			outcomes["reverted"] = true
		default:
			t.Fatalf("seed %d: ckpt=%q(%v) ckpt.tmp=%q(%v)", seed, got, ok, tmp, tmpOK)
		}
	}
	if len(outcomes) != 2 {
		t.Fatalf("outcomes %v, want both renamed and reverted", outcomes)
	}
	memMust(t, m.SyncDir("/"))
	if got, _ := memRead(t, m.CrashClone(seeded(1), CrashOptions{}), "/ckpt"); string(got) != "new" {
		t.Fatalf("after SyncDir: %q, want new", got)
	}
}

func TestMemCrashRenameAcrossDirsNeedsBothSynced(t *testing.T) {
	m := NewMem()
	memMust(t, m.MkdirAll("/x"))
	memMust(t, m.MkdirAll("/y"))
	memWrite(t, m, "/x/f", []byte("f"), true)
	m.SyncAll()
	memMust(t, m.Rename("/x/f", "/y/f"))
	memMust(t, m.SyncDir("/y"))
	c := m.CrashClone(seeded(1), CrashOptions{})
	if _, ok := memRead(t, c, "/x/f"); !ok {
		t.Fatal("rename with only the destination synced was kept with nothing kept")
	}
	memMust(t, m.SyncDir("/x"))
	c = m.CrashClone(seeded(1), CrashOptions{})
	if _, ok := memRead(t, c, "/y/f"); !ok {
		t.Fatal("rename with both directories synced was undone")
	}
}

func TestMemCrashRemovedFileReappears(t *testing.T) {
	m := NewMem()
	f := memWrite(t, m, "/seg", []byte("durable"), true)
	memMust(t, m.SyncDir("/"))
	_, err := f.Write([]byte(" and more"))
	memMust(t, err)
	memMust(t, m.Remove("/seg"))
	got, ok := memRead(t, m.CrashClone(seeded(1), CrashOptions{}), "/seg")
	if !ok || string(got) != "durable" {
		t.Fatalf("removed file after a crash: %q(%v), want durable", got, ok)
	}
	memMust(t, m.SyncDir("/"))
	if _, ok := memRead(t, m.CrashClone(seeded(1), CrashOptions{}), "/seg"); ok {
		t.Fatal("file removed and SyncDir'd came back")
	}
}

func TestMemCrashRecreatedNameRevertsInOrder(t *testing.T) {
	m := NewMem()
	memWrite(t, m, "/f", []byte("first"), true)
	memMust(t, m.SyncDir("/"))
	memMust(t, m.Remove("/f"))
	memWrite(t, m, "/f", []byte("second"), true)
	outcomes := map[string]bool{}
	for seed := range uint64(crashSeeds) {
		got, ok := memRead(t, m.CrashClone(seeded(seed), half()), "/f")
		switch {
		case !ok:
			outcomes["removed"] = true
		case string(got) == "first" || string(got) == "second":
			outcomes[string(got)] = true
		default:
			t.Fatalf("seed %d: %q", seed, got)
		}
	}
	if len(outcomes) != 3 {
		t.Fatalf("outcomes %v, want first, removed and second", outcomes)
	}
}

func TestMemCrashMkdirNeedsParentSync(t *testing.T) {
	m := NewMem()
	memMust(t, m.MkdirAll("/data/topic-0"))
	memWrite(t, m, "/data/topic-0/0.log", []byte("x"), true)
	memMust(t, m.SyncDir("/data/topic-0"))
	c := m.CrashClone(seeded(1), CrashOptions{})
	if _, err := c.Stat("/data"); !IsNotExist(err) {
		t.Fatalf("directory whose parent was never synced: Stat = %v, want not-exist", err)
	}
	memMust(t, m.SyncDir("/"))
	memMust(t, m.SyncDir("/data"))
	c = m.CrashClone(seeded(1), CrashOptions{})
	if got, ok := memRead(t, c, "/data/topic-0/0.log"); !ok || string(got) != "x" {
		t.Fatalf("after syncing every parent: %q(%v)", got, ok)
	}
}

func TestMemCrashUnsyncedTruncate(t *testing.T) {
	m := NewMem()
	f := memWrite(t, m, "/idx", []byte("0123456789"), true)
	memMust(t, m.SyncDir("/"))
	memMust(t, f.Truncate(4))
	_, err := f.Write([]byte("ab"))
	memMust(t, err)
	outcomes := map[string]bool{}
	for seed := range uint64(crashSeeds) {
		got, _ := memRead(t, m.CrashClone(seeded(seed), half()), "/idx")
		switch string(got) {
		case "0123456789", "0123", "0123ab":
			outcomes[string(got)] = true
		default:
			t.Fatalf("seed %d: %q", seed, got)
		}
	}
	if len(outcomes) != 3 {
		t.Fatalf("outcomes %v, want all three", outcomes)
	}
	memMust(t, f.Sync())
	if got, _ := memRead(t, m.CrashClone(seeded(1), CrashOptions{}), "/idx"); string(got) != "0123ab" {
		t.Fatalf("after Sync: %q", got)
	}
}

func TestMemCrashCloneIsIndependent(t *testing.T) {
	m := NewMem()
	memWrite(t, m, "/f", []byte("abc"), true)
	m.SyncAll()
	c := m.CrashClone(seeded(1), CrashOptions{})
	g, err := c.OpenAppend("/f")
	memMust(t, err)
	_, err = g.Write([]byte("def"))
	memMust(t, err)
	memMust(t, c.Remove("/f"))
	if got, ok := memRead(t, m, "/f"); !ok || string(got) != "abc" {
		t.Fatalf("original changed through the clone: %q(%v)", got, ok)
	}
}

func TestMemString(t *testing.T) {
	m := NewMem()
	memMust(t, m.MkdirAll("/d"))
	f := memWrite(t, m, "/d/f", []byte("12345"), true)
	_, err := f.Write([]byte("678"))
	memMust(t, err)
	if got, want := m.String(), "/d/\n/d/f 8 bytes, 5 durable\n"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}

func TestMemPathsAreCleaned(t *testing.T) {
	m := NewMem()
	memMust(t, m.MkdirAll("a/b"))
	memWrite(t, m, "/a/./b/../b/f", []byte("x"), false)
	if got, ok := memRead(t, m, "a/b/f"); !ok || string(got) != "x" {
		t.Fatalf("%q(%v)", got, ok)
	}
}
