package script

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
)

// opCall is the operation name in every error of [Runtime.Call].
const opCall = "call"

// Options tunes a [Runtime]. The zero value and nil mean the defaults.
type Options struct {
	// MaxConcurrent bounds how many calls run scripts at once. A call waits
	// for a free slot within its own deadline. A script that outlives its
	// call (see [Runtime.Call]) gives its slot back when the call ends; at
	// most 4×MaxConcurrent such scripts linger, and past that one keeps
	// its slot until it ends. Default: runtime.GOMAXPROCS(0).
	MaxConcurrent int
	// Logger receives a warning when a script outlives its call and an
	// error when the engine fails. Nil discards.
	Logger *slog.Logger
}

// Runtime is the js handle ([handle.JS]). It is safe for concurrent use;
// every call runs in a realm that no other call uses at the same time.
type Runtime struct {
	grants Grants
	// slots bounds the scripts of live calls. A call past its deadline
	// whose script is still inside a built-in moves from slots to
	// lingering, so that its slot is free at the deadline.
	slots chan struct{}
	// lingering bounds the scripts that outlived their calls (given up
	// inside a built-in that does not poll the engine's interrupt, which
	// the memory limit bounds): lingerPerSlot times the slots.
	lingering chan struct{}
	// idle holds realms set up and locked down, ready for the next call.
	idle    chan *realm
	checked sources
	log     *slog.Logger
	// afterLinger, if set, is called when a script that outlived its
	// call has finished and its realm is freed (tests).
	afterLinger func()
}

// lingerPerSlot is how many abandoned scripts each slot may leave running.
// Past the bound, an abandoned script keeps its slot until it ends.
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
	r := &Runtime{
		grants:    g.withDefaults(),
		slots:     make(chan struct{}, o.MaxConcurrent),
		lingering: make(chan struct{}, lingerPerSlot*o.MaxConcurrent),
		idle:      make(chan *realm, o.MaxConcurrent),
		log:       o.Logger,
	}
	runtime.AddCleanup(r, closeIdle, r.idle)
	return r, nil
}

// Call evaluates source, a JavaScript expression whose value is a function
// ("(args) => args.a + args.b", "function (args) { … }", "async (args) =>
// …"), calls it with args read into the script's own realm by JSON.parse
// (empty args mean undefined), and returns its result encoded by
// JSON.stringify. A returned promise is settled first.
//
// Errors are *handle.CapabilityError:
//   - too_large: the source, args or result is beyond its grant, or the
//     script went over its memory budget (at the allocation that would
//     pass it: a string or array that doubles, a join, a repeat, a
//     concat, a memory bomb);
//   - invalid_argument: a syntax error, a source that is not one function
//     expression, args that are not JSON or nest deeper than 5000, an
//     uncaught exception (its message and position), a rejected or
//     never-settled promise, a result JSON cannot hold (cyclic, a
//     BigInt), or a call stack deeper than the engine allows;
//   - timeout or cancelled: the context ended, or Grants.Timeout passed;
//   - internal: the engine failed (the process survives).
//
// When the call is stopped (timeout, cancellation) the engine is
// interrupted, which stops the script within milliseconds: the
// interpreter and the regular-expression engine poll the interrupt. A
// built-in written in C that does not poll (a sort, concat or join of
// millions of elements) runs on; Call returns 5 ms after the deadline
// all the same, the realm is given up and freed when the built-in ends,
// and the script's slot is free for the next call as Call returns (see
// Options.MaxConcurrent).
func (r *Runtime) Call(ctx context.Context, source string, args json.RawMessage) (json.RawMessage, error) {
	if len(source) > r.grants.MaxScriptBytes {
		return nil, handle.Errorf(handle.KindJS, opCall, protocol.CodeTooLarge,
			"the script is %d bytes; the limit is %d", len(source), r.grants.MaxScriptBytes)
	}
	if len(args) > r.grants.MaxArgsBytes {
		return nil, handle.Errorf(handle.KindJS, opCall, protocol.CodeTooLarge,
			"the arguments are %d bytes of JSON; the limit is %d", len(args), r.grants.MaxArgsBytes)
	}
	if err := checkArgs(args); err != nil {
		return nil, err
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
	rl, err := r.take(ctx)
	if err != nil {
		<-r.slots
		return nil, err
	}
	o, passed := rl.call(ctx, r.grants, source, r.checked.has(source), args)
	if strings.IndexByte(source, '#') >= 0 {
		rl.reuse = false // see recycle
	}
	if passed {
		r.checked.add(source)
	}
	if rl.vm.Gone() {
		r.linger(rl, o.err)
		return nil, o.err
	}
	<-r.slots
	r.recycle(rl)
	return o.result, o.err
}

// linger leaves rl to its script, which runs on inside a built-in past
// its call: the script's slot moves to a lingering token when one is
// free (else the script keeps its slot), given back when the engine is
// freed at the script's end.
func (r *Runtime) linger(rl *realm, cause error) {
	token := r.slots
	select {
	case r.lingering <- struct{}{}:
		<-r.slots
		token = r.lingering
		r.log.Warn("js: script still running after its call ended; it will finish in the background, its slot given back",
			slog.Any("reason", cause))
	default:
		r.log.Warn("js: script still running after its call ended; it keeps its slot until it finishes (too many scripts linger already)",
			slog.Any("reason", cause))
	}
	after := r.afterLinger
	rl.vm.OnClose(func() {
		<-token
		if after != nil {
			after()
		}
	})
	rl.close()
}

// take returns an idle realm, or a new one.
func (r *Runtime) take(ctx context.Context) (*realm, error) {
	select {
	case rl := <-r.idle:
		return rl, nil
	default:
	}
	rl, err := newRealm(ctx, r.grants)
	if err == nil {
		return rl, nil
	}
	if ce := engineError(ctx, err, r.grants); ce.Code == protocol.CodeTimeout || ce.Code == protocol.CodeCancelled {
		return nil, ce
	}
	// A bug: set-up runs only this package's code.
	r.log.Error("js: cannot set up a realm", slog.String("err", err.Error()))
	return nil, &handle.CapabilityError{Handle: handle.KindJS, Op: opCall, Code: protocol.CodeInternal,
		Message: "the JavaScript runtime could not be set up; this is a bug in the runtime, not in the script", Err: err}
}

// recycle keeps rl for a later call when its call left nothing behind
// that tidying cannot remove and its heap is back near where it was made,
// else closes it. What ends reuse (realm.reuse):
//   - a call that was stopped (deadline, cancel, memory, a source over
//     the grant): the engine unwound it, but nothing tells what state it
//     was in when it stopped;
//   - a global tidy could not delete, or a global object changed
//     otherwise (its prototype, its extensibility);
//   - a call that compiled a private name (#x) — in its source, or in
//     what it handed eval or a Function constructor: a class's private
//     field can be stamped onto any object, frozen built-ins included
//     (`class B extends A { #x = …; }`, `new B(Object.prototype)`), the
//     next call cannot see it, and nothing can remove it; a '#' anywhere
//     in the text counts, as the engine offers no parser to tell it from
//     one in a string;
//   - an exception that evaluating the expression itself threw.
//
// QuickJS's Symbol.for registry, unlike goja's, holds a key only while a
// symbol for it lives (TestSymbolRegistry), so it does not end reuse.
func (r *Runtime) recycle(rl *realm) {
	if rl.reuse && rl.tidy() && rl.settled() {
		select {
		case r.idle <- rl:
			return
		default:
		}
	}
	rl.close()
}

// closeIdle closes the idle realms of a Runtime that is no longer
// reachable (a cleanup registered by New).
func closeIdle(idle chan *realm) {
	for {
		select {
		case rl := <-idle:
			rl.close()
		default:
			return
		}
	}
}

// Bounds of the set of sources known to compile as one expression: up to
// maxSources of them, from at most maxSourceBytes of text, all forgotten
// when either is reached.
const (
	maxSources     = 256
	maxSourceBytes = 4 << 20
)

// sources are the sources checkSource passed, so that a call whose
// source was seen before skips compiling it twice more.
type sources struct {
	mu    sync.Mutex
	m     map[string]struct{}
	bytes int
}

func (s *sources) has(src string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[src]
	return ok
}

func (s *sources) add(src string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[src]; ok {
		return
	}
	if len(s.m) >= maxSources || s.bytes+len(src) > maxSourceBytes {
		s.m, s.bytes = nil, 0
	}
	if s.m == nil {
		s.m = make(map[string]struct{})
	}
	s.m[src] = struct{}{}
	s.bytes += len(src)
}

// checkArgs refuses args that are not JSON, or nest deeper than
// maxNesting, before any engine sees them.
func checkArgs(args json.RawMessage) *handle.CapabilityError {
	if len(args) == 0 {
		return nil
	}
	if depth(string(args)) > maxNesting {
		return fail("the arguments nest deeper than %d levels", maxNesting)
	}
	if !json.Valid(args) {
		var v any
		err := json.Unmarshal(args, &v)
		return fail("the arguments are not valid JSON: %v", err)
	}
	return nil
}
