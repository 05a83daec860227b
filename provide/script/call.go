package script

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dop251/goja"
	"github.com/dop251/goja/ast"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
)

// Engine bounds that are not grants.
const (
	// maxCallDepth bounds the JavaScript call stack (goja's default is
	// unbounded). Calls that pass through Go built-ins ([0].map(f) in f)
	// also grow the goroutine stack; the bound keeps that far from Go's
	// fatal limit.
	maxCallDepth = 10000
	// maxNesting bounds the recursion of the built-ins this package
	// implements in Go (JSON.stringify, join, flat, the result encoder),
	// and so the nesting of a result; encoding/json, which reads results
	// upstream, stops at 10000.
	maxNesting = 5000
	// maxMessage caps the exception messages passed to the model.
	maxMessage = 2000
)

// call is a goja runtime, set up and locked down once (lockdown.go), and the
// state of the Call running in it: its limits and why it was stopped. A
// call is reused for Call after Call while each ends cleanly (see
// Runtime.Call); one that was stopped is discarded. Everything but mu, gen,
// vm, cause and stopped belongs to the goroutine that runs the script.
type call struct {
	grants Grants
	lim    limits
	log    *slog.Logger

	mu      sync.Mutex
	gen     uint64                  // counts the Calls run here; under mu
	vm      *goja.Runtime           // set once, under mu, before any script runs
	cause   *handle.CapabilityError // first reason the Call was stopped; under mu
	stopped atomic.Bool             // cause != nil, readable without mu
	stopCh  chan struct{}           // closed when cause is set

	// Intrinsics captured before any script code runs, so that scripts
	// cannot change what the guards call.
	in intrinsics
	// depth is the recursion depth of this package's Go built-ins.
	depth int
	// joining holds the arrays being joined, to cut cycles as engines do.
	joining map[*goja.Object]struct{}
	// hasInstance is the Symbol.hasInstance of the wrapped constructors.
	hasInstance goja.Value
	// world checks and cleans the global object between Calls.
	world *world
	// leavesState is set when the current Call may have left state that
	// reset cannot remove — it compiled source that may declare a private
	// name (#x), or registered a symbol: see Runtime.recycle.
	leavesState bool

	// jobs carries Calls to the worker goroutine (serve), done their
	// outcomes back; held is which token the current Call's script holds
	// (see Runtime.abandon). One Call at a time uses them.
	jobs chan job
	done chan outcome
	held hold
}

func newCall(g Grants, lim limits, log *slog.Logger) *call {
	return &call{grants: g, lim: lim, log: log, stopCh: make(chan struct{}),
		jobs: make(chan job, 1), done: make(chan outcome, 1)}
}

// begin starts a Call in c and returns its generation, which the stops
// from outside (the deadline, the heap watchdog) name, so that a late stop
// meant for an earlier Call is ignored.
func (c *call) begin() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.cause = nil
	c.stopped.Store(false)
	c.stopCh = make(chan struct{})
	c.depth = 0
	c.leavesState = false
	clear(c.joining)
	c.held.finished, c.held.lingering = false, false
	if c.vm != nil {
		c.vm.ClearInterrupt()
	}
	return c.gen
}

// stopChan returns the channel closed when the current Call is stopped.
func (c *call) stopChan() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopCh
}

// abort stops the current Call for err: the first reason wins. JavaScript
// code stops at its next instruction with an uncatchable interrupt; the
// guards check stopped in their loops.
func (c *call) abort(err *handle.CapabilityError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopLocked(err)
}

// abortGen is abort for the Call of generation gen only.
func (c *call) abortGen(gen uint64, err *handle.CapabilityError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == gen {
		c.stopLocked(err)
	}
}

func (c *call) stopLocked(err *handle.CapabilityError) {
	if c.cause != nil {
		return
	}
	c.cause = err
	c.stopped.Store(true)
	close(c.stopCh)
	if c.vm != nil {
		c.vm.Interrupt(err)
	}
}

// reason returns why the call was stopped, or nil.
func (c *call) reason() *handle.CapabilityError {
	if !c.stopped.Load() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cause
}

// prepare makes c's runtime: goja.New, the guards (setup) and the
// lockdown. It runs once, before c's first Call.
func (c *call) prepare() error {
	vm := goja.New()
	c.mu.Lock()
	c.vm = vm
	c.mu.Unlock()
	orig, err := originals(vm)
	if err != nil {
		return err
	}
	if err := c.setup(vm); err != nil {
		return err
	}
	w, err := lockdown(vm, orig)
	if err != nil {
		return err
	}
	c.world = w
	return nil
}

// tooLarge stops the call with too_large and returns undefined, which the
// guard hands back to the engine; the interrupt ends the script before it
// can use the value.
func (c *call) tooLarge(format string, args ...any) goja.Value {
	c.abort(handle.Errorf(handle.KindJS, opCall, protocol.CodeTooLarge, format, args...))
	return goja.Undefined()
}

// fail returns an invalid_argument error: the script, its arguments or its
// result are at fault.
func fail(format string, args ...any) *handle.CapabilityError {
	return handle.Errorf(handle.KindJS, opCall, protocol.CodeInvalidArgument, format, args...)
}

// run runs one Call, of generation gen, to its end on the calling
// goroutine. Everything that touches the goja runtime happens here, while
// abort can still interrupt it: reading an exception's message or encoding
// the result may run script code (toString, toJSON, getters).
func (c *call) run(gen uint64, prg *goja.Program, args json.RawMessage) (o outcome) {
	stopWatch := heap.watch(c.lim.memory, func(used int64) {
		c.abortGen(gen, handle.Errorf(handle.KindJS, opCall, protocol.CodeTooLarge,
			"the script went over its memory budget of %d MiB (the heap grew by about %d MiB)",
			c.lim.memory>>20, used>>20))
	})
	defer stopWatch()
	defer func() {
		// The runtime may serve another call unless the engine itself
		// failed (recycle also drops runtimes whose call was stopped).
		clean := true
		if x := recover(); x != nil {
			o = outcome{err: c.fromPanic(x)}
			clean = !isBug(x)
		}
		// A stop that the script never noticed (a built-in was still
		// running and the script ended right after it) still stands.
		if cause := c.reason(); cause != nil {
			o = outcome{err: cause}
		}
		o.clean = clean
	}()

	vm := c.vm
	argv := goja.Undefined()
	if len(args) > 0 {
		v, err := c.parseArgs(vm, string(args))
		if err != nil {
			if cause := c.reason(); cause != nil {
				return outcome{err: cause}
			}
			if ae, ok := err.(*argsError); ok && ae.deep {
				return outcome{err: fail("%s", ae.msg)}
			}
			return outcome{err: fail("the arguments are not valid JSON: %s", err)}
		}
		argv = v
	}
	v, err := vm.RunProgram(prg)
	if err != nil {
		return outcome{err: c.scriptError(err, "the script failed")}
	}
	fn, ok := goja.AssertFunction(v)
	if !ok {
		return outcome{err: fail("the script must evaluate to a function, such as (args) => args.a + args.b; it evaluated to %s", describe(v))}
	}
	res, err := fn(goja.Undefined(), argv)
	if err != nil {
		return outcome{err: c.scriptError(err, "the function threw")}
	}
	res, cerr := c.settle(res)
	if cerr != nil {
		return outcome{err: cerr}
	}
	out, cerr := c.encodeResult(vm, res)
	if cerr != nil {
		return outcome{err: cerr}
	}
	return outcome{result: out}
}

// compile compiles source, the text of a Call, as the one expression it
// must be. The parentheses make "function (a) {…}" an expression; the
// opening one shares the first line so that line numbers stay those of the
// source, and the newline ends a trailing // comment. A source that closes
// the parenthesis and goes on ("0); let x = 1; (0") would compile to more
// than one statement, and a top-level declaration would outlive the Call in
// a reused runtime: it is refused.
func compile(source string) (compiled, *handle.CapabilityError) {
	if strings.TrimSpace(source) == "" {
		return compiled{}, fail("the script is empty; it must be a function expression such as (args) => args.a + args.b")
	}
	tree, err := goja.Parse("script.js", "("+source+"\n)")
	if err != nil {
		return compiled{}, syntaxError(err, source)
	}
	if _, ok := singleExpression(tree); !ok || len(tree.DeclarationList) > 0 {
		return compiled{}, fail("the script must be one function expression, such as (args) => args.a + args.b, with nothing after it")
	}
	prg, err := goja.CompileAST(tree, false)
	if err != nil {
		return compiled{}, syntaxError(err, source)
	}
	return compiled{prg: prg, private: strings.IndexByte(source, '#') >= 0 && holdsPrivateName(tree)}, nil
}

// singleExpression returns the one expression statement tree holds.
func singleExpression(tree *ast.Program) (*ast.ExpressionStatement, bool) {
	if len(tree.Body) != 1 {
		return nil, false
	}
	st, ok := tree.Body[0].(*ast.ExpressionStatement)
	return st, ok
}

var promiseType = reflect.TypeOf((*goja.Promise)(nil))

// settle returns the value of a settled promise, or v itself. Jobs have
// run by now: goja runs them when the outermost call from Go returns, and
// a script has no timers or I/O that could settle a promise later.
func (c *call) settle(v goja.Value) (goja.Value, *handle.CapabilityError) {
	o, ok := v.(*goja.Object)
	if !ok || o.ExportType() != promiseType {
		return v, nil
	}
	p := o.Export().(*goja.Promise)
	switch p.State() {
	case goja.PromiseStateFulfilled:
		return p.Result(), nil
	case goja.PromiseStateRejected:
		return nil, fail("the function's promise was rejected: %s", c.valueMessage(p.Result()))
	default:
		return nil, fail("the function returned a promise that never settled (scripts have no timers or I/O to wait for)")
	}
}

// scriptError maps an error from goja to a CapabilityError. what says
// which step failed.
func (c *call) scriptError(err error, what string) *handle.CapabilityError {
	if cause := c.reason(); cause != nil {
		return cause
	}
	var (
		syntax   *goja.CompilerSyntaxError
		stack    *goja.StackOverflowError
		intr     *goja.InterruptedError
		thrown   *goja.Exception
		capErr   *handle.CapabilityError
		rendered string
	)
	switch {
	case errors.As(err, &intr):
		if ce, ok := intr.Value().(*handle.CapabilityError); ok {
			return ce
		}
		rendered = "interrupted"
	case errors.As(err, &stack):
		return fail("%s: maximum call stack size (%d frames) exceeded", what, maxCallDepth)
	case errors.As(err, &syntax):
		// From eval or the Function constructor, whose positions are
		// relative to their own source.
		return fail("%s: %s", what, truncate(syntax.Error()))
	case errors.As(err, &capErr):
		return capErr
	case errors.As(err, &thrown):
		rendered = c.valueMessage(thrown.Value())
		// The innermost frame in the caller's source: an exception thrown
		// by a built-in or inside eval points at the line that called it.
		for _, f := range thrown.Stack() {
			if pos := f.Position(); f.SrcName() == "script.js" && pos.Line > 0 {
				col := pos.Column
				if pos.Line == 1 && col > 1 {
					col-- // the "(" this package put before the source
				}
				rendered += fmt.Sprintf(" (line %d, column %d)", pos.Line, col)
				break
			}
		}
	default:
		rendered = err.Error()
	}
	e := fail("%s: %s", what, rendered)
	e.Err = err
	return e
}

// syntaxPosition parses the position goja puts in a syntax error.
var syntaxPosition = regexp.MustCompile(`^script\.js: Line (\d+):(\d+) (.*)$`)

// syntaxError describes a compile error in the terms of the source the
// caller wrote, rather than of the parenthesised copy that was compiled.
func syntaxError(err error, source string) *handle.CapabilityError {
	var se *goja.CompilerSyntaxError
	if !errors.As(err, &se) {
		e := fail("the script does not compile: %s", truncate(err.Error()))
		e.Err = err
		return e
	}
	msg := se.Message
	var e *handle.CapabilityError
	if m := syntaxPosition.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		col, _ := strconv.Atoi(m[2])
		switch {
		case line > strings.Count(source, "\n")+1:
			// The error is at the ")" this package appended.
			e = fail("syntax error: the script ends too early (is a bracket, brace or string left open?): %s", truncate(m[3]))
		case line == 1:
			col-- // the "(" this package prepended
			fallthrough
		default:
			e = fail("syntax error at line %d, column %d: %s", line, col, truncate(m[3]))
		}
	} else {
		e = fail("syntax error: %s", truncate(msg))
	}
	e.Err = err
	return e
}

// valueMessage renders a thrown value. It may run script code (a toString),
// so it runs under vm.Try and gives up on anything but a plain answer.
func (c *call) valueMessage(v goja.Value) (msg string) {
	vm := c.vm // set before any script code ran; this goroutine set it
	if v == nil {
		return "undefined"
	}
	msg = "an exception that cannot be shown"
	func() {
		defer func() { _ = recover() }() // an interrupt: the cause says why
		if ex := vm.Try(func() { msg = v.String() }); ex != nil {
			msg = "an exception whose toString threw"
		}
	}()
	return truncate(msg)
}

// truncate caps a message for the model.
func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage
	for cut > 0 && s[cut]&0xC0 == 0x80 { // not inside a UTF-8 sequence
		cut--
	}
	return s[:cut] + "…"
}

// describe names the type of a value for a message, without running
// script code.
func describe(v goja.Value) string {
	switch {
	case v == nil || goja.IsUndefined(v):
		return "undefined"
	case goja.IsNull(v):
		return "null"
	}
	switch v.(type) {
	case *goja.Object:
		return "an object"
	case *goja.Symbol:
		return "a symbol"
	}
	switch v.ExportType().Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int64, reflect.Float64:
		return "a number"
	}
	return "a bigint"
}

// isBug reports whether x, a panic that escaped the engine, is a bug in
// goja or in this package rather than an interrupt or exception (see
// fromPanic).
func isBug(x any) bool {
	switch x.(type) {
	case *goja.InterruptedError, *goja.StackOverflowError, *goja.Exception, *handle.CapabilityError:
		return false
	}
	return true
}

// fromPanic turns a panic that escaped the engine into an error. Engine
// interrupts and exceptions can escape when Go code (the result encoder)
// calls into script code outside a Run call; anything else is a bug in
// goja or in this package, which the process survives.
func (c *call) fromPanic(x any) error {
	if cause := c.reason(); cause != nil {
		return cause
	}
	switch v := x.(type) {
	case *goja.InterruptedError, *goja.StackOverflowError, *goja.Exception:
		return c.scriptError(v.(error), "the script failed")
	case *handle.CapabilityError:
		return v
	}
	c.log.Error("js: engine panic", slog.Any("panic", x), slog.String("stack", string(debug.Stack())))
	return &handle.CapabilityError{
		Handle: handle.KindJS, Op: opCall, Code: protocol.CodeInternal,
		Message: "the JavaScript engine failed; this is a bug in the runtime, not in the script",
		Err:     fmt.Errorf("engine panic: %v", x),
	}
}
