package jsvm_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"modernc.org/quickjs"

	"github.com/brainrt/brain/internal/jsvm"
)

// evalModule compiles src as a module and evaluates it with EvalModule,
// then returns globalThis.out.
func evalModule(ctx context.Context, vm *jsvm.VM, src string) (any, error) {
	var out any
	err := vm.Run(ctx, func(q *quickjs.VM) error {
		code, err := q.Compile(src, quickjs.EvalModule)
		if err != nil {
			return err
		}
		if err := vm.EvalModule(code); err != nil {
			return err
		}
		out, err = q.Eval(`globalThis.out`, quickjs.EvalGlobal)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// TestEvalModule: a module's top-level await runs to its end through the
// promise jobs it needs; one that never settles fails with
// ErrAwaitNeverSettled rather than crashing the engine (quickjs's
// EvalBytecode dereferenced nil there), and a module that throws or
// rejects fails with what it threw. The VM serves the next script after
// each.
func TestEvalModule(t *testing.T) {
	vm := newVM(t, jsvm.Limits{})
	// A deadline, so that a regression fails rather than hangs.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range []struct {
		name, src string
		out       any
		never     bool
		thrown    string
	}{
		{name: "plain", src: `globalThis.out = 1; export default 2;`, out: 1},
		{name: "await", src: `let n = 0; for (let i = 0; i < 10; i++) n += await Promise.resolve(i); globalThis.out = n;`, out: 45},
		{name: "never", src: `await new Promise(() => {}); globalThis.out = 3;`, never: true},
		{name: "never after export", src: `export const x = 1; globalThis.out = 4; await new Promise(() => {});`, never: true},
		{name: "never after a chain", src: `await Promise.resolve(); await null; await new Promise(() => {});`, never: true},
		{name: "throws", src: `throw new TypeError("top");`, thrown: "TypeError: top"},
		{name: "rejects", src: `await Promise.reject(new RangeError("later"));`, thrown: "RangeError: later"},
		// A value that is no Error, that reads as nothing (the re-probe's
		// build said "evaluate the bundle: : ").
		{name: "rejects with nothing readable", src: `await Promise.reject(Object.create(null));`, thrown: "a value that could not be read"},
		{name: "throws nothing readable", src: `throw Object.create(null);`, thrown: "a value that could not be read"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := evalModule(ctx, vm, c.src)
			switch {
			case c.never:
				if !errors.Is(err, jsvm.ErrAwaitNeverSettled) || !strings.Contains(err.Error(), "top-level await never settled") {
					t.Fatalf("%v, want ErrAwaitNeverSettled", err)
				}
			case c.thrown != "":
				if jsvm.KindOf(err) != jsvm.Thrown || !strings.Contains(err.Error(), c.thrown) {
					t.Fatalf("%v, want %s thrown", err, c.thrown)
				}
			case err != nil || out != c.out:
				t.Fatalf("%v, %v; want %v", out, err, c.out)
			}
			if out, err := eval(ctx, vm, `1 + 1`); err != nil || out != 2 {
				t.Fatalf("the next script: %v, %v", out, err)
			}
		})
	}
}

// TestEvalModuleDeadline: a module that loops, at its top level or in the
// jobs its await runs, stops at its deadline.
func TestEvalModuleDeadline(t *testing.T) {
	for _, src := range []string{
		`for (;;) {}`,
		`const f = () => Promise.resolve().then(f); f(); await new Promise(() => {});`,
	} {
		vm := newVM(t, jsvm.Limits{})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err := evalModule(ctx, vm, src)
		cancel()
		if jsvm.KindOf(err) != jsvm.Timeout {
			t.Fatalf("%s: %v, want a timeout", src, err)
		}
	}
}
