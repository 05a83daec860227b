package jshost

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"modernc.org/quickjs"

	"github.com/brainrt/brain/internal/jsvm"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/tool"
)

//go:embed prelude.js
var prelude string

// hostFunc, hostIsProxy and the byte functions are the globals the
// prelude takes and that are deleted before any payload code runs.
const (
	hostFunc     = "__brain_host"
	hostIsProxy  = "__brain_isProxy"
	hostBytesOut = "__brain_bytesOut"
	hostBytesIn  = "__brain_bytesIn"
)

// pool is a provisioned JavaScript tool: one realm per session.
type pool struct {
	h        *Host
	m        tool.Manifest
	code     []byte
	bindings []byte

	mu       sync.Mutex
	sessions map[string]*instance
	spare    *instance // made at attach, handed to the first session that calls
	closed   bool
}

func newPool(h *Host, m tool.Manifest, code, bindings []byte) *pool {
	p := &pool{h: h, m: m, code: code, bindings: bindings, sessions: map[string]*instance{}}
	h.mu.Lock()
	h.pools[p] = struct{}{}
	h.mu.Unlock()
	return p
}

// instance is one realm: a VM with the prelude and the payload's module
// evaluated and the tool's init run. One call at a time.
type instance struct {
	vm       *jsvm.VM
	dispatch quickjs.Value
	sem      chan struct{}
	cur      atomic.Pointer[callState] // the running call's; read by the host function on the engine's goroutine
	used     uint64                    // the host's clock at its last call
	dirty    bool                      // a call left a global it could not delete: dropped after the call
	heap     atomic.Int64              // its heap after its latest call, counted in Host.realmBytes
}

// closeRealm frees in, and takes its heap out of the host's count.
func (p *pool) closeRealm(in *instance) {
	p.h.realmBytes.Add(-in.heap.Swap(0))
	in.vm.Close()
}

// newInstance makes a realm and initialises it with hs, within the
// context and Options.InitTimeout.
func (p *pool) newInstance(ctx context.Context, hs tool.Handles, progress func(tool.Progress)) (*instance, error) {
	ctx, cancel := context.WithTimeout(ctx, p.h.opts.InitTimeout)
	defer cancel()
	// OutOfMemoryStops: running out of memory ends the call too_large
	// (and drops the realm) even when the script catches the engine's
	// error, as docs/tools-typescript.md says; a realm whose allocation
	// failed part-way through is not trusted with the next call.
	vm, err := jsvm.New(jsvm.Limits{MemoryBytes: int64(p.h.opts.MemoryLimitMiB) << 20, OutOfMemoryStops: true})
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "%v", err)
	}
	in := &instance{vm: vm, sem: make(chan struct{}, 1)}
	in.cur.Store(&callState{ctx: ctx, handles: hs, progress: progress, give: vm.GiveBytes})
	var sealed string
	err = vm.Run(ctx, func(q *quickjs.VM) error {
		// The host function is a global only until the prelude, which
		// keeps it in its closure, has run; then it is deleted, before
		// any payload code runs.
		if err := q.RegisterHostFunc(hostFunc, in.serve); err != nil {
			return err
		}
		if err := vm.DefineIsProxy(hostIsProxy); err != nil {
			return err
		}
		if err := vm.DefineBytes(hostBytesOut, hostBytesIn); err != nil {
			return err
		}
		// The longest genuine array the memory limit holds (16 bytes an
		// element): see the prelude's Array guards.
		maxElements := strconv.FormatInt(vm.Limits().MemoryBytes/16, 10)
		d, err := q.EvalValue("("+prelude+")(globalThis."+hostFunc+", globalThis."+hostIsProxy+", "+maxElements+", globalThis."+hostBytesOut+", globalThis."+hostBytesIn+")", quickjs.EvalGlobal)
		if err != nil {
			return fmt.Errorf("prelude: %w", err)
		}
		in.dispatch = d
		vm.OnClose(in.dispatch.Free)
		if _, err := q.Eval("delete globalThis."+hostFunc+"; delete globalThis."+hostIsProxy+"; delete globalThis."+hostBytesOut+"; delete globalThis."+hostBytesIn, quickjs.EvalGlobal); err != nil {
			return err
		}
		if err := vm.EvalModule(p.code); err != nil {
			return err
		}
		out, err := in.dispatch.Call(quickjs.UndefinedValue, "seal", "")
		if err != nil {
			return err
		}
		sealed, _ = out.(string)
		return nil
	})
	if err != nil {
		p.closeRealm(in)
		return nil, p.initError(ctx, "evaluate the payload's module", err)
	}
	if err := p.checkSeal(sealed); err != nil {
		p.closeRealm(in)
		return nil, err
	}
	arg := fmt.Sprintf(`{"id":"init","bindings":%s,"requires":%s,"deadline":%s}`, p.bindings, mustJSON(p.m.Requires), deadlineMS(ctx))
	if _, err := in.run(ctx, p, "init", arg); err != nil {
		p.closeRealm(in)
		var oe *protocol.Error
		if errors.As(err, &oe) {
			return nil, protocol.Errorf(oe.Code, "init: %s", oe.Message)
		}
		return nil, fmt.Errorf("init: %w", err)
	}
	var odd string
	if err := vm.Run(ctx, func(*quickjs.VM) error {
		v, err := in.dispatch.Call(quickjs.UndefinedValue, "baseline", "")
		odd, _ = v.(string)
		return err
	}); err != nil || odd != "" {
		if err == nil {
			err = errors.New(odd)
		}
		p.closeRealm(in)
		return nil, p.initError(ctx, "snapshot the realm", err)
	}
	return in, nil
}

// appendJSONString appends s as a JSON string: plain ASCII as it is,
// anything else through encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			j, _ := json.Marshal(s)
			return append(b, j...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// deadlineMS is the context's deadline in milliseconds since the epoch, as
// JavaScript's Date counts, or null.
func deadlineMS(ctx context.Context) string {
	if d, ok := ctx.Deadline(); ok {
		return strconv.FormatInt(d.UnixMilli(), 10)
	}
	return "null"
}

// checkSeal checks that the module defined exactly the manifest's tool.
func (p *pool) checkSeal(sealed string) error {
	var s struct {
		OK       bool     `json:"ok"`
		Error    string   `json:"error"`
		Name     string   `json:"name"`
		Requires []string `json:"requires"`
		Bindings []string `json:"bindings"`
	}
	if err := json.Unmarshal([]byte(sealed), &s); err != nil {
		return protocol.Errorf(protocol.CodeInternal, "the realm answered %q: %v", sealed, err)
	}
	if !s.OK {
		return protocol.Errorf(protocol.CodeInvalidRequest, "%s", s.Error)
	}
	want := make([]string, len(p.m.Requires))
	for i, k := range p.m.Requires {
		want[i] = string(k)
	}
	slices.Sort(s.Requires)
	slices.Sort(s.Bindings)
	wantB := slices.Sorted(slices.Values(p.m.BindingNames))
	switch {
	case s.Name != p.m.Name:
		return protocol.Errorf(protocol.CodeInvalidRequest, "the payload defines the tool %q, the manifest names %q", s.Name, p.m.Name)
	case !slices.Equal(s.Requires, want):
		return protocol.Errorf(protocol.CodeInvalidRequest, "the payload's tool requires %v, the manifest %v", s.Requires, want)
	case !slices.Equal(s.Bindings, wantB):
		return protocol.Errorf(protocol.CodeInvalidRequest, "the payload's tool declares the bindings %v, the manifest %v", s.Bindings, wantB)
	}
	return nil
}

func (p *pool) initError(ctx context.Context, what string, err error) error {
	switch jsvm.KindOf(err) {
	case jsvm.Timeout:
		return protocol.Errorf(protocol.CodeTimeout, "initialising an instance of %q did not finish before its deadline", p.m.Name)
	case jsvm.Cancelled:
		return protocol.Errorf(protocol.CodeCancelled, "initialising an instance of %q was cancelled", p.m.Name)
	case jsvm.Memory:
		return protocol.Errorf(protocol.CodeTooLarge, "initialising %q went over its memory limit of %d MiB", p.m.Name, p.h.opts.MemoryLimitMiB)
	}
	_ = ctx
	return protocol.Errorf(protocol.CodeInvalidRequest, "%s: %v", what, err)
}

// serve is the realm's one host function: op and its JSON argument from
// the prelude, a JSON reply back.
func (in *instance) serve(args []any) (any, error) {
	if len(args) != 2 {
		return nil, errors.New("the host function takes two arguments")
	}
	op, _ := args[0].(string)
	arg, _ := args[1].(string)
	// The bytes the prelude handed over are this operation's; those an
	// earlier one handed back and nothing took are dropped.
	staged, hasStaged := in.vm.TakeBytes()
	in.vm.ClearBytes()
	cs := in.cur.Load()
	if cs == nil {
		return `{"ok":false,"error":{"code":"unavailable","message":"no call is running"}}`, nil
	}
	if jsvm.Expired(cs.ctx) {
		// The engine's interrupt may already have stopped the script, and
		// the script caught it as a rejection (an async function turns it
		// into one): no handle operation runs after the call's end. The
		// interrupt stops the script again as this function returns.
		in.vm.Interrupt()
		if errors.Is(cs.ctx.Err(), context.Canceled) {
			return `{"ok":false,"error":{"code":"cancelled","message":"the call was cancelled"}}`, nil
		}
		return `{"ok":false,"error":{"code":"timeout","message":"the call's deadline has passed"}}`, nil
	}
	cs.staged, cs.hasStaged = staged, hasStaged
	defer func() { cs.staged, cs.hasStaged = nil, false }()
	return cs.serve(op, arg), nil
}

// outcome is what the dispatcher answers for init and invoke.
type outcome struct {
	OK     bool            `json:"ok"`
	Dirty  bool            `json:"dirty"` // a global the call added could not be deleted
	Value  json.RawMessage `json:"value"`
	Thrown *struct {
		Null    bool   `json:"null"`
		Name    string `json:"name"`
		Message string `json:"message"`
		Code    string `json:"code"`
		Stack   string `json:"stack"`
		Handle  string `json:"handle"`
		Op      string `json:"op"`
	} `json:"thrown"`
}

// run calls the dispatcher's op and settles its promise, if any, by
// running the realm's jobs. The error is the engine's (*jsvm.Error) or
// the tool's, with its code.
func (in *instance) run(ctx context.Context, p *pool, op, arg string) (json.RawMessage, error) {
	var raw string
	dirty := false
	err := in.vm.Run(ctx, func(q *quickjs.VM) error {
		out, err := in.dispatch.Call(quickjs.UndefinedValue, op, arg)
		if err != nil {
			return err
		}
		raw, _ = out.(string)
		for raw == "" {
			n, err := drain(q)
			if err != nil {
				return err
			}
			out, err := in.dispatch.Call(quickjs.UndefinedValue, "take", "")
			if err != nil {
				return err
			}
			raw, _ = out.(string)
			if raw == "" && n == 0 {
				raw = `{"ok":false,"thrown":{"name":"Error","message":"the tool's promise never settled: a payload has no timers or I/O but its handles"}}`
			}
		}
		// The jobs the call left behind its outcome (a reaction it did not
		// wait for) run now, in its own time and with its handles, not in
		// the next call's (of this session, or of another that shares the
		// realm); then the global object is tidied again.
		n, err := drain(q)
		if err != nil {
			return err
		}
		if n > 0 {
			out, err := in.dispatch.Call(quickjs.UndefinedValue, "tidy", "")
			if err != nil {
				return err
			}
			if out == "1" {
				dirty = true
			}
		}
		return nil
	})
	if dirty {
		in.dirty = true
	}
	if err != nil {
		return nil, p.engineError(ctx, err)
	}
	if v, ok := strings.CutPrefix(raw, `{"ok":true,"value":`); ok && strings.HasSuffix(v, "}") {
		return json.RawMessage(v[:len(v)-1]), nil // the prelude's form of a clean value
	}
	var o outcome
	if err := json.Unmarshal([]byte(raw), &o); err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "the realm answered what is not an outcome: %v", err)
	}
	if o.Dirty {
		in.dirty = true
	}
	if o.OK {
		if len(o.Value) == 0 {
			o.Value = json.RawMessage("null")
		}
		return o.Value, nil
	}
	t := o.Thrown
	switch {
	case t == nil:
		return nil, protocol.Errorf(protocol.CodeInternal, "the realm answered an outcome without a value or an error")
	case t.Name == "InternalError" && (t.Message == "out of memory" || t.Message == "string too long"):
		return nil, p.engineError(ctx, &jsvm.Error{Kind: jsvm.Memory})
	case t.Null && in.vm.OutOfMemory():
		// The engine throws null when it runs out of memory with no room
		// left for an error object: an allocation failed during the call.
		return nil, protocol.Errorf(protocol.CodeTooLarge, "the tool %q threw null, which the engine throws when a script runs out of memory with no room left for an error (memory limit %d MiB)", p.m.Name, p.h.opts.MemoryLimitMiB)
	case t.Null:
		return nil, protocol.Errorf(protocol.CodeToolError, "the tool %q threw null", p.m.Name)
	case t.Name == "InternalError" && t.Message == "stack overflow":
		return nil, p.engineError(ctx, &jsvm.Error{Kind: jsvm.Stack})
	case t.Name == "RangeError" && t.Code == "" && jsvm.SizeLimit(t.Name+": "+t.Message):
		// A size beyond the engine's own bounds, refused before any
		// allocation: too_large, as the js handle has it.
		return nil, protocol.Errorf(protocol.CodeTooLarge, "the tool %q went past a size limit of the engine: %s: %s", p.m.Name, t.Name, t.Message)
	case t.Name == "CapabilityError" && t.Code != "":
		// A handle's error the tool did not catch: as a Go tool that
		// returns it, the code and "<handle> <op>: <message>".
		// One the tool made without a handle or op: the message alone.
		if where := strings.TrimSpace(t.Handle + " " + t.Op); where != "" {
			return nil, protocol.Errorf(protocol.Code(t.Code), "%s: %s", where, t.Message)
		}
		return nil, protocol.Errorf(protocol.Code(t.Code), "%s", t.Message)
	case t.Code != "":
		return nil, protocol.Errorf(protocol.Code(t.Code), "%s", t.Message)
	}
	msg := t.Message
	if t.Name != "" && t.Name != "Error" {
		msg = t.Name + ": " + msg
	}
	return nil, protocol.Errorf(protocol.CodeToolError, "%s", msg)
}

// drain runs the realm's pending jobs until none is left, and returns how
// many ran. A chain of jobs that feeds itself past the engine's bound on
// one drain goes on until the call's deadline interrupts it.
func drain(q *quickjs.VM) (int, error) {
	total := 0
	for {
		n, err := q.ExecutePendingJobs()
		total += n
		var qe *quickjs.Error
		if err != nil && (n == 0 || errors.As(err, &qe)) {
			// A job that failed (an interrupt, the engine's own error),
			// not the bound on one drain.
			return total, err
		}
		if n == 0 {
			return total, nil
		}
	}
}

// engineError maps what stopped the engine to an outcome error.
func (p *pool) engineError(ctx context.Context, err error) error {
	name := p.m.Name
	var je *jsvm.Error
	if !errors.As(err, &je) {
		return protocol.Errorf(protocol.CodeInternal, "the tool %q failed: %v", name, err)
	}
	switch je.Kind {
	case jsvm.Timeout:
		return protocol.Errorf(protocol.CodeTimeout, "the tool %q did not finish before its deadline", name)
	case jsvm.Cancelled:
		return protocol.Errorf(protocol.CodeCancelled, "the call to %q was cancelled", name)
	case jsvm.Memory:
		return protocol.Errorf(protocol.CodeTooLarge, "the tool %q went over its memory limit of %d MiB", name, p.h.opts.MemoryLimitMiB)
	case jsvm.Stack:
		return protocol.Errorf(protocol.CodeTooLarge, "the tool %q went past its call stack limit", name)
	case jsvm.Crashed:
		return protocol.Errorf(protocol.CodeInternal, "the tool %q crashed: %s; the environment is unaffected", name, je.Message)
	}
	return protocol.Errorf(protocol.CodeToolError, "%s", je.Error())
}

// instanceFor returns the realm of session, making one when it has none.
func (p *pool) instanceFor(ctx context.Context, session string, c *tool.Call) (*instance, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, protocol.Errorf(protocol.CodeUnavailable, "the tool %q was detached", p.m.Name)
	}
	if in := p.sessions[session]; in != nil {
		p.mu.Unlock()
		return in, nil
	}
	if in := p.spare; in != nil {
		p.spare = nil
		p.sessions[session] = in
		p.mu.Unlock()
		return in, nil
	}
	p.mu.Unlock()
	in, err := p.newInstance(ctx, c.Handles, c.Progress)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		p.closeRealm(in)
		return nil, protocol.Errorf(protocol.CodeUnavailable, "the tool %q was detached", p.m.Name)
	}
	if other := p.sessions[session]; other != nil { // made by a concurrent call
		p.closeRealm(in)
		return other, nil
	}
	p.sessions[session] = in
	p.evictLocked()
	return in, nil
}

// evictLocked frees the least recently used idle realms past MaxSessions.
func (p *pool) evictLocked() {
	for len(p.sessions) > p.h.opts.MaxSessions {
		var oldest string
		var o *instance
		for s, in := range p.sessions {
			if len(in.sem) == 0 && (o == nil || in.used < o.used) {
				oldest, o = s, in
			}
		}
		if o == nil {
			return // every realm is running a call
		}
		delete(p.sessions, oldest)
		p.closeRealm(o)
	}
}

// drop removes a realm whose call was stopped; it is closed once its
// call has ended.
func (p *pool) drop(session string, in *instance) {
	p.mu.Lock()
	if p.sessions[session] == in {
		delete(p.sessions, session)
	}
	p.mu.Unlock()
	p.closeRealm(in)
}

// acquire returns the realm of the call's session, its turn taken. A
// realm that was dropped, evicted or ended while the call waited for its
// turn (behind a call stopped at its deadline, say) is not used: the call
// takes the session's next realm, made afresh if need be.
func (p *pool) acquire(ctx context.Context, c *tool.Call) (*instance, error) {
	for {
		in, err := p.instanceFor(ctx, c.Session, c)
		if err != nil {
			return nil, err
		}
		select {
		case in.sem <- struct{}{}:
		case <-ctx.Done():
			return nil, p.engineError(ctx, &jsvm.Error{Kind: kindOfCtx(ctx)})
		}
		p.mu.Lock()
		if p.sessions[c.Session] == in {
			in.used = p.h.clock.Add(1)
			p.mu.Unlock()
			return in, nil
		}
		p.mu.Unlock()
		<-in.sem
	}
}

// Invoke runs one call in the realm of the call's session.
func (p *pool) Invoke(ctx context.Context, c *tool.Call) (json.RawMessage, error) {
	in, err := p.acquire(ctx, c)
	if err != nil {
		return nil, err
	}
	in.cur.Store(&callState{ctx: ctx, handles: c.Handles, progress: c.Progress, give: in.vm.GiveBytes})
	buf := make([]byte, 0, 96+len(c.ID)+len(c.Session)+len(c.Workspace)+len(c.Input))
	buf = append(buf, `{"id":`...)
	buf = appendJSONString(buf, c.ID)
	buf = append(buf, `,"session":`...)
	buf = appendJSONString(buf, c.Session)
	buf = append(buf, `,"workspace":`...)
	buf = appendJSONString(buf, c.Workspace)
	buf = append(buf, `,"deadline":`...)
	buf = append(buf, deadlineMS(ctx)...)
	buf = append(buf, `,"input":`...)
	buf = append(buf, c.Input...)
	buf = append(buf, '}')
	arg := string(buf)
	v, err := in.run(ctx, p, "invoke", arg)
	if cs := in.cur.Swap(nil); cs != nil {
		cs.closeWalks()
	}
	stopped := in.dirty || (err != nil && (ctx.Err() != nil || in.vm.Gone() || stoppedCode(err)))
	if !stopped {
		p.measure(c.Session, in)
	} else {
		// Stopped mid-call: the realm's state is whatever it was then.
		// Dropped before its slot is given back: a call waiting for the
		// slot took the realm, given up, in the moment between and failed
		// "the VM was given up by an earlier call" (a fresh run's flake).
		p.drop(c.Session, in)
	}
	<-in.sem
	if stopped {
		if ctx.Err() != nil {
			p.h.log.Warn("tool realm stopped at its call's deadline and dropped", slog.String("tool", p.m.Name), slog.String("call", c.ID))
			return nil, p.engineError(ctx, &jsvm.Error{Kind: kindOfCtx(ctx)})
		}
	} else if p.h.realmBytes.Load() > int64(p.h.opts.RealmsMemoryMiB)<<20 {
		p.h.trimRealms(in)
	}
	return v, err
}

// measure counts what session's realm in holds after a call, while it
// is still the session's (a realm taken out of the pool is closed by
// whoever took it, which takes its heap out of the count). in's call
// has returned; its slot is still held.
func (p *pool) measure(session string, in *instance) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sessions[session] != in {
		return
	}
	if b := in.vm.HeapBytes(); b >= 0 {
		p.h.realmBytes.Add(b - in.heap.Swap(b))
	}
}

// trimRealms frees the least recently used realms not running a call,
// any tool's, until the realms hold Options.RealmsMemoryMiB or less. It
// keeps latest, the realm whose call has just ended: a realm larger than
// the budget on its own serves its session on.
func (h *Host) trimRealms(latest *instance) {
	budget := int64(h.opts.RealmsMemoryMiB) << 20
	for h.realmBytes.Load() > budget {
		h.mu.Lock()
		pools := make([]*pool, 0, len(h.pools))
		for p := range h.pools {
			pools = append(pools, p)
		}
		h.mu.Unlock()
		var (
			victim  *instance
			owner   *pool
			session string
		)
		for _, p := range pools {
			p.mu.Lock()
			for s, in := range p.sessions {
				if in != latest && len(in.sem) == 0 && in.heap.Load() > 0 && (victim == nil || in.used < victim.used) {
					victim, owner, session = in, p, s
				}
			}
			p.mu.Unlock()
		}
		if victim == nil {
			return // every realm that holds anything runs a call
		}
		owner.mu.Lock()
		if owner.sessions[session] == victim && len(victim.sem) == 0 {
			delete(owner.sessions, session)
			owner.closeRealm(victim)
			h.log.Info("tool realm freed: the realms hold more than RealmsMemoryMiB", slog.String("tool", owner.m.Name), slog.String("session", session))
		}
		owner.mu.Unlock()
	}
}

func stoppedCode(err error) bool {
	c := protocol.OutcomeOf(err).Err.Code
	return c == protocol.CodeTooLarge || c == protocol.CodeInternal || c == protocol.CodeTimeout || c == protocol.CodeCancelled
}

func kindOfCtx(ctx context.Context) jsvm.Kind {
	if errors.Is(ctx.Err(), context.Canceled) {
		return jsvm.Cancelled
	}
	return jsvm.Timeout
}

// EndSession frees the realm of session id: its next call starts afresh.
func (p *pool) EndSession(id string) {
	p.mu.Lock()
	in := p.sessions[id]
	delete(p.sessions, id)
	p.mu.Unlock()
	if in != nil {
		p.closeRealm(in)
	}
}

// Close frees every realm; a realm running a call is freed when it ends.
func (p *pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.h.mu.Lock()
	delete(p.h.pools, p)
	p.h.mu.Unlock()
	all := make([]*instance, 0, len(p.sessions)+1)
	for _, in := range p.sessions {
		all = append(all, in)
	}
	if p.spare != nil {
		all = append(all, p.spare)
	}
	p.sessions, p.spare = nil, nil
	p.mu.Unlock()
	for _, in := range all {
		p.closeRealm(in)
	}
	return nil
}

// ReturnsByDeadline marks the pool as a tool.DeadlineBound instance: a
// call returns by its context's end plus jsvm.Grace whatever the script
// does, and every handle operation honours the context.
func (p *pool) ReturnsByDeadline() {}

// Sessions returns how many realms the tool keeps (for tests and stats).
func (p *pool) Sessions() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.sessions)
	if p.spare != nil {
		n++
	}
	return n
}
