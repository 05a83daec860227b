package script_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide/script"
)

// TestSpinningBuiltins: the Array methods whose loop over a length runs
// in C without polling the interrupt or allocating (the probe's
// TypeScript tool spun a core for ever after its call's timeout) end
// their call at once or at its deadline, and no script outlives its call.
func TestSpinningBuiltins(t *testing.T) {
	var logs testutil.LockedBuffer
	r := newRuntime(t, script.Grants{Timeout: 30 * time.Second}, &script.Options{MaxConcurrent: 1,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	const huge = `({ length: 2 ** 53 - 1 })`
	for name, src := range map[string]string{
		"indexOf":     `() => Array.prototype.indexOf.call(` + huge + `, 1)`,
		"includes":    `() => Array.prototype.includes.call(` + huge + `, 1)`,
		"lastIndexOf": `() => Array.prototype.lastIndexOf.call(` + huge + `, 1)`,
		"reverse":     `() => Array.prototype.reverse.call(` + huge + `)`,
		"copyWithin":  `() => Array.prototype.copyWithin.call(` + huge + `, 1, 0)`,
		"sparse":      `() => Array(2 ** 32 - 1).indexOf(1)`,
		"join":        `() => Array.prototype.join.call(` + huge + `, "")`,
		"forEach":     `() => Array.prototype.forEach.call(` + huge + `, () => {})`,
	} {
		t.Run(name, func(t *testing.T) {
			warm(t, r)
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			_, err := r.Call(ctx, src, nil)
			if c := handle.CodeOf(err); c != protocol.CodeTooLarge && c != protocol.CodeTimeout {
				t.Fatalf("%v, want too_large or timeout", err)
			}
			if strings.Contains(logs.String(), "still running after its call ended") {
				t.Fatalf("the script outlived its call: %s", logs.String())
			}
		})
	}
}

// TestFlatteningBuiltinsStop: flat and flatMap walk the arrays they
// flatten as well as their receiver, and concat the sum of what it
// spreads: [s].flat() of an s of 2^32-1 holes ran on in C for minutes
// after its call. Each case ends too_large at once, or at its deadline;
// one that ends at its deadline may outlive it by what a loaded machine
// takes to reach the engine's next poll (Call gives a script 5 ms), but
// its realm must be freed well within the 20 s that tell a polling loop
// from one in C (which walks 2^32 holes in about a minute here, and far
// longer under the race detector).
func TestFlatteningBuiltinsStop(t *testing.T) {
	var logs testutil.LockedBuffer
	r := newRuntime(t, script.Grants{Timeout: 30 * time.Second}, &script.Options{MaxConcurrent: 1,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	freed := make(chan struct{}, 1)
	script.AfterLinger(r, func() { freed <- struct{}{} })
	for name, src := range map[string]string{
		"flat of a sparse element":  `() => { const s = []; s.length = 2 ** 32 - 1; return [s].flat() }`,
		"flat of many elements":     `() => { const m = []; m.length = 1 << 20; return Array(1000).fill(m).flat() }`,
		"flat deep":                 `() => { const s = []; s.length = 2 ** 32 - 1; return [[[s]]].flat(Infinity) }`,
		"flatMap to a sparse array": `() => { const s = []; s.length = 2 ** 32 - 1; return [1].flatMap(() => s) }`,
		"flatMap to many arrays":    `() => { const m = []; m.length = 1 << 20; return Array(1000).fill(0).flatMap(() => m) }`,
		"concat of many arrays":     `() => { const m = []; m.length = 1 << 20; return Array.prototype.concat.apply([], Array(2000).fill(m)) }`,
	} {
		t.Run(name, func(t *testing.T) {
			warm(t, r)
			before := strings.Count(logs.String(), "still running after its call ended")
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			_, err := r.Call(ctx, src, nil)
			if c := handle.CodeOf(err); c != protocol.CodeTooLarge && c != protocol.CodeTimeout {
				t.Fatalf("%v, want too_large or timeout", err)
			}
			if strings.Count(logs.String(), "still running after its call ended") == before {
				return
			}
			select {
			case <-freed:
			case <-time.After(20 * time.Second):
				t.Fatalf("the script still runs 20 s after its call ended: %s", logs.String())
			}
		})
	}
}

// earlyDeadline is a context whose deadline comes before it ends, as
// when the engine's own timer, armed from the deadline, fires before the
// context's timer goroutine has marked it done: deterministically.
type earlyDeadline struct {
	context.Context
	d time.Time
}

func (c earlyDeadline) Deadline() (time.Time, bool) { return c.d, true }

// TestInterruptCaughtInAsyncCode: an async function turns the engine's
// interrupt into a rejection its caller may catch; the call still ends
// timeout.
func TestInterruptCaughtInAsyncCode(t *testing.T) {
	r := newRuntime(t, script.Grants{Timeout: 30 * time.Second}, nil)
	warm(t, r)
	// The context ends 10 s after its deadline, which no correct run
	// reaches: the call must end at the deadline, 100 ms from now.
	parent, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx := earlyDeadline{parent, time.Now().Add(100 * time.Millisecond)}
	out, err := r.Call(ctx, `async () => { try { await (async () => { for (;;) {} })() } catch (e) { return "caught " + e } }`, nil)
	check(t, out, err, "", protocol.CodeTimeout, "")
}
