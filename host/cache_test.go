package host_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brainrt/brain/host"
	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/tool"
)

// tinyModule hand-assembles a WebAssembly module that speaks just enough
// of the ABI to attach and answer every call with the string value. It
// compiles in microseconds, even under -race, so cache tests can compile
// as often as they need to.
func tinyModule(value string) []byte { return tinyModuleMarked(value, "brain_abi_v2") }

// tinyModuleMarked is tinyModule with the ABI version marker export named
// marker, or none if marker is "".
func tinyModuleMarked(value, marker string) []byte {
	initOut := `{"ok":true,"value":null}`
	callOut := `v"` + value + `"` // brain_invoke: a value
	const callAt = 256
	section := func(id byte, body ...[]byte) []byte {
		b := bytes.Join(body, nil)
		return append(append([]byte{id}, uleb(uint64(len(b)))...), b...)
	}
	name := func(s string) []byte { return append(uleb(uint64(len(s))), s...) }
	body := func(instr ...[]byte) []byte {
		b := append([]byte{0}, bytes.Join(instr, nil)...) // no locals
		b = append(b, 0x0b)
		return append(uleb(uint64(len(b))), b...)
	}
	i64 := func(v uint64) []byte { return append([]byte{0x42}, sleb(int64(v))...) }
	data := func(at int, s string) []byte {
		return append(append([]byte{0, 0x41}, sleb(int64(at))...), append([]byte{0x0b}, name(s)...)...)
	}
	exports := func(marker string) []byte {
		list := [][]byte{name("memory"), {2, 0}, name("brain_alloc"), {0, 0}, name("brain_init"), {0, 1}, name("brain_invoke"), {0, 2}}
		n := byte(4)
		if marker != "" { // the version marker: only its name counts
			list, n = append(list, name(marker), []byte{0, 0}), n+1
		}
		return section(7, append([]byte{n}, bytes.Join(list, nil)...))
	}
	return bytes.Join([][]byte{
		[]byte("\x00asm\x01\x00\x00\x00"),
		section(1, []byte{2, 0x60, 1, 0x7f, 1, 0x7f, 0x60, 2, 0x7f, 0x7f, 1, 0x7e}), // (i32)->i32, (i32,i32)->i64
		section(3, []byte{3, 0, 1, 1}),
		section(5, []byte{1, 0, 1}), // one memory, min 1 page
		exports(marker),
		section(10, []byte{3},
			body(append([]byte{0x41}, sleb(1024)...)),           // brain_alloc: 1024
			body(i64(uint64(len(initOut)))),                     // brain_init: initOut at 0
			body(i64(uint64(callAt)<<32|uint64(len(callOut))))), // brain_invoke: callOut at 256
		section(11, []byte{2}, data(0, initOut), data(callAt, callOut)),
	}, nil)
}

func uleb(v uint64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			c |= 0x80
		}
		b = append(b, c)
		if v == 0 {
			return b
		}
	}
}

func sleb(v int64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// tiny registers the tiny module answering value with h, as tool name.
func tiny(t *testing.T, h *host.Host, name, value string) *host.Artifact {
	t.Helper()
	payload := tinyModule(value)
	m := tool.Manifest{Format: tool.Format, Name: name, InputSchema: json.RawMessage(`{"type":"object"}`),
		Hosting: tool.HostingProvisioned, Payload: host.Identity(payload), Runtime: "wasm/2"}
	must(t, h.AddPayload(m.Payload, payload))
	return h.Artifact(m)
}

// cachedHost starts a host over cache dir, logging into the returned buffer.
func cachedHost(t *testing.T, dir string) (*host.Host, *testutil.LockedBuffer) {
	t.Helper()
	logs := &testutil.LockedBuffer{}
	h, err := host.New(context.Background(), &host.Options{CacheDir: dir, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	must(t, err)
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	return h, logs
}

// run provisions a and returns the value of one call.
func run(t *testing.T, a *host.Artifact) string {
	t.Helper()
	inst, err := a.Provision(context.Background(), tool.Handles{}, nil)
	if err != nil {
		t.Fatalf("provision %s: %v", a.Manifest().Name, err)
	}
	defer inst.Close()
	v, err := inst.Invoke(context.Background(), &tool.Call{ID: "c", Input: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatalf("invoke %s: %v", a.Manifest().Name, err)
	}
	return string(v)
}

// entries returns the cache entry files of dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "entries", "*"))
	must(t, err)
	return paths
}

// TestCacheEntriesAreVerified: the attacks an outside red team ran against
// the compilation cache. Each bad entry is dropped with a warning and its
// payload recompiled; the tool runs its own code; nothing is fatal.
func TestCacheEntriesAreVerified(t *testing.T) {
	// fill compiles tools a and b into a fresh cache and returns it with
	// the entry of each.
	fill := func(t *testing.T) (dir, entryA, entryB string) {
		dir = filepath.Join(t.TempDir(), "cache")
		h, _ := cachedHost(t, dir)
		if run(t, tiny(t, h, "a", "A")) != `"A"` || run(t, tiny(t, h, "b", "B")) != `"B"` {
			t.Fatal("fresh compile")
		}
		must(t, h.Close(context.Background()))
		es := entries(t, dir)
		if len(es) != 2 {
			t.Fatalf("entries = %v, want 2", es)
		}
		// Which is which: only a's entry holds a's identity.
		a := host.Identity(tinyModule("A"))
		b, err := os.ReadFile(es[0])
		must(t, err)
		if bytes.Contains(b, []byte(a)) {
			return dir, es[0], es[1]
		}
		return dir, es[1], es[0]
	}
	tamper := map[string]func(t *testing.T, entryA, entryB string){
		"flipped byte in the compiled code": func(t *testing.T, entryA, _ string) {
			b, err := os.ReadFile(entryA)
			must(t, err)
			b[len(b)/2] ^= 0x40
			must(t, os.WriteFile(entryA, b, 0o600))
		},
		"function count 0xFFFFFFFF": func(t *testing.T, entryA, _ string) {
			b, err := os.ReadFile(entryA)
			must(t, err)
			i := bytes.Index(b, []byte("WAZEVO"))
			if i < 0 {
				t.Fatal("no wazero header in the entry")
			}
			at := i + 6 + 1 + int(b[i+6]) // magic, version length, version
			binary.LittleEndian.PutUint32(b[at:], 0xFFFFFFFF)
			must(t, os.WriteFile(entryA, b, 0o600))
		},
		"another tool's valid entry copied over": func(t *testing.T, entryA, entryB string) {
			b, err := os.ReadFile(entryB)
			must(t, err)
			must(t, os.WriteFile(entryA, b, 0o600))
		},
		"truncated": func(t *testing.T, entryA, _ string) {
			b, err := os.ReadFile(entryA)
			must(t, err)
			must(t, os.WriteFile(entryA, b[:len(b)/3], 0o600))
		},
		"not an entry at all": func(t *testing.T, entryA, _ string) {
			must(t, os.WriteFile(entryA, []byte("WAZEVO\x07v1.12.0\xff\xff\xff\xff"), 0o600))
		},
	}
	for name, attack := range tamper {
		t.Run(name, func(t *testing.T) {
			dir, entryA, entryB := fill(t)
			attack(t, entryA, entryB)
			h, logs := cachedHost(t, dir)
			if got := run(t, tiny(t, h, "a", "A")); got != `"A"` {
				t.Fatalf("a answered %s: it ran other code than its payload's", got)
			}
			if got := run(t, tiny(t, h, "b", "B")); got != `"B"` {
				t.Fatalf("b answered %s", got)
			}
			if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "dropping a compilation cache entry") {
				t.Fatalf("no warning about the bad entry; logs:\n%s", logs)
			}
			// The entry was replaced by a good one: the next host uses it
			// without a word.
			h2, logs2 := cachedHost(t, dir)
			before, err := os.Stat(entryA)
			must(t, err)
			if got := run(t, tiny(t, h2, "a", "A")); got != `"A"` {
				t.Fatalf("after repair a answered %s", got)
			}
			after, err := os.Stat(entryA)
			must(t, err)
			if logs2.String() != "" || !os.SameFile(before, after) {
				t.Fatalf("the repaired entry was not used as is (rewritten: %v); logs:\n%s", !os.SameFile(before, after), logs2)
			}
		})
	}
	t.Run("a valid entry is used", func(t *testing.T) {
		dir, entryA, _ := fill(t)
		before, err := os.Stat(entryA)
		must(t, err)
		h, logs := cachedHost(t, dir)
		if got := run(t, tiny(t, h, "a", "A")); got != `"A"` {
			t.Fatalf("a answered %s", got)
		}
		after, err := os.Stat(entryA)
		must(t, err)
		if logs.String() != "" || !os.SameFile(before, after) {
			t.Fatalf("valid entry rewritten (%v) or warned about:\n%s", !os.SameFile(before, after), logs)
		}
	})
	t.Run("an entry under another key", func(t *testing.T) {
		dir, _, _ := fill(t)
		other := filepath.Join(t.TempDir(), "cache")
		h, _ := cachedHost(t, other) // a cache with its own key
		must(t, h.Close(context.Background()))
		for _, e := range entries(t, dir) {
			b, err := os.ReadFile(e)
			must(t, err)
			must(t, os.WriteFile(filepath.Join(other, "entries", filepath.Base(e)), b, 0o600))
		}
		h2, logs := cachedHost(t, other)
		if got := run(t, tiny(t, h2, "a", "A")); got != `"A"` || !strings.Contains(logs.String(), "MAC does not verify") {
			t.Fatalf("a answered %s; logs:\n%s", got, logs)
		}
	})
}

// TestCacheDirMustBePrivate: a cache directory (or key) that others can
// write, or read for the key, is refused with an error saying so.
func TestCacheDirMustBePrivate(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string
	}{
		{"world-writable dir", func(t *testing.T, dir string) { must(t, os.Chmod(dir, 0o777)) }, "writable by group or others"},
		{"group-writable dir", func(t *testing.T, dir string) { must(t, os.Chmod(dir, 0o770)) }, "writable by group or others"},
		{"world-writable entries", func(t *testing.T, dir string) {
			must(t, os.Chmod(filepath.Join(dir, "entries"), 0o777))
		}, "writable by group or others"},
		{"key readable by others", func(t *testing.T, dir string) { must(t, os.Chmod(filepath.Join(dir, "key"), 0o644)) }, "only its owner can read and write"},
		{"key of the wrong size", func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "key"), []byte("short"), 0o600))
		}, "has 5 bytes"},
		{"not a directory", func(t *testing.T, dir string) {
			must(t, os.RemoveAll(dir))
			must(t, os.WriteFile(dir, nil, 0o600))
		}, "not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "cache")
			h, _ := cachedHost(t, dir) // makes the dir, its entries and its key
			must(t, h.Close(context.Background()))
			tt.setup(t, dir)
			_, err := host.New(context.Background(), &host.Options{CacheDir: dir})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	t.Run("a private dir is accepted, and 0755 is private enough", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "cache")
		must(t, os.Mkdir(dir, 0o755))
		h, _ := cachedHost(t, dir)
		if got := run(t, tiny(t, h, "a", "A")); got != `"A"` {
			t.Fatalf("a answered %s", got)
		}
		fi, err := os.Stat(filepath.Join(dir, "key"))
		must(t, err)
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("key mode %v, want 0600", fi.Mode().Perm())
		}
	})
}
