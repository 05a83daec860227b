package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/brainrt/brain/host"
	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/tool"
)

// abiModule hand-assembles an ABI module whose brain_invoke body is
// invoke. Besides the ABI exports it has a helper (() -> i64, answering
// "v\"ok\""), reachable directly (function index 3 before
// instrumentation) and through table slot 0, and rec ((i64) -> i64), an
// exponential recursion with no loop (index 4). withImport adds an import
// of brain.progress, so that defined functions do not start at index 0.
func abiModule(invoke []byte, withImport bool) []byte {
	initOut := `{"ok":true,"value":null}`
	callOut := `v"ok"`
	const callAt = 256
	section := func(id byte, body ...[]byte) []byte {
		b := bytes.Join(body, nil)
		return append(append([]byte{id}, uleb(uint64(len(b)))...), b...)
	}
	name := func(s string) []byte { return append(uleb(uint64(len(s))), s...) }
	body := func(instr ...[]byte) []byte {
		b := append([]byte{0}, bytes.Join(instr, nil)...)
		b = append(b, 0x0b)
		return append(uleb(uint64(len(b))), b...)
	}
	i64 := func(v uint64) []byte { return append([]byte{0x42}, sleb(int64(v))...) }
	data := func(at int, s string) []byte {
		return append(append([]byte{0, 0x41}, sleb(int64(at))...), append([]byte{0x0b}, name(s)...)...)
	}
	idx := func(i int) []byte { // a defined function's index
		if withImport {
			i++
		}
		return uleb(uint64(i))
	}
	types := section(1, []byte{5,
		0x60, 1, 0x7f, 1, 0x7f, // 0: (i32) -> i32
		0x60, 2, 0x7f, 0x7f, 1, 0x7e, // 1: (i32, i32) -> i64
		0x60, 0, 1, 0x7e, // 2: () -> i64
		0x60, 1, 0x7e, 1, 0x7e, // 3: (i64) -> i64
		0x60, 2, 0x7f, 0x7f, 0, // 4: (i32, i32) -> ()
	})
	var imports []byte
	if withImport {
		imports = section(2, []byte{1}, name("brain"), name("progress"), []byte{0, 4})
	}
	// rec(n) = n == 0 ? 0 : rec(n-1) + rec(n-1)
	rec := bytes.Join([][]byte{{0x20, 0, 0x50, 0x04, 0x7e}, i64(0), {0x05, 0x20, 0}, i64(1), {0x7d, 0x10}, idx(4),
		{0x20, 0}, i64(1), {0x7d, 0x10}, idx(4), {0x7c, 0x0b}}, nil)
	return bytes.Join([][]byte{
		[]byte("\x00asm\x01\x00\x00\x00"),
		types,
		imports,
		section(3, []byte{5, 0, 1, 1, 2, 3}),
		section(4, []byte{1, 0x70, 0, 1}), // a funcref table of 1
		section(5, []byte{1, 0, 1}),
		section(7, []byte{5}, name("memory"), []byte{2, 0}, name("brain_alloc"), append([]byte{0}, idx(0)...),
			name("brain_init"), append([]byte{0}, idx(1)...), name("brain_invoke"), append([]byte{0}, idx(2)...),
			name("brain_abi_v2"), append([]byte{0}, idx(0)...)), // the version marker: only its name counts
		section(9, []byte{1, 0, 0x41, 0, 0x0b, 1}, idx(3)), // table[0] = helper
		section(10, []byte{5},
			body(append([]byte{0x41}, sleb(1024)...)),
			body(i64(uint64(len(initOut)))),
			body(invoke),
			body(i64(uint64(callAt)<<32|uint64(len(callOut)))),
			body(rec)),
		section(11, []byte{2}, data(0, initOut), data(callAt, callOut)),
	}, nil)
}

// attachModule provisions a hand-assembled module with h.
func attachModule(t *testing.T, h *host.Host, wasm []byte) (tool.Instance, error) {
	t.Helper()
	m := tool.Manifest{Format: tool.Format, Name: "m", InputSchema: json.RawMessage(`{"type":"object"}`),
		Hosting: tool.HostingProvisioned, Payload: host.Identity(wasm), Runtime: "wasm/2"}
	must(t, h.AddPayload(m.Payload, wasm))
	return h.Artifact(m).Provision(context.Background(), tool.Handles{}, nil)
}

// TestInstrumentation: instrumented modules keep their meaning (direct and
// indirect calls reach the same functions once indices move), and are
// stopped at their deadline whether they spin in a loop or recurse with
// no loop at all.
func TestInstrumentation(t *testing.T) {
	h := newHost(t, &host.Options{CacheDir: t.TempDir()})
	helperDirect := func(imp bool) []byte {
		i := 3
		if imp {
			i = 4
		}
		return append([]byte{0x10}, uleb(uint64(i))...)
	}
	tests := []struct {
		name   string
		invoke func(withImport bool) []byte
		code   protocol.Code
	}{
		{"direct call", helperDirect, ""},
		{"indirect call through the table", func(bool) []byte { return []byte{0x41, 0, 0x11, 2, 0} }, ""},
		{"spin in a loop", func(bool) []byte { return []byte{0x03, 0x40, 0x0c, 0, 0x0b, 0x00} }, protocol.CodeTimeout},
		{"a loop of long straight-line code", func(bool) []byte { return straightLoop }, protocol.CodeTimeout},
		{"memory.fill of 1 MiB in a loop", func(bool) []byte { return fillLoop }, protocol.CodeTimeout},
		{"recursion without a loop", func(imp bool) []byte {
			call := []byte{0x42, 60, 0x10, 4}
			if imp {
				call[3] = 5
			}
			return append(call, 0x1a, 0x00) // drop; unreachable
		}, protocol.CodeTimeout},
	}
	for _, tt := range tests {
		for _, imp := range []bool{false, true} {
			name := tt.name + ", no imports"
			if imp {
				name = tt.name + ", an import"
			}
			t.Run(name, func(t *testing.T) {
				inst, err := attachModule(t, h, abiModule(tt.invoke(imp), imp))
				must(t, err)
				defer inst.Close()
				const deadline = 200 * time.Millisecond
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				defer cancel()
				v, err := inst.Invoke(ctx, &tool.Call{ID: "c", Input: json.RawMessage(`{}`)})
				took := time.Since(start)
				switch {
				case tt.code == "" && (err != nil || string(v) != `"ok"`):
					t.Fatalf("invoke = %s, %v", v, err)
				case tt.code != "" && (protocol.OutcomeOf(err).IsOK() || protocol.OutcomeOf(err).Err.Code != tt.code):
					t.Fatalf("invoke = %s, %v; want %s", v, err, tt.code)
				case tt.code != "" && took > deadline+slack:
					t.Fatalf("stopped after %v", took)
				}
			})
		}
	}
	t.Run("refused: a forged vector count, before wazero allocates it", func(t *testing.T) {
		// A function section declaring 0xFFFFFFFF functions in 5 bytes.
		forged := []byte("\x00asm\x01\x00\x00\x00\x03\x05\xff\xff\xff\xff\x0f")
		_, err := attachModule(t, h, forged)
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte("declares 4294967295 entries")) {
			t.Fatalf("attach = %v, want a refusal of the count", err)
		}
	})
	t.Run("refused: an instruction the rewrite does not know", func(t *testing.T) {
		simd := []byte{0xfd, 0x0c, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x1a, 0x42, 0} // v128.const; drop
		_, err := attachModule(t, h, abiModule(simd, false))
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte("cannot be instrumented")) {
			t.Fatalf("attach = %v, want a refusal naming the instrumentation", err)
		}
	})
}

// FuzzInstrument: the rewrite never panics; whatever it returns for a
// module wazero accepts, wazero accepts too.
func FuzzInstrument(f *testing.F) {
	f.Add(abiModule([]byte{0x10, 3}, false))
	f.Add(abiModule([]byte{0x41, 0, 0x11, 2, 0}, true))
	f.Add(abiModule([]byte{0x03, 0x40, 0x0c, 0, 0x0b, 0x00}, true))
	f.Add(tinyModule("A"))
	if b, err := os.ReadFile(filepath.Join(artifacts, "echo.wasm")); err == nil && len(b) < 1<<20 {
		f.Add(b)
	}
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	f.Fuzz(func(t *testing.T, wasm []byte) {
		out, err := host.Instrument(wasm)
		if err != nil {
			if !errors.Is(err, host.ErrNotInstrumentable) {
				t.Fatalf("error of another kind: %v", err)
			}
			return // wazero never sees it (it may allocate what a forged count says)
		}
		cm, inErr := rt.CompileModule(ctx, wasm)
		if inErr != nil {
			return
		}
		_ = cm.Close(ctx)
		cm2, err := rt.CompileModule(ctx, out)
		if err != nil {
			t.Fatalf("instrumented a valid module into an invalid one: %v", err)
		}
		_ = cm2.Close(ctx)
	})
}

// straightLoop is a brain_invoke body that loops over 16,000 copies of a
// straight-line increment of memory[0] (96,000 instructions an iteration,
// about as many as all the loop iterations a fuel allowance counts).
var straightLoop = func() []byte {
	b := []byte{0x03, 0x40}
	for range 16_000 {
		b = append(b, 0x41, 0, 0x41, 0, 0x28, 2, 0, 0x41, 1, 0x6a, 0x36, 2, 0) // mem[0] = mem[0] + 1
	}
	return append(b, 0x0c, 0, 0x0b, 0x00)
}()

// fillLoop is a brain_invoke body that grows memory to 17 pages and then
// fills its first MiB, forever: each iteration is one instruction.
var fillLoop = append(append([]byte{0x41, 16, 0x40, 0, 0x1a, 0x03, 0x40, 0x41, 0, 0x41, 0, 0x41},
	sleb(1<<20)...), 0xfc, 11, 0, 0x0c, 0, 0x0b, 0x00)

// dispatchSpin is a brain_invoke body shaped like Go's wasm output: a
// loop whose header dispatches on local 0 through a br_table to the end of
// one of two blocks. The first block's code jumps forward to the second
// (`i32.const 1; local.set 0; br $loop`: no check needed), the second's
// back to the first with back as local 0's value: 0 names the first
// block, -1 the br_table's default, the second block itself.
func dispatchSpin(back int64) []byte {
	b := []byte{0x03, 0x40, 0x02, 0x40, 0x02, 0x40, 0x20, 0, 0x0e, 1, 0, 1, 0x0b,
		0x41, 1, 0x21, 0, 0x0c, 1, 0x0b, 0x41}
	b = append(b, sleb(back)...)
	return append(b, 0x21, 0, 0x0c, 0, 0x0b, 0x00)
}

// TestInstrumentationPrecision: whatever a fuel unit is made of — a loop
// iteration, a function entry, tens of thousands of straight-line
// instructions, a bulk memory operation on a megabyte — a guest reaches a
// tick within a few milliseconds of work, so that it is stopped within
// its deadline plus 10 ms (the best of three; 30 ms under -race, whose
// Go side is slower), beyond the lateness of the machine itself. Without
// weighting the fuel, the straight-line loop and the fill would run
// hundreds of milliseconds past their deadline.
func TestInstrumentationPrecision(t *testing.T) {
	h := newHost(t, &host.Options{CacheDir: t.TempDir()})
	tests := []struct {
		name   string
		invoke []byte
	}{
		{"spin", []byte{0x03, 0x40, 0x0c, 0, 0x0b, 0x00}},
		{"straight-line code in a loop", straightLoop},
		{"memory.fill in a loop", fillLoop},
		{"recursion without a loop", append([]byte{0x42, 60, 0x10, 4}, 0x1a, 0x00)},
		{"a dispatch loop: forward, then back", dispatchSpin(0)},
		{"a dispatch loop: back through the br_table's default", dispatchSpin(-1)},
	}
	precision := 10 * time.Millisecond
	if testutil.RaceEnabled {
		precision = 30 * time.Millisecond
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inst, err := attachModule(t, h, abiModule(tt.invoke, false))
			must(t, err)
			defer inst.Close()
			const deadline = 50 * time.Millisecond
			best, bestLate := time.Hour, time.Duration(0)
			for range 3 {
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				// The machine's own lateness: when a goroutine waiting for
				// the deadline wakes. On a loaded machine the deadline's
				// timer fires late and a woken goroutine waits for a core
				// (40 ms beside another go test -race): that delay is the
				// machine's, not the instrumentation's, and is not counted.
				woke := make(chan time.Time, 1)
				go func() { <-ctx.Done(); woke <- time.Now() }()
				_, err := inst.Invoke(ctx, &tool.Call{ID: "c", Input: json.RawMessage(`{}`)})
				took := time.Since(start)
				cancel()
				if o := protocol.OutcomeOf(err); o.IsOK() || o.Err.Code != protocol.CodeTimeout || took > deadline+slack {
					t.Fatalf("invoke = %v after %v, want timeout within %v", err, took, deadline+slack)
				}
				late := max(0, (<-woke).Sub(start)-deadline)
				if took-late < best {
					best, bestLate = took-late, late
				}
			}
			if over := best - deadline; over > precision {
				t.Fatalf("stopped %v after its deadline at best (the machine's own lateness, %v, not counted), want within %v", over, bestLate, precision)
			}
			t.Logf("stopped %v after the deadline at best (and %v the machine's own lateness)", best-deadline, bestLate)
		})
	}
}
