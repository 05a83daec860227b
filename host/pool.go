package host

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/brainrt/brain/internal/jsonvalid"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/brainrt/brain/internal/abi"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/tool"
)

// pool is a provisioned artifact: a bounded set of initialised instances.
//
// An instance serves one session: a guest's memory — its package
// variables, its heap — is state, and a tool that keeps the last input it
// saw must never show it to another session (docs/security.md, "Artifact
// state"). So an instance is reused only by calls of the session it first
// served (tool.Call.Session; "" for calls outside a session, and for every
// call of a tool whose policy shares instances); another session takes a
// fresh one — never used by any session, like the one made at attach — or
// makes one. Idle instances are kept up to Options.IdleInstances, the
// least recently used closed first, and a session's are closed when it
// leaves the environment (EndSession).
//
// A slot (a token of sem) is held from the moment a call takes or makes an
// instance until the call ends, which is by its context's deadline: the
// guest is stopped at its next tick, and every place it can wait (its
// sleep, every host function) returns at the deadline itself. An instance
// whose call ran into its deadline or was cancelled is never reused.
type pool struct {
	h        *Host
	cm       wazero.CompiledModule
	bindings []byte
	name     string
	payload  string
	sem      chan struct{} // one token per instance in use or being made

	mu       sync.Mutex
	idle     []*instance    // used by a session (instance.session), least recently used first
	fresh    []*instance    // initialised, never used by any session
	inUse    int            // instances holding a slot: running a call or being made
	running  map[string]int // session → the slots its calls hold
	extra    int            // slots held beyond sem's (acquireSlot)
	discards uint64
	closed   bool
}

// instance is one initialised guest. Not safe for concurrent use: a Go
// guest runs one call at a time.
type instance struct {
	mod    api.Module
	mem    api.Memory
	alloc  api.Function
	invoke api.Function
	stack  []uint64
	req    []byte          // the invoke request, reused
	abort  chan struct{}   // closed when an initialisation is given up: ends its sleep
	cur    context.Context // the context of the running export call, for the sleep
	once   sync.Once
	lin    *linearMemory // its memory, if outside the Go heap (memory.go)

	session string // the session whose calls it serves; set when it leaves fresh
	extra   bool   // its call holds one of the pool's extra slots (acquireSlot)
}

func (in *instance) wake() { in.once.Do(func() { close(in.abort) }) }

// newInstance instantiates the module, runs _initialize (the Go runtime and
// the tool's package initialisation) and brain_init with the bindings, all
// within ctx and Options.InitTimeout. st gives the host functions the
// handles of the attach or the call that grows the pool.
func (p *pool) newInstance(ctx context.Context, st *callState) (*instance, error) {
	ctx, cancel := context.WithTimeout(ctx, p.h.opts.InitTimeout)
	defer cancel()
	in := &instance{abort: make(chan struct{}), stack: make([]uint64, 2)}
	stop := context.AfterFunc(ctx, in.wake)
	err := p.initialise(newCallState(ctx, st.handles, st.progress), in)
	if !stop() && err == nil { // the deadline came as it finished: its sleep is broken
		_ = in.mod.Close(context.Background())
		err = initStopped(ctx, p.name)
	}
	if err != nil {
		in.lin.drop()
		return nil, err
	}
	return in, nil
}

func (p *pool) initialise(ctx context.Context, in *instance) error {
	in.cur = ctx // _initialize runs inside InstantiateModule
	mod, err := p.h.rt.InstantiateModule(withLinearMemory(ctx, in), p.cm, guestConfig(in))
	in.cur = nil
	if err != nil {
		if ctx.Err() != nil {
			return initStopped(ctx, p.name)
		}
		return errf(protocol.CodeInternal, "instantiate: %v", trapMessage(err))
	}
	in.mod, in.mem = mod, mod.Memory()
	in.alloc, in.invoke = mod.ExportedFunction(abi.ExportAlloc), mod.ExportedFunction(abi.ExportInvoke)
	if in.mem == nil {
		_ = mod.Close(context.Background())
		return errf(protocol.CodeInvalidRequest, "payload exports no memory")
	}
	raw, err := in.call(ctx, mod.ExportedFunction(abi.ExportInit), p.bindings)
	var out protocol.Outcome
	if err == nil {
		out, err = decodeOutcome(raw)
	}
	if err != nil {
		_ = mod.Close(context.Background())
		if ctx.Err() != nil {
			return initStopped(ctx, p.name)
		}
		return errf(protocol.CodeInternal, "init trapped: %v", trapMessage(err))
	}
	if out.Err != nil {
		_ = mod.Close(context.Background())
		return out.Err
	}
	return nil
}

func initStopped(ctx context.Context, name string) error {
	return stopped(ctx, fmt.Sprintf("initialising an instance of %q", name))
}

// stopped is the error of work (what) that ctx ended: cancelled, or past
// its deadline.
func stopped(ctx context.Context, what string) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return errf(protocol.CodeCancelled, "%s was cancelled", what)
	}
	return errf(protocol.CodeTimeout, "%s did not finish before its deadline", what)
}

// call writes data into the guest, calls fn(ptr, len) and returns the
// bytes it answers, which alias guest memory.
func (in *instance) call(ctx context.Context, fn api.Function, data []byte) ([]byte, error) {
	in.cur = ctx
	defer func() { in.cur = nil }()
	in.stack[0] = uint64(len(data))
	if err := in.alloc.CallWithStack(ctx, in.stack); err != nil {
		return nil, err
	}
	ptr := uint32(in.stack[0])
	if !in.mem.Write(ptr, data) {
		return nil, fmt.Errorf("brain_alloc returned %d, outside memory", ptr)
	}
	in.stack[0], in.stack[1] = uint64(ptr), uint64(len(data))
	if err := fn.CallWithStack(ctx, in.stack); err != nil {
		return nil, err
	}
	rp, rn := abi.Unpack(in.stack[0])
	raw, ok := in.mem.Read(rp, rn)
	if !ok {
		return nil, fmt.Errorf("the result (%d bytes at %d) is outside memory", rn, rp)
	}
	return raw, nil
}

// decodeResult decodes what brain_invoke returned: a status byte, then the
// tool's output value or a failed Outcome. raw aliases guest memory, so
// nothing of it is kept; a value that is not JSON is refused.
func decodeResult(raw []byte) (protocol.Outcome, error) {
	if len(raw) == 0 {
		return protocol.Outcome{}, errors.New("the result is empty")
	}
	switch raw[0] {
	case abi.ResultValue:
		if !jsonvalid.Valid(raw[1:]) {
			return protocol.Outcome{}, errors.New("the result value is not JSON")
		}
		return protocol.OK(slices.Clone(raw[1:])), nil
	case abi.ResultOutcome:
		return decodeOutcome(raw[1:])
	}
	return protocol.Outcome{}, fmt.Errorf("the result starts with %#x, neither a value nor an outcome", raw[0])
}

// decodeOutcome decodes the Outcome a guest returned; raw aliases guest
// memory, so nothing of it is kept.
func decodeOutcome(raw []byte) (protocol.Outcome, error) {
	var out protocol.Outcome
	if err := json.Unmarshal(raw, &out); err != nil {
		return protocol.Outcome{}, fmt.Errorf("the result is not an outcome: %v", err)
	}
	out.Value = slices.Clone(out.Value)
	return out, nil
}

// extraSlots is how many calls beyond PoolSize a pool runs for sessions
// that had none running (acquireSlot), as a multiple of PoolSize.
const extraSlots = 3

// acquireSlot takes a slot for a call of session: one of PoolSize (which
// get then counts in running), or —
// when they are all held and session holds none — one of extraSlots ×
// PoolSize more. One session's calls (stuck until their deadline, say)
// so never keep another session's first call waiting: a probe's four
// sleeping calls of one session held every other tenant's call of that
// tool until their 60 s deadline.
func (p *pool) acquireSlot(ctx context.Context, session string) (extra bool, err error) {
	select {
	case p.sem <- struct{}{}: // a free slot: ctx.Done is not asked for (it may allocate)
	default:
		p.mu.Lock()
		if p.running[session] == 0 && p.extra < extraSlots*cap(p.sem) && !p.closed {
			p.extra++
			p.running[session]++
			p.mu.Unlock()
			return true, nil
		}
		p.mu.Unlock()
		select {
		case p.sem <- struct{}{}:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	return false, nil // counted in running by get, under the lock it takes anyway
}

// releaseSlotLocked gives back a slot acquireSlot gave session's call.
// p.mu is held (the receive does not block: the slot's token is in sem).
func (p *pool) releaseSlotLocked(session string, extra bool) {
	if n := p.running[session] - 1; n > 0 {
		p.running[session] = n
	} else {
		delete(p.running, session)
	}
	if extra {
		p.extra--
	} else {
		<-p.sem
	}
}

// get returns an idle instance of session, a fresh one, or makes one,
// waiting while PoolSize calls are running (unless session has none
// running: acquireSlot). A new instance is initialised with st's handles,
// within the call's context.
func (p *pool) get(ctx context.Context, st *callState, session string) (*instance, error) {
	extra, err := p.acquireSlot(ctx, session)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if !extra {
		p.running[session]++
	}
	if p.closed {
		p.releaseSlotLocked(session, extra)
		p.mu.Unlock()
		return nil, errf(protocol.CodeUnavailable, "the tool %q was detached", p.name)
	}
	p.inUse++
	var in *instance
	for i := len(p.idle) - 1; i >= 0; i-- {
		if p.idle[i].session == session {
			in = p.idle[i]
			p.idle = slices.Delete(p.idle, i, i+1)
			break
		}
	}
	if n := len(p.fresh); in == nil && n > 0 {
		in = p.fresh[n-1]
		p.fresh = p.fresh[:n-1]
		in.session = session
	}
	p.mu.Unlock()
	if in != nil {
		if !in.lin.acquire() { // Host.Close closed it
			p.mu.Lock()
			p.inUse--
			p.releaseSlotLocked(session, extra)
			p.mu.Unlock()
			return nil, errf(protocol.CodeUnavailable, "the host of %q was closed", p.name)
		}
		in.extra = extra
		return in, nil
	}
	in, err = p.newInstance(ctx, st)
	if err != nil {
		p.mu.Lock()
		p.inUse--
		p.discards++
		p.releaseSlotLocked(session, extra)
		p.mu.Unlock()
		return nil, err
	}
	in.session, in.extra = session, extra
	return in, nil
}

func (p *pool) put(in *instance) {
	in.lin.release()
	var evicted *instance
	p.mu.Lock()
	p.inUse--
	p.releaseSlotLocked(in.session, in.extra)
	if p.closed {
		evicted = in
	} else {
		p.idle = append(p.idle, in)
		if len(p.idle) > p.h.opts.IdleInstances {
			evicted = p.idle[0]
			p.idle = slices.Delete(p.idle, 0, 1)
		}
	}
	p.mu.Unlock()
	if evicted != nil {
		_ = evicted.mod.Close(context.Background())
	}
}

// EndSession closes the idle instances of session id: it left the
// environment, and its state goes with it (a later call of the same
// session starts on a fresh instance). A shared tool's instances, under
// "", stay.
func (p *pool) EndSession(id string) {
	if id == "" {
		return
	}
	p.mu.Lock()
	var gone []*instance
	p.idle = slices.DeleteFunc(p.idle, func(in *instance) bool {
		if in.session == id {
			gone = append(gone, in)
			return true
		}
		return false
	})
	p.mu.Unlock()
	for _, in := range gone {
		_ = in.mod.Close(context.Background())
	}
}

// discard closes an instance that trapped or was stopped: it is never
// reused, and the next call makes a fresh one.
func (p *pool) discard(in *instance) {
	in.lin.release()
	_ = in.mod.Close(context.Background())
	p.mu.Lock()
	p.inUse--
	p.discards++
	p.releaseSlotLocked(in.session, in.extra)
	p.mu.Unlock()
}

// Invoke runs one call on an instance of the pool. The handles of the call
// are reachable by the host functions through the call's context, and only
// for the duration of the call.
func (p *pool) Invoke(ctx context.Context, c *tool.Call) (json.RawMessage, error) {
	st := newCallState(ctx, c.Handles, c.Progress)
	in, err := p.get(ctx, st, c.Session)
	if err != nil {
		return nil, err
	}
	in.req = abi.AppendInvoke(in.req[:0], c.ID, c.Workspace, c.Input)
	// No timer: every place a guest can wait returns at the deadline
	// itself (tick, the sleep, the host functions), so the call does too
	// (docs/RATIONALE.md, "Why an artifact's call has no timer").
	raw, err := in.call(st, in.invoke, in.req)
	var out protocol.Outcome
	if err == nil {
		out, err = decodeResult(raw)
	}
	if ctx.Err() != nil { // stopped, or finished as its deadline came: never reused
		p.discard(in)
		p.h.log.Warn("tool instance stopped at its call's deadline and replaced", slog.String("tool", p.name), slog.String("call", c.ID))
		return nil, stoppedErr(ctx, p.name)
	}
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

// Close closes the idle instances and releases the compiled code (which
// wazero allows while calls are running); busy instances close when their
// call ends. Closing twice is a no-op.
func (p *pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	idle := append(p.idle, p.fresh...)
	p.idle, p.fresh = nil, nil
	p.mu.Unlock()
	p.h.mu.Lock()
	delete(p.h.pools, p)
	p.h.mu.Unlock()
	for _, in := range idle {
		_ = in.mod.Close(context.Background())
	}
	return p.h.releaseModule(p.payload)
}

func stoppedErr(ctx context.Context, name string) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return errf(protocol.CodeCancelled, "the call to %q was cancelled", name)
	}
	return errf(protocol.CodeTimeout, "the tool %q did not finish before its deadline", name)
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
		return stoppedErr(ctx, name)
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

// PoolStats is a snapshot of the instance pool of one attached artifact.
type PoolStats struct {
	Tool    string // the tool's name
	Payload string // its payload identity
	Limit   int    // Options.PoolSize: the most instances, and so concurrent calls
	Size    int    // instances alive and usable: idle or in use
	InUse   int    // instances running a call or being initialised
	// Discards counts instances closed and never reused since the attach:
	// trapped, out of memory, stopped at a deadline or cancelled, or failed
	// to initialise when the pool grew.
	Discards uint64
}

// Stats returns a snapshot of the pool of every artifact attached through
// this host and not yet detached, sorted by tool name. It is safe to call
// concurrently with calls, for example from a metrics collector.
func (h *Host) Stats() []PoolStats {
	h.mu.RLock()
	pools := make([]*pool, 0, len(h.pools))
	for p := range h.pools {
		pools = append(pools, p)
	}
	h.mu.RUnlock()
	out := make([]PoolStats, 0, len(pools))
	for _, p := range pools {
		p.mu.Lock()
		out = append(out, PoolStats{Tool: p.name, Payload: p.payload, Limit: cap(p.sem), Size: len(p.idle) + len(p.fresh) + p.inUse,
			InUse: p.inUse, Discards: p.discards})
		p.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b PoolStats) int {
		return cmp.Or(cmp.Compare(a.Tool, b.Tool), cmp.Compare(a.Payload, b.Payload))
	})
	return out
}

// ReturnsByDeadline marks the pool as a [tool.DeadlineBound] instance:
// Invoke returns by its context's deadline whatever the guest does (a
// guest reaches a tick within a bounded amount of work, see instrument.go;
// every host function and the sleep return at the deadline).
func (p *pool) ReturnsByDeadline() {}
