package script

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"modernc.org/quickjs"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/internal/jsvm"
	"github.com/brainrt/brain/internal/textcut"
	"github.com/brainrt/brain/protocol"
)

//go:embed realm.js
var realmJS string

// realmSource is realm.js as a JavaScript string literal.
var realmSource = func() string {
	b, err := json.Marshal(realmJS)
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// hostStop and hostIsProxy are the globals that realm.js takes and
// deletes before any script runs.
const (
	hostStop     = "__brain_stop"
	hostIsProxy  = "__brain_isProxy"
	hostHeapLeft = "__brain_heapLeft"
)

// Engine bounds that are not grants.
const (
	// stackSlots bounds the JavaScript call depth (jsvm.Limits.StackSlots,
	// about one a frame).
	stackSlots = jsvm.DefaultStackSlots
	// maxNesting bounds the nesting of arguments; encoding/json, which
	// reads results upstream, stops at 10000.
	maxNesting = 5000
	// maxMessage caps the exception messages passed to the model.
	maxMessage = 2000
	// heapSlack is how far a realm's heap may stay above what it was when
	// it was made before a call's leftovers (cycles that reference
	// counting leaves, which the collector frees) are collected; a realm
	// still over it after a collection is retired.
	heapSlack = 1 << 20
)

// realm is one QuickJS runtime and realm (jsvm.VM), set up and locked
// down once by realm.js, which serves call after call while each ends
// cleanly. One call at a time.
type realm struct {
	vm       *jsvm.VM
	dispatch quickjs.Value
	base     int64 // the heap once set up
	// cause is why the running call was stopped from inside the realm
	// (eval of a source over the grant): it ends too_large whatever the
	// script does next. Set on the engine's goroutine, read after Run.
	cause atomic.Pointer[handle.CapabilityError]
	// reuse is false once a call left state tidy cannot remove, or was
	// stopped: the realm is closed rather than kept.
	reuse bool
	// shape is the global object's once the realm was made (see tidy).
	shape jsvm.Shape
	// factories are the compiled sources (see factory); freed with the VM.
	factories map[string]quickjs.Value
}

// newRealm makes a realm under g: a VM whose memory limit is its heap
// once set up plus g.MaxMemoryBytes, with the allocator's failure final
// (a script cannot catch running out of memory and go on).
func newRealm(ctx context.Context, g Grants) (*realm, error) {
	vm, err := jsvm.New(jsvm.Limits{MemoryBytes: g.MaxMemoryBytes + 4<<20, StackSlots: stackSlots, OutOfMemoryStops: true})
	if err != nil {
		return nil, err
	}
	rl := &realm{vm: vm, reuse: true}
	err = vm.Run(ctx, func(q *quickjs.VM) error {
		if err := q.RegisterHostFunc(hostStop, rl.stop); err != nil {
			return err
		}
		if err := q.RegisterFunc(hostIsProxy, jsvm.IsProxy, false); err != nil {
			return err
		}
		if err := q.RegisterFunc(hostHeapLeft, rl.heapLeft, false); err != nil {
			return err
		}
		// Through eval, so that the engine names realm.js's frames
		// <input>, not <eval> as it names the script's (see position).
		d, err := q.EvalValue("(0, eval)("+realmSource+")(globalThis."+hostStop+", globalThis."+hostIsProxy+", globalThis."+hostHeapLeft+", "+
			strconv.Itoa(g.MaxScriptBytes)+", "+strconv.FormatInt(g.MaxMemoryBytes/16, 10)+
			", [\""+hostStop+"\", \""+hostIsProxy+"\", \""+hostHeapLeft+"\"])", quickjs.EvalGlobal)
		if err != nil {
			return err
		}
		rl.dispatch = d
		vm.OnClose(d.Free)
		// realm.js deleted the host function's global before it froze
		// the others.
		gone, err := q.Eval("!('"+hostStop+"' in globalThis) && !('"+hostIsProxy+"' in globalThis) && !('"+hostHeapLeft+"' in globalThis)", quickjs.EvalGlobal)
		if err != nil {
			return err
		}
		if gone != true {
			return errors.New("the host function's global is still there")
		}
		return nil
	})
	if err != nil {
		vm.Close()
		return nil, fmt.Errorf("set up a realm: %w", err)
	}
	if !jsvm.ProxyCheckWorks() {
		vm.Close()
		return nil, errors.New("set up a realm: jsvm.IsProxy cannot read this version's values")
	}
	shape, ok := vm.GlobalShape()
	if !ok {
		vm.Close()
		return nil, errors.New("set up a realm: the global object's shape cannot be read in this version")
	}
	rl.shape = shape
	vm.OnClose(func() {
		for _, f := range rl.factories {
			f.Free()
		}
	})
	vm.GC()
	rl.base = vm.HeapBytes()
	vm.SetMemoryBytes(rl.base + g.MaxMemoryBytes)
	return rl, nil
}

// stop is the realm's host function: realm.js calls it when a script
// asks eval or a Function constructor to compile more than the grant
// allows. The call ends too_large: the interrupt stops the script at the
// engine's next poll, whatever it catches.
func (rl *realm) stop(args []any) (any, error) {
	msg, _ := args[0].(string)
	rl.cause.CompareAndSwap(nil, handle.Errorf(handle.KindJS, opCall, protocol.CodeTooLarge, "%s", msg))
	rl.vm.Interrupt()
	return nil, nil
}

func (rl *realm) close() { rl.vm.Close() }

// heapLeft is the realm's host function that tells realm.js's guards how
// many bytes the memory limit has left, on the engine's goroutine.
func (rl *realm) heapLeft() float64 {
	h := rl.vm.HeapBytes()
	if h < 0 {
		return 1 << 53 // unknown: the engine's limit alone decides
	}
	return float64(rl.vm.Limits().MemoryBytes - h)
}

// settled reports whether rl's heap is back within heapSlack of what it
// was when made, collecting the cycles a call left first if it is not.
func (rl *realm) settled() bool {
	if rl.vm.HeapBytes() <= rl.base+heapSlack {
		return true
	}
	rl.vm.GC()
	return rl.vm.HeapBytes() <= rl.base+heapSlack
}

// outcome is what one call produced.
type outcome struct {
	result json.RawMessage
	err    error
}

// thrown is what realm.js says about an exception.
type thrown struct {
	Stage   string  `json:"stage"`
	Engine  string  `json:"engine"`
	Null    bool    `json:"null"`
	Message *string `json:"message"`
	Stack   string  `json:"stack"`
}

// call runs source on args under ctx and returns its outcome; checked
// says the source is known to be one expression that compiles (see
// checkSource). Afterwards rl.reuse says whether the realm may serve
// another call.
func (rl *realm) call(ctx context.Context, g Grants, source string, checked bool, args json.RawMessage) (outcome, bool) {
	rl.cause.Store(nil)
	var first, end string
	var compileErr *handle.CapabilityError
	// passed is written on the engine's goroutine: read only once Run
	// returned with the engine idle (not given up).
	passed := checked
	err := rl.vm.Run(ctx, func(q *quickjs.VM) error {
		if !checked {
			if compileErr = checkSource(q, source); compileErr != nil {
				return nil
			}
			passed = true
		}
		fac, err := rl.factory(q, source)
		if err != nil {
			return err
		}
		var out any
		if len(args) == 0 {
			out, err = rl.dispatch.Call(quickjs.UndefinedValue, "call", fac, quickjs.Undefined{})
		} else {
			out, err = rl.dispatch.Call(quickjs.UndefinedValue, "call", fac, string(args))
		}
		if err != nil {
			return err
		}
		first, _ = out.(string)
		// The jobs a call left run now, in its own time, not in the next
		// call's: the promise it returned settles in them.
		jobs := 0
		for {
			n, err := q.ExecutePendingJobs()
			if err != nil {
				return err
			}
			if n == 0 {
				break
			}
			jobs += n
		}
		if jobs > 0 || (len(first) > 1 && first[1] == 'p') {
			out, err = rl.dispatch.Call(quickjs.UndefinedValue, "end")
			end, _ = out.(string)
		}
		return err
	})
	if rl.vm.Gone() {
		// Given up inside a built-in that does not poll: the engine's
		// goroutine still runs, and owns everything it writes.
		rl.reuse = false
		return outcome{err: engineError(ctx, err, g)}, false
	}
	if compileErr != nil {
		return outcome{err: compileErr}, false
	}
	if cause := rl.cause.Load(); cause != nil {
		rl.reuse = false
		return outcome{err: cause}, passed
	}
	if err != nil {
		rl.reuse = false
		return outcome{err: engineError(ctx, err, g)}, false
	}
	if len(first) < 2 {
		rl.reuse = false
		return outcome{err: internal(fmt.Errorf("the realm answered %q", first))}, passed
	}
	digit, rest := first[0], first[1:]
	if end != "" {
		// The jobs ran after the call's answer: the digit is end's, and so
		// is the outcome of a promise that was pending.
		digit = max(digit, end[0])
		if rest == "p" {
			rest = end[1:]
		}
	}
	if digit != '0' {
		rl.reuse = false
	}
	if rest == "p" || rest == "" {
		return outcome{err: fail("the function returned a promise that never settled (scripts have no timers or I/O to wait for)")}, passed
	}
	return rl.decode(ctx, rest, g), passed
}

// factory returns the realm's function that evaluates source, an arrow
// function around it compiled once per realm: each call evaluates the
// expression afresh (a new function object, nothing kept from the last
// call), without parsing it again. Factories are the host's: no script
// can reach one (an arrow function has no caller, arguments or
// prototype).
func (rl *realm) factory(q *quickjs.VM, source string) (quickjs.Value, error) {
	if f, ok := rl.factories[source]; ok {
		return f, nil
	}
	f, err := q.EvalValue(factoryPrefix+source+"\n))", quickjs.EvalGlobal)
	if err != nil {
		return quickjs.Value{}, err
	}
	if len(rl.factories) >= maxFactories {
		for k, old := range rl.factories {
			old.Free()
			delete(rl.factories, k)
		}
	}
	if rl.factories == nil {
		rl.factories = make(map[string]quickjs.Value)
	}
	rl.factories[source] = f
	return f, nil
}

// factoryPrefix opens a factory's arrow function and the parentheses that
// make the source an expression.
const factoryPrefix = "(() => ("

// maxFactories bounds the factories a realm keeps; past it, it forgets
// them all.
const maxFactories = 64

// tidy makes the global object as the realm left it once made, and
// reports whether it could: the engine's count of its own properties,
// private fields included, its prototype and its extensibility are read
// straight from the engine (no JavaScript runs for a call that added no
// global); when they differ, realm.js deletes the globals the call added
// and they are read again.
func (rl *realm) tidy() bool {
	if s, ok := rl.vm.GlobalShape(); ok && s == rl.shape {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), tidyTimeout)
	defer cancel()
	var res string
	err := rl.vm.Run(ctx, func(q *quickjs.VM) error {
		out, err := rl.dispatch.Call(quickjs.UndefinedValue, "tidy")
		res, _ = out.(string)
		return err
	})
	if err != nil || rl.vm.Gone() || res != "0" {
		return false
	}
	s, ok := rl.vm.GlobalShape()
	return ok && s == rl.shape
}

// tidyTimeout bounds realm.js's tidy-up: it deletes properties, which
// runs no script code.
const tidyTimeout = time.Second

// checkSource compiles source, the text of a call, as the one expression
// it must be, without running it. Wrapped in parentheses, the source is
// the expression the call evaluates (the opening one shares the first
// line so that line numbers stay those of the source; the newline ends a
// trailing // comment). A source that closes the parenthesis and goes on
// ("0); let x = 1; (0") would compile to more than one statement, and a
// top-level declaration would outlive the call in a reused realm: it
// also compiles in brackets, which it cannot close as well — a bracket
// closed early in one wrapping is a syntax error in the other — so a
// source that compiles both ways is one expression.
func checkSource(q *quickjs.VM, source string) *handle.CapabilityError {
	if strings.TrimSpace(source) == "" {
		return fail("the script is empty; it must be a function expression such as (args) => args.a + args.b")
	}
	if _, err := q.Compile("("+source+"\n)", quickjs.EvalGlobal); err != nil {
		var qe *quickjs.Error
		if errors.As(err, &qe) && qe.Name == "SyntaxError" {
			return syntaxError(qe, source)
		}
		if jsvm.KindOf(err) == jsvm.Memory || err.Error() == "OOM" {
			return memoryError(0)
		}
		return fail("the script does not compile: %s", truncate(err.Error()))
	}
	if _, err := q.Compile("["+source+"\n]", quickjs.EvalGlobal); err != nil {
		return fail("the script must be one function expression, such as (args) => args.a + args.b, with nothing after it")
	}
	return nil
}

// decode turns realm.js's answer into an outcome.
func (rl *realm) decode(ctx context.Context, s string, g Grants) outcome {
	if s == "" {
		return outcome{err: internal(errors.New("the realm gave no answer"))}
	}
	switch s[0] {
	case 'u':
		return outcome{result: json.RawMessage("null")}
	case 'r':
		res := s[1:]
		if len(res) > g.MaxResultBytes {
			return outcome{err: handle.Errorf(handle.KindJS, opCall, protocol.CodeTooLarge,
				"the result is more than %d bytes of JSON", g.MaxResultBytes)}
		}
		if depth(res) > maxNesting {
			return outcome{err: fail("the result nests deeper than %d levels", maxNesting)}
		}
		return outcome{result: json.RawMessage(res)}
	case 'e':
		var t thrown
		if err := json.Unmarshal([]byte(s[1:]), &t); err != nil {
			return outcome{err: internal(fmt.Errorf("the realm's answer %q: %w", s, err))}
		}
		return outcome{err: rl.thrownError(ctx, t)}
	}
	return outcome{err: internal(fmt.Errorf("the realm answered %q", s))}
}

// thrownError is the error of an exception realm.js caught.
func (rl *realm) thrownError(ctx context.Context, t thrown) error {
	switch t.Engine {
	case "interrupted":
		rl.reuse = false
		if ctx.Err() != nil {
			return handle.FromContext(ctx, handle.KindJS, opCall)
		}
		return deadlineError()
	case "memory":
		// "string too long" is not final as running out of memory is: a
		// script may catch it. One that did not ends the call.
		rl.reuse = false
		return memoryError(rl.vm.Limits().MemoryBytes - rl.base)
	case "stack":
		if t.Stage == "encode" {
			return fail("encoding the result failed: nesting deeper than the engine's stack allows (%d frames)", stackSlots)
		}
		return fail("%s: maximum call stack size (%d frames) exceeded", stageText(t.Stage), stackSlots)
	}
	if t.Stage == "type" {
		return fail("the script must evaluate to a function, such as (args) => args.a + args.b; it evaluated to %s", *t.Message)
	}
	msg := "an exception whose toString threw"
	if t.Message != nil {
		msg = truncate(*t.Message) + position(t.Stack)
		if jsvm.SizeLimit(*t.Message) {
			return handle.Errorf(handle.KindJS, opCall, protocol.CodeTooLarge, "%s: %s (a size beyond the engine's limits)", stageText(t.Stage), msg)
		}
	}
	return fail("%s: %s", stageText(t.Stage), msg)
}

func stageText(stage string) string {
	switch stage {
	case "promise":
		return "the function's promise was rejected"
	case "encode":
		return "encoding the result failed"
	case "script":
		return "the script failed"
	}
	return "the function threw"
}

// framePosition finds a stack frame in the script's own source, which
// the Go side evaluates (the engine names it <eval>); code that eval or
// the Function constructors compiled is <input>.
var framePosition = regexp.MustCompile(`<eval>:(\d+):(\d+)`)

// position is " (line L, column C)" of the innermost frame in the
// script's source, in the source's terms, or "".
func position(stack string) string {
	m := framePosition.FindStringSubmatch(stack)
	if m == nil {
		return ""
	}
	line, _ := strconv.Atoi(m[1])
	col, _ := strconv.Atoi(m[2])
	if line == 1 && col > len(factoryPrefix) {
		col -= len(factoryPrefix) // what the factory put before the source
	}
	return fmt.Sprintf(" (line %d, column %d)", line, col)
}

// syntaxError describes a compile error in the terms of the source the
// caller wrote, rather than of the parenthesised copy that was compiled.
func syntaxError(qe *quickjs.Error, source string) *handle.CapabilityError {
	line, col := qe.LineNumber, qe.ColumnNumber
	if line == 0 {
		if m := framePosition.FindStringSubmatch(qe.Stack); m != nil {
			line, _ = strconv.Atoi(m[1])
			col, _ = strconv.Atoi(m[2])
		}
	}
	switch {
	case line == 0:
		return fail("syntax error: %s", truncate(qe.Message))
	case line > strings.Count(source, "\n")+1:
		// At the ")" put after the source.
		return fail("syntax error: the script ends too early (is a bracket, brace or string left open?): %s", truncate(qe.Message))
	case line == 1 && col > 1:
		col-- // the "(" put before the source
	}
	return fail("syntax error at line %d, column %d: %s", line, col, truncate(qe.Message))
}

// engineError maps what stopped the engine to a CapabilityError.
func engineError(ctx context.Context, err error, g Grants) *handle.CapabilityError {
	switch jsvm.KindOf(err) {
	case jsvm.Timeout:
		if ctx.Err() != nil {
			return handle.FromContext(ctx, handle.KindJS, opCall)
		}
		return deadlineError()
	case jsvm.Cancelled:
		return handle.FromContext(ctx, handle.KindJS, opCall)
	case jsvm.Memory:
		return memoryError(g.MaxMemoryBytes)
	case jsvm.Stack:
		return fail("the script failed: maximum call stack size (%d frames) exceeded", stackSlots)
	case jsvm.Crashed:
		return internal(err)
	}
	var je *jsvm.Error
	if errors.As(err, &je) {
		return fail("the script failed: %s", truncate(je.Error()))
	}
	return internal(err)
}

// deadlineError is the error of a call the engine's own timeout stopped
// just before its context's deadline registered: the same words as
// handle.FromContext's, so that a call ends alike whichever noticed first.
func deadlineError() *handle.CapabilityError {
	return &handle.CapabilityError{Handle: handle.KindJS, Op: opCall, Code: protocol.CodeTimeout,
		Message: "the operation did not finish before its deadline", Err: context.DeadlineExceeded}
}

func memoryError(budget int64) *handle.CapabilityError {
	return handle.Errorf(handle.KindJS, opCall, protocol.CodeTooLarge,
		"the script went over its memory budget of %d MiB", max(budget, 0)>>20)
}

func internal(err error) *handle.CapabilityError {
	return &handle.CapabilityError{Handle: handle.KindJS, Op: opCall, Code: protocol.CodeInternal,
		Message: "the JavaScript engine failed; this is a bug in the runtime, not in the script", Err: err}
}

// fail returns an invalid_argument error: the script, its arguments or its
// result are at fault.
func fail(format string, args ...any) *handle.CapabilityError {
	return handle.Errorf(handle.KindJS, opCall, protocol.CodeInvalidArgument, format, args...)
}

// truncate caps a message for the model.
func truncate(s string) string { return textcut.Cut(s, maxMessage) }

// depth returns how deep the brackets of JSON text s nest (s is valid
// JSON, or the check that reads it comes first).
func depth(s string) int {
	d, most := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
		case '[', '{':
			d++
			most = max(most, d)
		case ']', '}':
			d--
		}
	}
	return most
}
