package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/internal/abi"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/tool"
)

// MaxRequestBytes bounds one request a guest sends to a host function.
const MaxRequestBytes = 64 << 20

// callState is what the host functions of one call may use: exactly the
// handles the environment gave the call, and the pending response. It is
// the call's context too (one allocation for both), carrying itself as
// the value of stateKey.
type callState struct {
	context.Context
	handles  tool.Handles
	progress func(tool.Progress)
	pending  []byte
}

type stateKey struct{}

func newCallState(ctx context.Context, hs tool.Handles, progress func(tool.Progress)) *callState {
	return &callState{Context: ctx, handles: hs, progress: progress}
}

// Value returns the call state for stateKey, and the parent's values
// otherwise.
func (st *callState) Value(key any) any {
	if key == (stateKey{}) {
		return st
	}
	return st.Context.Value(key)
}

// op is one handle operation: decode req, act on h, return a value.
type op func(ctx context.Context, h any, req []byte) (any, error)

// ops are the host side of every handle operation of abi.Ops.
var ops = map[handle.Kind]map[string]op{
	handle.KindFS: {
		"read_file": withPath(func(ctx context.Context, fs handle.FS, p string) (any, error) { return fs.ReadFile(ctx, p) }),
		"read_dir":  withPath(func(ctx context.Context, fs handle.FS, p string) (any, error) { return fs.ReadDir(ctx, p) }),
		"stat":      withPath(func(ctx context.Context, fs handle.FS, p string) (any, error) { return fs.Stat(ctx, p) }),
		"mkdir_all": withPath(func(ctx context.Context, fs handle.FS, p string) (any, error) { return nil, fs.MkdirAll(ctx, p) }),
		"remove":    withPath(func(ctx context.Context, fs handle.FS, p string) (any, error) { return nil, fs.Remove(ctx, p) }),
		"glob":      withPath(func(ctx context.Context, fs handle.FS, p string) (any, error) { return fs.Glob(ctx, p) }),
		"walk": withPath(func(ctx context.Context, fs handle.FS, p string) (any, error) {
			entries := []abi.WalkEntry{}
			err := fs.Walk(ctx, p, func(path string, info handle.FileInfo) error {
				entries = append(entries, abi.WalkEntry{Path: path, Info: info})
				return nil
			})
			return entries, err
		}),
		"write_file": typed(func(ctx context.Context, fs handle.FS, r abi.WriteRequest) (any, error) {
			return nil, fs.WriteFile(ctx, r.Path, r.Data)
		}),
		"rename": typed(func(ctx context.Context, fs handle.FS, r abi.TwoPathRequest) (any, error) {
			return nil, fs.Rename(ctx, r.From, r.To)
		}),
		"symlink": typed(func(ctx context.Context, fs handle.FS, r abi.TwoPathRequest) (any, error) {
			return nil, fs.Symlink(ctx, r.From, r.To)
		}),
		"link": typed(func(ctx context.Context, fs handle.FS, r abi.TwoPathRequest) (any, error) {
			return nil, fs.Link(ctx, r.From, r.To)
		}),
	},
	handle.KindExec: {
		"run": typed(func(ctx context.Context, x handle.Exec, c handle.Command) (any, error) { return x.Run(ctx, c) }),
	},
	handle.KindNet: {
		"fetch": typed(func(ctx context.Context, n handle.Net, r handle.Request) (any, error) { return n.Fetch(ctx, r) }),
	},
	handle.KindJS: {
		"call": typed(func(ctx context.Context, j handle.JS, r abi.JSRequest) (any, error) {
			return j.Call(ctx, r.Source, r.Args)
		}),
	},
	handle.KindPage: {
		"navigate": typed(func(ctx context.Context, p handle.Page, r abi.PageRequest) (any, error) {
			return nil, p.Navigate(ctx, r.URL)
		}),
		"text": typed(func(ctx context.Context, p handle.Page, r abi.PageRequest) (any, error) {
			return p.Text(ctx, r.Selector)
		}),
		"evaluate": typed(func(ctx context.Context, p handle.Page, r abi.PageRequest) (any, error) {
			return p.Evaluate(ctx, r.Expression)
		}),
		"screenshot": typed(func(ctx context.Context, p handle.Page, _ struct{}) (any, error) {
			return p.Screenshot(ctx)
		}),
	},
}

// typed adapts a function of a handle H and a request R to an op.
func typed[H, R any](fn func(ctx context.Context, h H, req R) (any, error)) op {
	return func(ctx context.Context, h any, raw []byte) (any, error) {
		hh, ok := h.(H)
		if !ok {
			return nil, errors.New("handle of the wrong type")
		}
		var req R
		if err := json.Unmarshal(raw, &req); err != nil {
			return nil, &handle.CapabilityError{Op: "decode", Code: protocol.CodeInvalidArgument, Message: "the request does not decode: " + err.Error()}
		}
		return fn(ctx, hh, req)
	}
}

func withPath(fn func(ctx context.Context, fs handle.FS, path string) (any, error)) op {
	return typed(func(ctx context.Context, fs handle.FS, r abi.PathRequest) (any, error) { return fn(ctx, fs, r.Path) })
}

var (
	i32 = api.ValueTypeI32
)

// instantiateHostModules defines module "brain" and one module per handle.
func instantiateHostModules(ctx context.Context, rt wazero.Runtime) error {
	b := rt.NewHostModuleBuilder(abi.ModuleBrain)
	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(response), []api.ValueType{i32}, nil).Export(abi.ImportResponse)
	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(progress), []api.ValueType{i32, i32}, nil).Export(abi.ImportProgress)
	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(tick), nil, []api.ValueType{i32}).Export(tickImport)
	if _, err := b.Instantiate(ctx); err != nil {
		return err
	}
	for kind, names := range abi.Ops {
		mb := rt.NewHostModuleBuilder(abi.HandleModule(kind))
		for _, name := range names {
			fn, ok := ops[kind][name]
			if !ok {
				return fmt.Errorf("no host implementation of %s.%s", abi.HandleModule(kind), name)
			}
			mb.NewFunctionBuilder().WithGoModuleFunction(handleOp(kind, name, fn), []api.ValueType{i32, i32}, []api.ValueType{i32}).Export(name)
		}
		if _, err := mb.Instantiate(ctx); err != nil {
			return err
		}
	}
	return nil
}

// handleOp is the host function of one operation: read the request from
// guest memory, run it against the call's handle within the call's
// deadline, keep the outcome as the pending response and return its length.
func handleOp(kind handle.Kind, name string, fn op) api.GoModuleFunc {
	return func(ctx context.Context, mod api.Module, stack []uint64) {
		st, _ := ctx.Value(stateKey{}).(*callState)
		if st == nil {
			stack[0] = 0 // called outside a call: an empty response fails to decode in the guest
			return
		}
		out := runOp(ctx, st, mod, kind, name, fn, uint32(stack[0]), uint32(stack[1]))
		b, err := json.Marshal(out)
		if err != nil {
			b, _ = json.Marshal(protocol.Fail(protocol.CodeInternal, "%s %s: the response does not encode", kind, name))
		}
		st.pending = b
		stack[0] = uint64(len(b))
	}
}

func runOp(ctx context.Context, st *callState, mod api.Module, kind handle.Kind, name string, fn op, ptr, n uint32) protocol.Outcome {
	if err := ctx.Err(); err != nil {
		return deadlineOutcome(err, kind, name)
	}
	h := st.handles.Get(kind)
	if h == nil {
		return protocol.Fail(protocol.CodeDenied, "the %s handle was not given to this call", kind)
	}
	if n > MaxRequestBytes {
		return protocol.Fail(protocol.CodeTooLarge, "%s %s: the request is %d bytes, more than %d", kind, name, n, MaxRequestBytes)
	}
	view, ok := mod.Memory().Read(ptr, n)
	if !ok {
		return protocol.Fail(protocol.CodeInvalidArgument, "%s %s: the request is outside the guest's memory", kind, name)
	}
	req := bytes.Clone(view) // the operation may outlive the guest's interest in it
	return bounded(ctx, kind, name, func() protocol.Outcome {
		v, err := fn(ctx, h, req)
		if err != nil {
			var ce *handle.CapabilityError
			if errors.As(err, &ce) {
				return protocol.Outcome{Err: &protocol.Error{Code: ce.Code, Message: ce.Message}}
			}
			return protocol.OutcomeOf(err)
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return protocol.Fail(protocol.CodeInternal, "%s %s: the result does not encode: %v", kind, name, err)
		}
		return protocol.OK(raw)
	})
}

// bounded runs f, but returns at ctx's deadline (or cancellation) even if f
// does not: a host function never holds a guest, and so its pool slot,
// past the call's deadline, whatever the handle behind it does. f runs on
// its own goroutine, and a panic in it becomes an internal outcome.
func bounded(ctx context.Context, kind handle.Kind, name string, f func() protocol.Outcome) protocol.Outcome {
	done := make(chan protocol.Outcome, 1) // f never blocks on a caller that left
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- protocol.Fail(protocol.CodeInternal, "%s %s: the handle panicked", kind, name)
			}
		}()
		done <- f()
	}()
	select {
	case out := <-done:
		return out
	case <-ctx.Done():
		return deadlineOutcome(ctx.Err(), kind, name)
	}
}

func deadlineOutcome(err error, kind handle.Kind, name string) protocol.Outcome {
	if errors.Is(err, context.Canceled) {
		return protocol.Fail(protocol.CodeCancelled, "%s %s: the call was cancelled", kind, name)
	}
	return protocol.Fail(protocol.CodeTimeout, "%s %s: the call's deadline passed", kind, name)
}

func response(ctx context.Context, mod api.Module, stack []uint64) {
	st, _ := ctx.Value(stateKey{}).(*callState)
	if st == nil {
		return
	}
	mod.Memory().Write(uint32(stack[0]), st.pending)
	st.pending = nil
}

// progress reports a guest's progress through the call's callback, within
// the call's deadline.
func progress(ctx context.Context, mod api.Module, stack []uint64) {
	st, _ := ctx.Value(stateKey{}).(*callState)
	if st == nil || st.progress == nil || ctx.Err() != nil {
		return
	}
	raw, ok := mod.Memory().Read(uint32(stack[0]), uint32(stack[1]))
	if !ok || len(raw) > 64<<10 {
		return
	}
	var p tool.Progress
	if json.Unmarshal(raw, &p) != nil {
		return
	}
	report := st.progress
	bounded(ctx, "brain", abi.ImportProgress, func() protocol.Outcome {
		report(p)
		return protocol.Outcome{}
	})
}

// tick is what an instrumented guest calls when its fuel runs out: it stops
// the guest if the call's context is done (a trap with the exit code of a
// deadline or a cancellation), and otherwise returns the next allowance.
func tick(ctx context.Context, _ api.Module, stack []uint64) {
	if err := ctx.Err(); err != nil {
		if errors.Is(err, context.Canceled) {
			panic(sys.NewExitError(sys.ExitCodeContextCanceled))
		}
		panic(sys.NewExitError(sys.ExitCodeDeadlineExceeded))
	}
	stack[0] = fuelPerTick
}
