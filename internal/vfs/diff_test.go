package vfs

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
)

// TestMemMatchesOS applies the same seeded random operations to the OS (in a temporary directory) and
// to a Mem, and checks that both succeed or fail alike and hold the same files.
func TestMemMatchesOS(t *testing.T) {
	names := []string{"f", "g", "d", "d/f", "d/e", "d/e/g"}
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			osDir := t.TempDir()
			sides := []struct {
				fsys  FS
				root  string
				files map[int]File
			}{{OS, osDir, map[int]File{}}, {NewMem(), "/", map[int]File{}}}
			defer func() {
				for _, s := range sides {
					for _, f := range s.files {
						f.Close()
					}
				}
			}()
			rng := rand.New(rand.NewPCG(seed, 1))
			for step := range 400 {
				a, b := rng.IntN(len(names)), rng.IntN(len(names))
				slot := rng.IntN(3)
				data := bytes.Repeat([]byte{byte('a' + step%26)}, rng.IntN(10))
				size := int64(rng.IntN(12))
				kind := rng.IntN(12)
				var results [2]string
				for i := range sides {
					s := &sides[i]
					pa, pb := filepath.Join(s.root, names[a]), filepath.Join(s.root, names[b])
					f := s.files[slot]
					var out any
					var err error
					switch kind {
					case 0, 1:
						var nf File
						if kind == 0 {
							nf, err = s.fsys.Create(pa)
						} else {
							nf, err = s.fsys.OpenAppend(pa)
						}
						if err == nil {
							if f != nil {
								f.Close()
							}
							s.files[slot] = nf
						}
					case 2, 3:
						if f == nil {
							continue
						}
						out, err = f.Write(data)
					case 4:
						if f == nil {
							continue
						}
						err = f.Truncate(size)
					case 5:
						if f == nil {
							continue
						}
						out, err = f.Size()
					case 6:
						err = s.fsys.Rename(pa, pb)
					case 7:
						err = s.fsys.Remove(pa)
					case 8:
						err = s.fsys.RemoveAll(pa)
					case 9:
						err = s.fsys.MkdirAll(pa)
					case 10:
						out, err = s.fsys.ReadDir(pa)
					case 11:
						var content []byte
						content, err = ReadFile(s.fsys, pa)
						out = string(content)
					}
					results[i] = fmt.Sprintf("out=%v ok=%v notexist=%v", out, err == nil, IsNotExist(err))
				}
				if results[0] != results[1] {
					t.Fatalf("step %d op %d on %s, %s: OS %s; Mem %s", step, kind, names[a], names[b], results[0], results[1])
				}
			}
			for _, name := range names {
				var got [2]string
				for i, s := range sides {
					st, err := s.fsys.Stat(filepath.Join(s.root, name))
					switch {
					case err != nil:
						got[i] = fmt.Sprintf("notexist=%v", IsNotExist(err))
					case st.IsDir():
						entries, _ := s.fsys.ReadDir(filepath.Join(s.root, name))
						got[i] = fmt.Sprintf("dir %v", entries)
					default:
						b, _ := ReadFile(s.fsys, filepath.Join(s.root, name))
						got[i] = fmt.Sprintf("file %q", b)
					}
				}
				if got[0] != got[1] {
					t.Fatalf("%s at the end: OS %s; Mem %s", name, got[0], got[1])
				}
			}
			rootNames, err := sides[1].fsys.ReadDir("/")
			memMust(t, err)
			osNames, err := OS.ReadDir(osDir)
			memMust(t, err)
			if !slices.Equal(rootNames, osNames) {
				t.Fatalf("root: OS %v; Mem %v", osNames, rootNames)
			}
		})
	}
}
