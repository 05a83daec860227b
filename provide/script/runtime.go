package script

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/dop251/goja"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
)

// opCall is the operation name in every error of [Runtime.Call].
const opCall = "call"

// abandonAfter is how long Call waits, once the deadline has passed or the
// context is cancelled, for the interrupted script to unwind before it
// returns without it. JavaScript code stops at its next instruction; a
// built-in written in Go stops only when it returns.
const abandonAfter = 100 * time.Millisecond

// Options tunes a [Runtime]. The zero value and nil mean the defaults.
type Options struct {
	// MaxConcurrent bounds how many calls run scripts at once. A call waits
	// for a free slot within its own deadline. A script that outlives its
	// call (see [Runtime.Call]) gives its slot back when the call ends; at
	// most 4×MaxConcurrent such scripts linger, and past that one keeps
	// its slot until it ends. Default: runtime.GOMAXPROCS(0).
	MaxConcurrent int
	// Logger receives a warning when a script outlives its call and an
	// error when the engine panics. Nil discards.
	Logger *slog.Logger
}

// Runtime is the js handle ([handle.JS]). It is safe for concurrent use;
// every call runs in a goja runtime of its own.
type Runtime struct {
	grants Grants
	lim    limits
	// slots bounds the scripts of live calls. A call past its deadline
	// whose script is still inside a built-in moves from slots to
	// lingering, so that its slot is free at the deadline.
	slots chan struct{}
	// lingering bounds the scripts that outlived their calls (abandoned
	// inside a built-in, which ends within matchTimeout for a regular
	// expression): lingerPerSlot times the slots.
	lingering chan struct{}
	// idle holds runtimes set up and locked down, ready for the next call;
	// programs holds compiled scripts.
	idle     chan *call
	programs programs
	log      *slog.Logger
}

// lingerPerSlot is how many abandoned scripts each slot may leave running.
// A script abandoned inside a regular expression ends at most matchTimeout
// (5s) after the match started, so a slot leaves about matchTimeout/Timeout
// of them behind at worst; past the bound, an abandoned script keeps its
// slot until it ends, as every script did before.
const lingerPerSlot = 4

var _ handle.JS = (*Runtime)(nil)

// New returns a Runtime under grants g. It fails with a *grant.FieldError
// (wrapped) when g is invalid. opts may be nil.
func New(g Grants, opts *Options) (*Runtime, error) {
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("js grants: %w", err)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxConcurrent < 0 {
		return nil, fmt.Errorf("js options: MaxConcurrent %d must not be negative", o.MaxConcurrent)
	}
	if o.MaxConcurrent == 0 {
		o.MaxConcurrent = runtime.GOMAXPROCS(0)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	g = g.withDefaults()
	r := &Runtime{
		grants:    g,
		lim:       newLimits(g),
		slots:     make(chan struct{}, o.MaxConcurrent),
		lingering: make(chan struct{}, lingerPerSlot*o.MaxConcurrent),
		idle:      make(chan *call, o.MaxConcurrent),
		log:       o.Logger,
	}
	runtime.AddCleanup(r, retireIdle, r.idle)
	return r, nil
}

// Call evaluates source, a JavaScript expression whose value is a function
// ("(args) => args.a + args.b", "function (args) { … }", "async (args) =>
// …"), calls it with args read into the script's own runtime as
// JSON.parse would read them (empty args mean undefined), and returns its
// result encoded as JSON.stringify would. A returned promise is settled first.
//
// Errors are *handle.CapabilityError:
//   - too_large: the source, args or result is beyond its grant, or the
//     script went over its memory budget;
//   - invalid_argument: a syntax error, a source that is not a function,
//     args that are not JSON, an uncaught exception (its message and
//     position), a rejected or never-settled promise, a result JSON cannot
//     hold (cyclic, a BigInt, nested deeper than 5000), or a call stack
//     deeper than 10000 frames;
//   - timeout or cancelled: the context ended, or Grants.Timeout passed;
//   - internal: the engine panicked (the process survives).
//
// When the call is stopped (timeout, cancellation, memory) the script is
// interrupted, and Call returns within about 100ms even when the script is
// inside a long built-in, which goja cannot interrupt. Such a script
// finishes in the background, its runtime discarded, and its slot is free
// for the next call as Call returns (see Options.MaxConcurrent). The
// longest uninterruptible built-in is a backtracking regular expression,
// which regexp2 stops at most 5s after it started.
func (r *Runtime) Call(ctx context.Context, source string, args json.RawMessage) (json.RawMessage, error) {
	if len(source) > r.grants.MaxScriptBytes {
		return nil, handle.Errorf(handle.KindJS, opCall, protocol.CodeTooLarge,
			"the script is %d bytes; the limit is %d", len(source), r.grants.MaxScriptBytes)
	}
	if len(args) > r.grants.MaxArgsBytes {
		return nil, handle.Errorf(handle.KindJS, opCall, protocol.CodeTooLarge,
			"the arguments are %d bytes of JSON; the limit is %d", len(args), r.grants.MaxArgsBytes)
	}
	ctx, cancel := context.WithTimeout(ctx, r.grants.Timeout)
	defer cancel()
	if err := handle.FromContext(ctx, handle.KindJS, opCall); err != nil {
		return nil, err
	}
	select {
	case r.slots <- struct{}{}:
	case <-ctx.Done():
		err := handle.FromContext(ctx, handle.KindJS, opCall)
		if err.Code == protocol.CodeTimeout {
			err.Message = fmt.Sprintf("no script slot came free before the deadline: all %d are busy (some perhaps with scripts still finishing after their calls ended)", cap(r.slots))
		}
		return nil, err
	}

	c := r.take()
	gen := c.begin()
	held := &c.held
	done := c.done
	c.jobs <- job{r: r, gen: gen, source: source, args: args}
	// context.AfterFunc interrupts the script the moment ctx ends, whatever
	// this goroutine is doing. stop runs before cancel (defers run last
	// first), so a call that ends normally is never interrupted.
	stop := context.AfterFunc(ctx, func() { c.abortGen(gen, handle.FromContext(ctx, handle.KindJS, opCall)) })
	defer stop()

	select {
	case o := <-done:
		r.recycle(c, o)
		return o.result, o.err
	case <-c.stopChan(): // the deadline, a cancel, or a limit
	case <-ctx.Done():
	}
	wait := time.NewTimer(abandonAfter)
	defer wait.Stop()
	select {
	case o := <-done:
		r.recycle(c, o)
		return o.result, o.err
	case <-wait.C:
	}
	// The runtime is abandoned to its script, never reused; the next call
	// that finds no idle runtime prepares a fresh one. Its worker ends
	// when the script does.
	c.retire()
	err := c.reason()
	if err == nil {
		err = handle.FromContext(ctx, handle.KindJS, opCall)
	}
	// A script stopped for its memory is left holding its slot: it may be
	// inside a built-in that keeps allocating, and lingering scripts must
	// not add up to more memory than the slots allow.
	if err.Code != protocol.CodeTooLarge && r.abandon(held) {
		r.log.Warn("js: script still running after its call ended; it will finish in the background, its slot given back",
			slog.String("reason", err.Error()))
	} else {
		r.log.Warn("js: script still running after its call ended; it keeps its slot until it finishes (too many scripts linger already)",
			slog.String("reason", err.Error()))
	}
	return nil, err
}

// hold is which token a call's script holds: its slot, or, once its call
// abandoned it, a lingering one.
type hold struct {
	mu        sync.Mutex
	finished  bool // the script ended and gave its token back
	lingering bool // the script holds a lingering token, not a slot
}

// abandon moves the script of a call that ended without it from its slot
// to a lingering token, and reports whether it did: it does not when
// lingering is full (the script keeps its slot) or the script has just
// finished (nothing lingers).
func (r *Runtime) abandon(h *hold) bool {
	select {
	case r.lingering <- struct{}{}:
	default:
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.finished {
		<-r.lingering
		return true
	}
	h.lingering = true
	<-r.slots
	return true
}

// release gives back the token the script holds, when it ends.
func (r *Runtime) release(h *hold) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.finished = true
	if h.lingering {
		<-r.lingering
	} else {
		<-r.slots
	}
}

// outcome is what one run produced. clean is true for a run that ended
// normally (a result or an ordinary error), after which its runtime may be
// reused.
type outcome struct {
	result json.RawMessage
	err    error
	clean  bool
}

// job is one Call for a call's worker goroutine.
type job struct {
	r      *Runtime
	gen    uint64
	source string
	args   json.RawMessage
}

// serve is a call's worker: it runs the Calls given to c, one at a time,
// until c is retired. A runtime keeps one goroutine for its whole life
// rather than a fresh one per Call: goja needs tens of KiB of stack, which
// a new goroutine would grow by copying on every Call, and the stack a
// worker grew stays grown. While idle the worker holds no Runtime, so an
// unreachable Runtime's idle calls can be retired by its cleanup.
//
// A Call that ran for longer than freshStackAfter may have grown the stack
// far (deep recursion through built-ins takes hundreds of MiB); its worker
// hands the runtime to a new goroutine and ends, which frees the stack at
// once rather than keeping it for the idle runtime until garbage
// collections shrink it. A stack cannot grow much within a short Call:
// growing means copying it.
func (c *call) serve() {
	for j := range c.jobs {
		start := time.Now()
		o := j.r.execute(c, j.gen, j.source, j.args)
		long := time.Since(start) > freshStackAfter
		// The token goes back before the outcome, so that a Call made
		// right after this one returns finds its slot free.
		j.r.release(&c.held)
		c.done <- o
		if long {
			go c.serve()
			return
		}
	}
}

// freshStackAfter is how long a Call runs before its worker is replaced
// by one with a fresh stack (see serve).
const freshStackAfter = time.Millisecond

// retire ends c's worker once its current Call, if any, has ended; c must
// not be given another job.
func (c *call) retire() { close(c.jobs) }

// execute prepares c's runtime if it is new, compiles source (or finds it
// compiled) and runs the call of generation gen.
func (r *Runtime) execute(c *call, gen uint64, source string, args json.RawMessage) outcome {
	if c.world == nil {
		if err := c.prepare(); err != nil {
			if cause := c.reason(); cause != nil {
				return outcome{err: cause}
			}
			// A bug: setup and lockdown run only this package's code.
			r.log.Error("js: cannot set up a runtime", slog.String("err", err.Error()))
			return outcome{err: &handle.CapabilityError{Handle: handle.KindJS, Op: opCall, Code: protocol.CodeInternal,
				Message: "the JavaScript runtime could not be set up; this is a bug in the runtime, not in the script", Err: err}}
		}
	}
	comp, err := r.programs.get(source)
	if err != nil {
		return outcome{err: err, clean: true}
	}
	if comp.private {
		c.leavesState = true
	}
	return c.run(gen, comp.prg, args)
}

// take returns an idle runtime, or a new one that execute prepares.
func (r *Runtime) take() *call {
	select {
	case c := <-r.idle:
		return c
	default:
		c := newCall(r.grants, r.lim, r.log)
		go c.serve()
		return c
	}
}

// recycle keeps c, whose run ended with o, for a later call when the call
// ended on its own (nothing stopped it), the engine did not fail, and the
// call's globals could be cleaned away. A stopped call's runtime is
// dropped: goja's value stack may still hold what the script built when
// it was interrupted (a memory budget's worth), which the garbage
// collector could not free while the runtime lives. A late stop meant for
// a reused runtime's earlier call names that call's generation and cannot
// reach the next one.
//
// A call that compiled a private name is dropped too. A class's private
// field can be stamped onto any object, frozen ones included (a base
// class whose constructor returns the object: `class B extends A { #x =
// …; }`, `new B(Object.prototype)`), the next call cannot see it, and
// nothing can remove it: each call could leave its memory budget's worth
// on the built-ins and the runtime would grow without bound across calls.
// Only source text holds a private name — the script's own, or what it
// hands eval and the Function constructors, which note it too — and the
// parser tells it from a '#' in a string (private.go). A call to
// Symbol.for is dropped for the same reason: the symbol registry lives as
// long as the runtime, and keys it adds are never removed.
func (r *Runtime) recycle(c *call, o outcome) {
	if o.clean && !c.leavesState && c.reason() == nil && c.world != nil && c.world.reset() {
		r.put(c)
		return
	}
	c.retire()
}

// put keeps c for a later call, unless enough runtimes are idle.
func (r *Runtime) put(c *call) {
	select {
	case r.idle <- c:
	default:
		c.retire()
	}
}

// retireIdle retires the idle calls of a Runtime that is no longer
// reachable (a cleanup registered by New), so that their workers and goja
// runtimes do not outlive it.
func retireIdle(idle chan *call) {
	for {
		select {
		case c := <-idle:
			c.retire()
		default:
			return
		}
	}
}

// Bounds of the cache of compiled scripts: a Runtime keeps up to
// maxPrograms of them, from at most maxProgramBytes of source, and forgets
// them all when either is reached.
const (
	maxPrograms     = 256
	maxProgramBytes = 4 << 20
)

// programs caches compiled scripts by their source: a goja Program is
// immutable and runs in any runtime, so a call whose source was seen
// before skips parsing and compiling.
type programs struct {
	mu    sync.Mutex
	m     map[string]compiled
	bytes int
}

// compiled is a script compiled, and whether it holds a private name
// (private.go).
type compiled struct {
	prg     *goja.Program
	private bool
}

// get returns source compiled, from the cache or compiled now.
func (ps *programs) get(source string) (compiled, *handle.CapabilityError) {
	ps.mu.Lock()
	comp, ok := ps.m[source]
	ps.mu.Unlock()
	if ok {
		return comp, nil
	}
	comp, err := compile(source)
	if err != nil {
		return compiled{}, err
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if len(ps.m) >= maxPrograms || ps.bytes+len(source) > maxProgramBytes {
		ps.m, ps.bytes = nil, 0
	}
	if ps.m == nil {
		ps.m = make(map[string]compiled)
	}
	if _, ok := ps.m[source]; !ok {
		ps.m[source] = comp
		ps.bytes += len(source)
	}
	return comp, nil
}
