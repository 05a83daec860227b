package kernel

import (
	"context"
	"encoding/json"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync/atomic"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/tool"
)

var callCounter atomic.Uint64

// Call is one invocation of an attached tool.
type Call struct {
	// ID identifies the call; empty means one is generated.
	ID string
	// Session is the session the call belongs to, handed to the tool as
	// tool.Call.Session; empty for a call made outside any session.
	Session string
	// Input is the tool's input as JSON.
	Input json.RawMessage
	// Progress, if set, receives the tool's progress reports.
	Progress func(tool.Progress)
}

// Invoke runs one call of the tool name and returns its Outcome: not_found
// for an unknown tool; invalid_input when the input fails the tool's schema
// (the tool does not run); otherwise the tool's value, or its error mapped
// by protocol.OutcomeOf (an identifier-shaped code is kept, anything else is
// tool_error), internal for a panic (the environment survives), timeout at
// the deadline and cancelled on cancellation. The call is bounded by ctx and
// the tool's policy CallTimeout (default: the environment's), and returns at the deadline even if the
// tool ignores its context.
func (e *Environment) Invoke(ctx context.Context, name string, call Call) protocol.Outcome {
	if call.ID == "" {
		call.ID = "k" + strconv.FormatUint(callCounter.Add(1), 36)
	}
	return e.invoke(ctx, name, call, true)
}

// invoke validates and runs a call. bounded says whether this function must
// enforce the deadline itself: the session's bridge already does, for calls
// that come through it.
func (e *Environment) invoke(ctx context.Context, name string, call Call, bounded bool) protocol.Outcome {
	e.mu.RLock()
	at := e.tools[name]
	e.mu.RUnlock()
	if at == nil {
		return protocol.Fail(protocol.CodeNotFound, "no tool named %q is attached", name)
	}
	if len(call.Input) == 0 {
		call.Input = json.RawMessage("{}")
	}
	if err := at.input.ValidateJSON(call.Input); err != nil {
		return protocol.Fail(protocol.CodeInvalidInput, "input for %q is invalid: %v", name, err)
	}
	if !bounded {
		return e.run(ctx, at, call)
	}
	timeout := e.opts.CallTimeout
	if at.policy.CallTimeout > 0 {
		timeout = at.policy.CallTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, ok := at.inst.(tool.DeadlineBound); ok && e.staticHandles(at.manifest.Requires) {
		return e.run(ctx, at, call) // it returns by the deadline itself: no hop to a worker
	}
	j := &job{ctx: ctx, at: at, call: call, done: make(chan protocol.Outcome, 1)}
	e.workers.Submit(j)
	select {
	case out := <-j.done:
		return out
	case <-ctx.Done():
		return ctxOutcome(ctx)
	}
}

// job is one bounded call, run on a reused worker goroutine so that the
// caller can return at the deadline even if the tool ignores its context.
type job struct {
	ctx  context.Context
	at   *attached
	call Call
	done chan protocol.Outcome // buffered: the worker never blocks on a caller that left
}

func (e *Environment) runJob(j *job) { j.done <- e.run(j.ctx, j.at, j.call) }

// run acquires the tool's handles, runs it, and maps what happened.
func (e *Environment) run(ctx context.Context, at *attached, call Call) (out protocol.Outcome) {
	defer func() {
		if p := recover(); p != nil {
			e.log.Error("tool panicked", slog.String("tool", at.manifest.Name), slog.String("call", call.ID),
				slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			out = protocol.Fail(protocol.CodeInternal, "the tool %q crashed; the environment is unaffected", at.manifest.Name)
		}
	}()
	hs, release, err := e.acquire(ctx, at.manifest.Requires)
	if err != nil {
		return protocol.OutcomeOf(err)
	}
	defer release()
	state := call.Session // whose state the instance may hold: every session's when the policy shares it
	if at.policy.shared() {
		state = ""
	}
	v, err := at.inst.Invoke(newToolContext(ctx), &tool.Call{ID: call.ID, Session: state, Input: call.Input, Handles: hs, Workspace: e.opts.Workspace, Progress: call.Progress})
	if ctx.Err() != nil {
		return ctxOutcome(ctx)
	}
	if err != nil {
		return protocol.OutcomeOf(err)
	}
	if at.output != nil {
		if err := at.output.ValidateJSON(v); err != nil {
			return protocol.Fail(protocol.CodeInvalidOutput, "the result of %q does not match its output_schema: %v", at.manifest.Name, err)
		}
	}
	return protocol.OK(v)
}

func ctxOutcome(ctx context.Context) protocol.Outcome {
	if ctx.Err() == context.DeadlineExceeded {
		return protocol.Fail(protocol.CodeTimeout, "the call did not finish before its deadline")
	}
	return protocol.Fail(protocol.CodeCancelled, "the call was cancelled")
}

// staticHandles reports whether every handle of kinds is provided by
// [Static], whose Acquire and release return at once.
func (e *Environment) staticHandles(kinds []handle.Kind) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	for _, k := range kinds {
		if _, ok := e.provided[k].(static); !ok {
			return false
		}
	}
	return true
}
