package script

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/internal/testutil"
)

// idleRealm makes one call on r (which has one slot) and returns the
// realm it left idle, or nil when the realm was closed.
func idleRealm(t *testing.T, r *Runtime, src string) *realm {
	t.Helper()
	if _, err := r.Call(context.Background(), src, nil); err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	select {
	case rl := <-r.idle:
		r.idle <- rl
		return rl
	default:
		return nil
	}
}

// TestPrivateNamesEndTheRealm: a class's private field can be stamped
// onto a frozen built-in, where no later call can see or remove it, so a
// call that compiled a private name — in its source or through eval —
// closes its realm; a call without one keeps it.
func TestPrivateNamesEndTheRealm(t *testing.T) {
	r, err := New(Grants{}, &Options{MaxConcurrent: 1})
	if err != nil {
		t.Fatal(err)
	}
	first := idleRealm(t, r, `() => 1`)
	if first == nil {
		t.Fatal("a plain call closed its realm")
	}
	if rl := idleRealm(t, r, `() => 2`); rl != first {
		t.Fatal("a plain call did not reuse the realm")
	}
	stamp := `() => { class B { constructor(o) { return o } }; class C extends B { #pad = "x".repeat(1e5); constructor(o) { super(o) } static has(o) { return #pad in o } }; new C(Object.prototype); return C.has(Object.prototype) }`
	out, err := r.Call(context.Background(), stamp, nil)
	if err != nil || string(out) != "true" {
		t.Fatalf("the stamp: %s, %v (QuickJS lets a private field onto a frozen object: the reason for the rule)", out, err)
	}
	if rl := idleRealm(t, r, `() => 3`); rl == first {
		t.Fatal("the realm a private name was compiled in was kept")
	}
	second := idleRealm(t, r, `() => 4`)
	if rl := idleRealm(t, r, `() => (0, eval)("class K { #x = 1 }; 1")`); rl == second {
		t.Fatal("the realm an eval compiled a private name in was kept")
	}
}

// TestSymbolRegistry: QuickJS keeps a registered symbol only while
// something refers to it, so Symbol.for leaves nothing in a realm and
// does not end its reuse (goja's registry kept every key for the
// runtime's life, and the goja handle dropped the runtime).
func TestSymbolRegistry(t *testing.T) {
	r, err := New(Grants{Timeout: 30 * time.Second}, &Options{MaxConcurrent: 1})
	if err != nil {
		t.Fatal(err)
	}
	rl := idleRealm(t, r, `() => 1`)
	rl.vm.GC()
	base := rl.vm.HeapBytes()
	// Fewer under the race detector, which slows the engine twentyfold;
	// 100 000 keys would still leave 12 MiB if they were kept.
	n := 100000
	if testutil.RaceEnabled {
		n = 20000
	}
	register := `() => { for (let i = 0; i < ` + strconv.Itoa(n) + `; i++) Symbol.for("key " + i + " ".repeat(100)); return Symbol.keyFor(Symbol.for("k")) }`
	for range 5 {
		if got := idleRealm(t, r, register); got != rl {
			t.Fatal("a call to Symbol.for closed its realm")
		}
	}
	rl.vm.GC()
	if grew := rl.vm.HeapBytes() - base; grew > 256<<10 {
		t.Fatalf("%d registered keys left %d KiB in the realm", 5*n, grew>>10)
	}
}

// BenchmarkNewRealm is what a call pays when no idle realm is left (the
// first call of a slot, and the call after one that closed its realm):
// a QuickJS runtime and context, realm.js's lockdown of every intrinsic.
func BenchmarkNewRealm(b *testing.B) {
	g := Grants{}.withDefaults()
	b.ReportAllocs()
	for b.Loop() {
		rl, err := newRealm(context.Background(), g)
		if err != nil {
			b.Fatal(err)
		}
		rl.close()
	}
}

// FuzzCheckArgs: the check of a call's arguments never panics, passes
// only valid JSON, and refuses valid JSON only for its nesting, which
// depth counts as encoding/json reads it (brackets inside strings, escaped
// quotes, do not count).
func FuzzCheckArgs(f *testing.F) {
	for _, s := range []string{`{"a": [1, 2]}`, `"[\"[["`, `[[[]]]`, `{"a":`, `"\\"`, `[` + strings.Repeat("[", 6000)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := checkArgs(b)
		if len(b) == 0 {
			if err != nil {
				t.Fatalf("empty args refused: %v", err)
			}
			return
		}
		valid := json.Valid(b)
		switch {
		case err == nil && !valid:
			t.Fatalf("%q passed, but it is not JSON", b)
		case err != nil && valid && depth(string(b)) <= maxNesting:
			t.Fatalf("%q refused (%v), but it is JSON nested %d deep", b, err, depth(string(b)))
		}
	})
}
