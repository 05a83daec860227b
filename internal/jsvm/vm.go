package jsvm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lib "modernc.org/libquickjs"
	"modernc.org/quickjs"
)

// Limits bound one VM. The zero value of a field means its default.
type Limits struct {
	// MemoryBytes caps the engine's heap: every object, string, array,
	// compiled function and the engine's own structures. Default 64 MiB;
	// at least 1 MiB.
	MemoryBytes int64
	// StackSlots bounds the JavaScript call depth, in the port's stack
	// slots (about one a call frame, each of which takes about 1.7 KiB of
	// goroutine stack, outside MemoryBytes). Default 5000, QuickJS's own
	// default in this port.
	StackSlots int
	// OutOfMemoryStops makes running out of memory final: an allocation
	// that would pass MemoryBytes interrupts the script, which then stops
	// at the engine's next poll with an exception it cannot catch, and
	// the Run fails with Memory even when the script caught the engine's
	// out-of-memory error or returned before the next poll. Without it, a
	// script may catch that error and go on (within the limit).
	OutOfMemoryStops bool
}

// Defaults applied by [New].
const (
	DefaultMemoryBytes = 64 << 20
	DefaultStackSlots  = 5000
	minMemoryBytes     = 1 << 20
)

// Grace is how long [VM.Run] waits, once its context has ended, for the
// engine to notice the interrupt before it gives the VM up. The
// interpreter and the regular-expression engine poll the interrupt every
// few thousand steps (well under a millisecond); a built-in written in C —
// sort without a comparator, concat, join of a huge array — does not poll
// at all, and may run for as long as its input, bounded by the memory
// limit, takes (measured: 0.8 s for a concat of two million elements).
const Grace = 5 * time.Millisecond

func (l Limits) withDefaults() Limits {
	if l.MemoryBytes == 0 {
		l.MemoryBytes = DefaultMemoryBytes
	}
	if l.MemoryBytes < minMemoryBytes {
		l.MemoryBytes = minMemoryBytes
	}
	if l.StackSlots <= 0 {
		l.StackSlots = DefaultStackSlots
	}
	return l
}

// VM is one QuickJS runtime and realm under [Limits]. Not safe for
// concurrent use, except [VM.Interrupt].
type VM struct {
	q      *quickjs.VM
	lim    Limits
	eng    engine              // the runtime's C side (engine.go)
	heap   *lib.TJSMallocState // the runtime's allocator counters
	hooked bool                // the allocator hook is in place (engine.go)
	oom    atomic.Bool         // an allocation failed during the current Run
	bytes  bytesState          // what DefineBytes's functions hand over (bytes.go); the engine's goroutine only

	mu sync.Mutex
	// gone is set when a Run gave the VM up (its script ran on past the
	// deadline, inside a built-in) or the engine panicked: the VM runs no
	// more code, and is closed once its script ends.
	gone    bool
	closed  bool
	busy    bool     // a script runs, possibly abandoned
	freed   bool     // the engine was freed
	onClose []func() // run just before the engine is freed, when no script runs

	// work carries Run's functions to the VM's worker goroutine, which
	// calls into the engine for the VM's whole life rather than a fresh
	// goroutine per Run: the engine needs tens of KiB of stack, which a
	// new goroutine would grow by copying on every Run, and the stack the
	// worker grew stays grown. Closed when the engine is freed.
	work chan func()
}

// serve is the VM's worker.
func (v *VM) serve() {
	for f := range v.work {
		f()
	}
}

// OnClose registers f to run just before the engine is freed, when no
// script runs: for freeing the Values a caller keeps, or for learning when
// a script given up by Run has ended. On a VM already freed, f runs at
// once.
func (v *VM) OnClose(f func()) {
	v.mu.Lock()
	if v.freed {
		v.mu.Unlock()
		f()
		return
	}
	v.onClose = append(v.onClose, f)
	v.mu.Unlock()
}

// free runs the OnClose functions and frees the engine. Functions
// registered while they run run too.
func (v *VM) free() {
	for {
		v.mu.Lock()
		fs := v.onClose
		v.onClose = nil
		if len(fs) == 0 {
			v.freed = true
			v.mu.Unlock()
			break
		}
		v.mu.Unlock()
		for _, f := range fs {
			f()
		}
	}
	v.unhookAllocator()
	_ = v.q.Close()
	close(v.work)
}

// New returns a VM under lim.
func New(lim Limits) (*VM, error) {
	lim = lim.withDefaults()
	q, err := quickjs.NewVM()
	if err != nil {
		return nil, fmt.Errorf("jsvm: %w", err)
	}
	q.SetMemoryLimit(uintptr(lim.MemoryBytes))
	q.SetMaxStackSize(uintptr(lim.StackSlots))
	v := &VM{q: q, lim: lim, work: make(chan func(), 1)}
	// The allocator counters, which modernc.org/quickjs does not export,
	// tell an out-of-memory failure that left no room for an error object
	// (the engine throws null then) from a script's own `throw null`, and
	// they measure a VM's heap.
	if e, ok := engineOf(q); ok {
		v.eng = e
		v.heap = &e.rt.Fmalloc_ctx.Fmalloc_state
	}
	v.hooked = v.hookAllocator()
	if lim.OutOfMemoryStops && !v.hooked {
		_ = q.Close()
		return nil, errors.New("jsvm: OutOfMemoryStops: the engine's allocator is not the one this package knows")
	}
	go v.serve()
	return v, nil
}

// Limits returns the VM's limits, defaults applied.
func (v *VM) Limits() Limits { return v.lim }

// SetMemoryBytes changes the VM's memory limit (at least 1 MiB), for a
// caller that bounds what a script may add to a realm it has set up: the
// heap after set-up plus a budget. Call it between Runs.
func (v *VM) SetMemoryBytes(n int64) {
	n = max(n, minMemoryBytes)
	v.lim.MemoryBytes = n
	v.q.SetMemoryLimit(uintptr(n))
}

// HeapBytes returns the bytes the engine's allocator holds for this VM
// now (objects, strings, bytecode, the runtime's own structures), or -1
// when they cannot be read. Call it between Runs.
func (v *VM) HeapBytes() int64 {
	if v.heap == nil {
		return -1
	}
	return int64(v.heap.Fmalloc_size)
}

// Gone reports whether the VM was given up: a Run stopped waiting for a
// script that ran past its deadline inside a built-in, or the engine
// panicked. A VM that is gone runs nothing more; Close it.
func (v *VM) Gone() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.gone
}

// Close frees the VM and everything it holds; a VM whose script still
// runs (given up by Run) is freed when that script ends. Closing twice
// does nothing.
func (v *VM) Close() {
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		return
	}
	v.closed = true
	busy := v.busy
	v.mu.Unlock()
	if !busy {
		v.free()
	}
}

// Interrupt stops the code the VM is running with an exception no script
// can catch. It may be called from any goroutine, at any time.
func (v *VM) Interrupt() { v.q.Interrupt() }

// Kind says why a [VM.Run] failed.
type Kind int

// The kinds of [Error].
const (
	// Thrown: the script threw (or rejected) and nothing caught it.
	Thrown Kind = iota
	// Timeout: the context's deadline passed; the script was interrupted.
	Timeout
	// Cancelled: the context was cancelled; the script was interrupted.
	Cancelled
	// Memory: an allocation would have taken the heap past MemoryBytes.
	Memory
	// Stack: the call depth passed StackSlots.
	Stack
	// Crashed: the engine panicked, or the VM was given up earlier.
	Crashed
)

// Error is why a Run failed: its Kind and, for Thrown, what the script
// threw (Name and Message of an Error object, or its string).
type Error struct {
	Kind    Kind
	Name    string
	Message string
	// Value is the thrown value as a string, as String(e) gives it.
	Value string
	// Stack is the thrown error's stack, when it has one.
	Stack string

	err error // what Unwrap gives: a sentinel of this package, or nil
}

// Unwrap returns the sentinel behind e ([ErrAwaitNeverSettled]), if any.
func (e *Error) Unwrap() error { return e.err }

func (e *Error) Error() string {
	switch e.Kind {
	case Timeout:
		return "the script did not finish before its deadline"
	case Cancelled:
		return "the script was cancelled"
	case Memory:
		return "the script went over its memory limit"
	case Stack:
		return "the script went past its call stack limit"
	case Crashed:
		return "the JavaScript engine failed: " + e.Message
	}
	switch {
	case e.Value != "":
		return e.Value
	case e.Name == "" && e.Message == "":
		// Object.create(null), thrown: it has no name, message or string
		// form (a build said "evaluate the bundle: : ").
		return "the script threw a value that could not be read (no Error, and no string form)"
	}
	return e.Name + ": " + e.Message
}

// KindOf returns the Kind of err's *Error, or Thrown when it has none.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Thrown
}

// Run runs fn, which calls into the engine, under ctx, on a goroutine of
// its own. The deadline of ctx arms the engine's own timeout, and the end
// of ctx (deadline or cancel) interrupts the engine, which stops the
// script with an exception it cannot catch. Run returns by the end of ctx
// plus [Grace] whatever fn does: a script still inside a built-in then is
// given up ([VM.Gone]), and the VM is freed when it ends. An error from
// the engine comes back as an *Error.
func (v *VM) Run(ctx context.Context, fn func(q *quickjs.VM) error) error {
	v.mu.Lock()
	switch {
	case v.gone || v.closed:
		v.mu.Unlock()
		return &Error{Kind: Crashed, Message: "the VM was given up by an earlier call"}
	case v.busy:
		v.mu.Unlock()
		panic("jsvm: Run called concurrently on one VM")
	}
	v.busy = true
	v.mu.Unlock()
	v.oom.Store(false)
	if ctx.Err() != nil {
		v.idle()
		return ctxError(ctx)
	}
	timeout := time.Duration(0)
	if d, ok := ctx.Deadline(); ok {
		if timeout = time.Until(d); timeout <= 0 {
			v.idle()
			return &Error{Kind: Timeout}
		}
	}
	_ = v.q.SetEvalTimeout(timeout)
	res := make(chan error, 1)
	v.work <- func() {
		defer func() {
			if p := recover(); p != nil {
				v.mu.Lock()
				v.gone = true
				v.mu.Unlock()
				res <- &Error{Kind: Crashed, Message: fmt.Sprint(p)}
			}
		}()
		err := v.classify(ctx, fn(v.q))
		// Whatever the script made of the interrupt — an async function
		// turns it into a rejection its caller may catch, and code that
		// runs after it (a promise job) is interrupted only at the next
		// poll — a Run that ends after the deadline or the cancel is
		// stopped. Read here, when the engine returned, so that a script
		// that finished in time is not late for Run's own wake-up.
		if err == nil || KindOf(err) == Thrown {
			if Expired(ctx) {
				err = ctxError(ctx)
			}
		}
		res <- err
	}
	select {
	case err := <-res:
		v.idle()
		return v.classify(ctx, err)
	case <-ctx.Done():
	}
	// The engine clears a pending interrupt when a call from Go enters
	// it, so one interrupt could land too early: interrupt every
	// millisecond of the grace.
	grace := time.NewTimer(Grace)
	defer grace.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		v.q.Interrupt()
		select {
		case err := <-res:
			v.idle()
			return v.classify(ctx, err)
		case <-tick.C:
		case <-grace.C:
			v.giveUp(res)
			return ctxError(ctx)
		}
	}
}

// idle ends a Run that returned; a VM closed meanwhile is freed now.
func (v *VM) idle() {
	v.mu.Lock()
	v.busy = false
	closeNow := v.closed || v.gone
	v.closed = v.closed || closeNow
	v.mu.Unlock()
	if closeNow {
		v.free()
	}
}

// giveUp leaves the script to end on its own (the interrupt stays
// pending, so it stops at the engine's next poll) and frees the VM then.
func (v *VM) giveUp(res <-chan error) {
	v.mu.Lock()
	v.gone = true
	v.mu.Unlock()
	go func() {
		<-res
		v.idle()
	}()
}

// Expired reports whether ctx has ended or its deadline has passed. The
// engine's own timer, armed from the deadline by [VM.Run], may interrupt a
// script a little before ctx reports its end (ctx's timer fires on
// another goroutine): a host function that must not act once the script
// was stopped checks Expired, not ctx.Err.
func Expired(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// OutOfMemory reports whether an allocation failed during the VM's
// current (or last) Run, or the heap is within 64 KiB of its limit: what
// tells the null the engine throws when no memory is left for an error
// object from a script's own `throw null`. Call it from the goroutine
// that runs the script, or between Runs.
func (v *VM) OutOfMemory() bool { return v.oom.Load() || v.nearLimit() }

func ctxError(ctx context.Context) *Error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return &Error{Kind: Cancelled}
	}
	return &Error{Kind: Timeout}
}

// classify turns what the engine returned into an *Error (nil stays nil).
func (v *VM) classify(ctx context.Context, err error) error {
	if v.lim.OutOfMemoryStops && v.oom.Load() {
		// Limits.OutOfMemoryStops: whatever the script made of it.
		return &Error{Kind: Memory}
	}
	if err == nil {
		return nil
	}
	var je *Error
	if errors.As(err, &je) {
		return je
	}
	if errors.Is(err, ErrAwaitNeverSettled) {
		return &Error{Kind: Thrown, Name: "Error", Message: err.Error(), Value: err.Error(), err: ErrAwaitNeverSettled}
	}
	var qe *quickjs.Error
	if !errors.As(err, &qe) {
		// The engine's own Go-side failures: no memory to copy a string
		// out, a value that does not convert.
		if err.Error() == "OOM" {
			return &Error{Kind: Memory}
		}
		return &Error{Kind: Thrown, Name: "Error", Message: err.Error(), Value: err.Error()}
	}
	switch {
	case qe.Name == "InternalError" && qe.Message == "interrupted":
		if ctx.Err() != nil {
			return ctxError(ctx)
		}
		return &Error{Kind: Timeout} // the engine's own timeout, armed from ctx's deadline
	case qe.Name == "InternalError" && (qe.Message == "out of memory" || qe.Message == "string too long"):
		return &Error{Kind: Memory, Name: qe.Name, Message: qe.Message}
	case qe.Name == "InternalError" && qe.Message == "stack overflow":
		return &Error{Kind: Stack, Name: qe.Name, Message: qe.Message}
	case qe.Name == "" && qe.Error() == "null" && v.OutOfMemory():
		// Out of memory with no room left for the error object: the
		// engine throws null.
		return &Error{Kind: Memory}
	}
	return &Error{Kind: Thrown, Name: qe.Name, Message: qe.Message, Value: qe.Error(), Stack: qe.Stack}
}

// nearLimit reports whether the heap is within 64 KiB of its limit.
func (v *VM) nearLimit() bool {
	h := v.HeapBytes()
	return h >= 0 && h > v.lim.MemoryBytes-64<<10
}

// sizeLimits are the RangeErrors the engine throws for a size beyond its
// own bounds (a string of 2**30 characters, an array of 2**32 elements, an
// ArrayBuffer of 2**31 bytes, 65 535 arguments), before it tries to
// allocate.
var sizeLimits = []string{
	"RangeError: invalid string length",
	"RangeError: invalid array length",
	"RangeError: invalid array buffer length",
	"RangeError: invalid repeat count",
	"RangeError: too many arguments in function call",
}

// SizeLimit reports whether msg, a thrown error as "Name: message", is
// one the engine throws for a size beyond its own bounds: a host ends a
// call that did not catch it too_large, as running out of memory does.
func SizeLimit(msg string) bool {
	for _, p := range sizeLimits {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
