package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/brainrt/brain/internal/abi"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/tool"
)

// Artifact is a tool artifact: a manifest whose payload the host holds. It
// implements tool.Attachable.
type Artifact struct {
	h *Host
	m tool.Manifest
}

// Manifest returns the artifact's manifest.
func (a *Artifact) Manifest() tool.Manifest { return a.m }

// Provision verifies the payload, compiles it (or loads it from the cache),
// checks that it imports host functions only for the handles it declares,
// and instantiates and initialises one instance with the bindings. Every
// failure is returned here, so that it fails the attach receipt.
func (a *Artifact) Provision(ctx context.Context, hs tool.Handles, bindings map[string]json.RawMessage) (tool.Instance, error) {
	a.h.mu.RLock()
	payload, ok := a.h.payloads[a.m.Payload]
	a.h.mu.RUnlock()
	if !ok {
		return nil, errf(protocol.CodeNotFound, "unknown payload identity %q: the host holds no such payload", a.m.Payload)
	}
	if got := Identity(payload); got != a.m.Payload { // never compile bytes that are not what the manifest names
		return nil, errf(protocol.CodeInvalidRequest, "payload does not match its identity %s (got %s)", a.m.Payload, got)
	}
	cm, err := a.h.rt.CompileModule(ctx, payload)
	if err != nil {
		return nil, errf(protocol.CodeInvalidRequest, "payload does not compile: %v", err)
	}
	allowed := allowedModules(a.m.Requires)
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		if !allowed[mod] {
			_ = cm.Close(ctx)
			return nil, errf(protocol.CodeForbidden, "payload imports host function %s.%s, which belongs to a handle the tool does not declare (requires %v)", mod, name, a.m.Requires)
		}
	}
	for _, name := range []string{abi.ExportAlloc, abi.ExportInit, abi.ExportInvoke} {
		if _, ok := cm.ExportedFunctions()[name]; !ok {
			_ = cm.Close(ctx)
			return nil, errf(protocol.CodeInvalidRequest, "payload does not export %s: it was not built by brain build", name)
		}
	}
	if bindings == nil {
		bindings = map[string]json.RawMessage{}
	}
	bj, err := json.Marshal(bindings)
	if err != nil {
		_ = cm.Close(ctx)
		return nil, fmt.Errorf("bindings: %w", err)
	}
	p := &pool{h: a.h, cm: cm, bindings: bj, sem: make(chan struct{}, a.h.opts.PoolSize), name: a.m.Name}
	first, err := p.newInstance(withCallState(ctx, &callState{handles: hs}))
	if err != nil {
		_ = cm.Close(ctx)
		return nil, err
	}
	p.idle = append(p.idle, first)
	return p, nil
}

// pool is a provisioned artifact: a bounded set of initialised instances.
type pool struct {
	h        *Host
	cm       wazero.CompiledModule
	bindings []byte
	name     string
	sem      chan struct{} // one token per instance in use or being made

	mu     sync.Mutex
	idle   []*instance
	closed bool
}

// instance is one initialised guest. Not safe for concurrent use: a Go
// guest runs one call at a time.
type instance struct {
	mod    api.Module
	mem    api.Memory
	alloc  api.Function
	invoke api.Function
	stack  []uint64
}

// newInstance instantiates the module, runs _initialize (the Go runtime and
// the tool's package initialisation) and brain_init with the bindings.
func (p *pool) newInstance(ctx context.Context) (*instance, error) {
	mod, err := p.h.rt.InstantiateModule(ctx, p.cm, guestConfig())
	if err != nil {
		return nil, errf(protocol.CodeInternal, "instantiate: %v", trapMessage(err))
	}
	in := &instance{mod: mod, mem: mod.Memory(), alloc: mod.ExportedFunction(abi.ExportAlloc),
		invoke: mod.ExportedFunction(abi.ExportInvoke), stack: make([]uint64, 2)}
	if in.mem == nil {
		_ = mod.Close(ctx)
		return nil, errf(protocol.CodeInvalidRequest, "payload exports no memory")
	}
	out, err := in.call(ctx, mod.ExportedFunction(abi.ExportInit), p.bindings)
	if err != nil {
		_ = mod.Close(ctx)
		return nil, errf(protocol.CodeInternal, "init trapped: %v", trapMessage(err))
	}
	if out.Err != nil {
		_ = mod.Close(ctx)
		return nil, out.Err
	}
	return in, nil
}

// call writes data into the guest, calls fn(ptr, len) and decodes the
// Outcome it returns.
func (in *instance) call(ctx context.Context, fn api.Function, data []byte) (protocol.Outcome, error) {
	in.stack[0] = uint64(len(data))
	if err := in.alloc.CallWithStack(ctx, in.stack); err != nil {
		return protocol.Outcome{}, err
	}
	ptr := uint32(in.stack[0])
	if !in.mem.Write(ptr, data) {
		return protocol.Outcome{}, fmt.Errorf("brain_alloc returned %d, outside memory", ptr)
	}
	in.stack[0], in.stack[1] = uint64(ptr), uint64(len(data))
	if err := fn.CallWithStack(ctx, in.stack); err != nil {
		return protocol.Outcome{}, err
	}
	rp, rn := abi.Unpack(in.stack[0])
	raw, ok := in.mem.Read(rp, rn)
	if !ok {
		return protocol.Outcome{}, fmt.Errorf("the result (%d bytes at %d) is outside memory", rn, rp)
	}
	var out protocol.Outcome
	if err := json.Unmarshal(raw, &out); err != nil {
		return protocol.Outcome{}, fmt.Errorf("the result is not an outcome: %v", err)
	}
	out.Value = slices.Clone(out.Value) // raw aliases guest memory
	return out, nil
}

// get returns an idle instance or makes one, waiting while PoolSize calls
// are running. A new instance is initialised with st's handles.
func (p *pool) get(ctx context.Context, st *callState) (*instance, error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.sem
		return nil, errf(protocol.CodeUnavailable, "the tool %q was detached", p.name)
	}
	if n := len(p.idle); n > 0 {
		in := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return in, nil
	}
	p.mu.Unlock()
	in, err := p.newInstance(withCallState(context.WithoutCancel(ctx), st))
	if err != nil {
		<-p.sem
		return nil, err
	}
	return in, nil
}

func (p *pool) put(in *instance) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = in.mod.Close(context.Background())
	} else {
		p.idle = append(p.idle, in)
		p.mu.Unlock()
	}
	<-p.sem
}

// discard closes an instance that trapped or was stopped: it is never
// reused, and the next call makes a fresh one.
func (p *pool) discard(in *instance) {
	_ = in.mod.Close(context.Background())
	<-p.sem
}

// Invoke runs one call on an instance of the pool. The handles of the call
// are reachable by the host functions through the call's context, and only
// for the duration of the call.
func (p *pool) Invoke(ctx context.Context, c *tool.Call) (json.RawMessage, error) {
	st := &callState{handles: c.Handles, progress: c.Progress}
	in, err := p.get(ctx, st)
	if err != nil {
		return nil, err
	}
	req, err := json.Marshal(abi.InvokeRequest{ID: c.ID, Input: c.Input, Workspace: c.Workspace})
	if err != nil {
		p.put(in)
		return nil, err
	}
	out, err := in.call(withCallState(ctx, st), in.invoke, req)
	if err != nil {
		p.discard(in)
		return nil, mapTrap(ctx, p.name, err)
	}
	p.put(in)
	if out.Err != nil {
		return nil, out.Err
	}
	return out.Value, nil
}

// Close closes the idle instances; busy ones close when their call ends.
func (p *pool) Close() error {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, in := range idle {
		_ = in.mod.Close(context.Background())
	}
	return nil
}

// mapTrap turns what stopped a guest into an error with a code: the
// deadline is timeout, a cancellation cancelled, anything else (a trap, a
// panic, running out of memory) internal.
func mapTrap(ctx context.Context, name string, err error) error {
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		switch exit.ExitCode() {
		case sys.ExitCodeDeadlineExceeded:
			return errf(protocol.CodeTimeout, "the tool %q did not finish before its deadline", name)
		case sys.ExitCodeContextCanceled:
			return errf(protocol.CodeCancelled, "the call to %q was cancelled", name)
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errf(protocol.CodeInternal, "the tool %q crashed: %s; the environment is unaffected", name, trapMessage(err))
}

// trapMessage shortens a wazero error to its first line.
func trapMessage(err error) string {
	s := err.Error()
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}
