package session

import (
	"context"
	"encoding/json"
	"log/slog"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/brainrt/brain/internal/jsonkeys"
	"github.com/brainrt/brain/internal/jsonvalid"
	"github.com/brainrt/brain/internal/textcut"
	"github.com/brainrt/brain/protocol"
)

// Handler runs the calls of an agent-side capability.
//
// Handle must honour ctx: it is cancelled when the call is cancelled or its
// timeout passes. The bridge does not wait for a handler that ignores it —
// the call ends with its outcome at once — but the goroutine stays until
// Handle returns. A returned error becomes an error outcome (see
// protocol.OutcomeOf: an identifier-shaped code is kept); a panic becomes
// code internal and the session survives.
type Handler interface {
	Handle(ctx context.Context, call *Call) (json.RawMessage, error)
}

// HandlerFunc adapts a function to [Handler].
type HandlerFunc func(ctx context.Context, call *Call) (json.RawMessage, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, call *Call) (json.RawMessage, error) {
	return f(ctx, call)
}

// Call is what a handler is told about its call. Input has been validated
// against the capability's inputSchema.
type Call struct {
	ID      string
	Name    string
	Input   json.RawMessage
	Invoker protocol.Audience
}

// call is a pending invocation. Its fields are written before the call is
// published and read-only after, except those marked as guarded by
// Session.mu.
type call struct {
	hc       Call // the handler's copy, so that a handler cannot change what events report
	id, name string
	input    json.RawMessage
	invoker  protocol.Audience
	started  time.Time
	origin   protocol.Origin // of reg, which a re-registration may replace but never with another origin or side
	side     protocol.Side

	// reg is the registration the call was made to. It changes only while
	// the call awaits an undecided approval (a re-registration with another
	// definition issues a new request), under Session.mu; once decided it
	// is fixed.
	reg *registration

	// Guarded by Session.mu.
	digest           string // of the current approval request: the decision must echo it
	requested        bool   // its approval_requested is out
	reissued         bool   // a request was withdrawn and issued again: a decision must name the digest it saw
	awaitingApproval bool
	decided          bool
	dispatched       bool // capability_invoked is out
	resumed          bool // restored from a journal: its request events are out already
	callerGone       bool // resumed, and its caller waited in the kernel that stopped (Invoke): approved, it ends cancelled
	detached         bool // made by Start: nobody waits in the kernel, the outcome is an event
	// emitted, for a call made by Start, is closed once the call's first
	// event is in the log (and so in the journal): Start returns then.
	emitted      chan struct{}
	finished     bool
	unjournaled  bool             // finished in memory only: the journal was closed (a stop), so it stays pending in the store
	lastProgress time.Time        // when the last capability_progress was passed on (progress.go)
	outcome      protocol.Outcome // read without the lock only after done is closed
	// The invoker's context and the withdrawal of what its approval hook
	// was told (invoker.go): kept to tell it of a re-issued request.
	askCtx      context.Context
	withdrawAsk context.CancelCauseFunc // its cause is why: what a host is told (MCP's notifications/cancelled)

	approval chan protocol.CapabilityApprove // buffered 1; the first decision
	done     chan struct{}                   // closed by finish

	// Set before dispatch; the call is its handler's context.
	parent   context.Context
	deadline time.Time
}

// Invoke runs one call through the bridge and returns its outcome: look up
// name (not_found), check that invoker may call it (forbidden), validate
// input (invalid_input), wait for approval if the capability requires it
// (rejected, with the user's feedback), emit capability_invoked (and
// render_invoked for render capabilities), dispatch to the owning peer or
// the agent-side handler, and wait at most the call timeout (timeout).
// Fire-and-forget capabilities resolve with {} at once. Cancelling ctx or
// [Session.Cancel] ends the call with cancelled. Every call that got past
// validation ends with exactly one capability_outcome event.
func (s *Session) Invoke(ctx context.Context, invoker protocol.Audience, name string, input json.RawMessage) protocol.Outcome {
	c, fail := s.start(invoker, name, input, nil)
	if c == nil {
		return fail
	}
	tellStarted(ctx, c) // invoker.go
	if s.opts.Observe != nil {
		s.observe(CallStarted, c, func(e CallEvent) CallEvent { e.Context = ctx; return e })
	}
	return s.run(ctx, c)
}

// Start begins a call like [Session.Invoke] but does not wait for it: it
// returns the call id once the call is accepted, or the outcome of a call
// refused before it began. The call's outcome is delivered as a
// capability_outcome event. The call is bounded by its own timeouts, not by
// a caller's context; cancel it with [Session.Cancel].
func (s *Session) Start(invoker protocol.Audience, name string, input json.RawMessage) (string, *protocol.Error) {
	c, fail := s.start(invoker, name, input, nil)
	if c == nil {
		return "", fail.Err
	}
	c.detached = true // before run publishes anything of it
	emitted := make(chan struct{})
	s.mu.Lock()
	c.emitted = emitted
	s.mu.Unlock()
	s.observe(CallStarted, c, nil)
	if s.opts.Go != nil {
		s.opts.Go(func() { s.run(context.Background(), c) })
	} else {
		go s.run(context.Background(), c)
	}
	// The call's first event — approval_requested, capability_invoked, or
	// its outcome — comes from run at once. Returning after it gives the
	// id to the caller only once the journal holds the call: the ack of a
	// capability_invoke carries a seq at or after it, and a kill right
	// after the ack leaves no acknowledged call a restart does not know
	// (a probe found 0–7 such calls a session after kill -9).
	select {
	case <-emitted:
	case <-c.done:
	}
	return c.id, nil
}

// firstEventOutLocked tells Start, if it waits, that c's first event is in
// the log (or was refused by the journal: Start waits no longer).
// Session.mu is held.
func (c *call) firstEventOutLocked() {
	if c.emitted != nil {
		close(c.emitted)
		c.emitted = nil
	}
}

// start does steps 1 and 2 of the invocation path and publishes the call.
// A call refused here (not_found, forbidden, invalid_input) is reported to
// Observe as a CallFinished alone, so that metrics count it too. rs, if
// not nil, is the render stream that reserved the call's id
// (render_stream.go); the call has that id only if it is made to the
// registration the stream's partials were shown for.
func (s *Session) start(invoker protocol.Audience, name string, input json.RawMessage, rs *RenderStream) (*call, protocol.Outcome) {
	c, fail := s.admit(invoker, name, input, rs)
	if c == nil && s.opts.Observe != nil && fail.Err != nil && fail.Err.Code != protocol.CodeInvalidRequest {
		id := ""
		if rs != nil {
			id = rs.id
		}
		if id == "" {
			id = s.nextCallID()
		}
		ev := CallEvent{Kind: CallFinished, Session: s.id, CallID: id, Name: name, Invoker: invoker, Time: time.Now(), Outcome: fail}
		if cp, ok := s.Lookup(name); ok {
			ev.Origin, ev.Side = cp.Origin, cp.Side
		}
		s.opts.Observe(ev)
	}
	return c, fail
}

// admit is start's checks and the call's publication.
func (s *Session) admit(invoker protocol.Audience, name string, input json.RawMessage, rs *RenderStream) (*call, protocol.Outcome) {
	switch invoker {
	case protocol.AudienceLLM, protocol.AudienceUser, protocol.AudienceRuntime:
	default:
		return nil, protocol.Fail(protocol.CodeInvalidRequest, "unknown invoker %q (want llm, user or runtime)", invoker)
	}
	s.mu.Lock()
	r := s.caps[name]
	s.mu.Unlock()
	if r == nil {
		return nil, protocol.Fail(protocol.CodeNotFound, "no capability named %s in this session", quoteName(name))
	}
	if err := s.checkValue("the input for", name, input); err != nil {
		return nil, protocol.Outcome{Err: err}
	}
	if !Visible(&r.def[0], invoker) {
		s.logInfo("invocation forbidden", slog.String(keyCapability, r.logKey), slog.String(keyInvoker, string(invoker)))
		return nil, protocol.Fail(protocol.CodeForbidden, "capability %q is not available to the %s", name, invoker)
	}
	switch {
	case len(input) == 0:
		input = json.RawMessage(`{}`)
	case r.def[0].RequiresApproval:
		// The input of a call that needs approval is kept in its wire form
		// (compact, as events encode it), so that the approver sees, the
		// digest covers and the handler runs exactly the same bytes.
		var err error
		if input, err = canonicalInput(input); err != nil {
			return nil, protocol.Fail(protocol.CodeInvalidInput, "input for %q is not valid JSON: %v", name, err)
		}
	default:
		// The call keeps its own copy, taken before validation: the caller
		// may reuse its buffer once Start returns, and the handler must run
		// on exactly the input that was validated (and events report it).
		input = slices.Clone(input)
	}
	if err := r.input.ValidateJSON(input); err != nil {
		return nil, protocol.Fail(protocol.CodeInvalidInput, "input for %q is invalid: %v", name, err)
	}
	// A key given twice means what each reader makes of it: the schema's
	// validator and Go take the last, an approver's app may show the
	// first (an adversarial probe had fs.read approved for one path and
	// run on the other).
	if k, _, dup := jsonkeys.Duplicate(input, false); dup {
		return nil, protocol.Fail(protocol.CodeInvalidInput, "input for %q holds the key %q twice in one object: which value is meant is up to each reader (send it once)", name, textcut.Cut(k, 64))
	}
	var id string
	if rs == nil {
		id = s.nextCallID()
	}
	c := &call{id: id, name: name, input: input, invoker: invoker, reg: r, done: make(chan struct{}), started: time.Now(),
		origin: r.def[0].Origin, side: r.def[0].Side}
	if r.def[0].RequiresApproval {
		c.awaitingApproval = true
		c.approval = make(chan protocol.CapabilityApprove, 1)
	}
	s.mu.Lock()
	if r.def[0].RequiresApproval {
		r = s.caps[name] // the registration may have changed since the lookup
		if r == nil || !r.def[0].RequiresApproval || r.input.ValidateJSON(input) != nil {
			s.mu.Unlock()
			return nil, protocol.Fail(protocol.CodeConflict, "capability %q changed while the call was starting; try again", name)
		}
		c.reg, c.digest = r, inputDigest(r, input)
	}
	// A streamed call keeps its reserved id only if it goes to the
	// registration, and so the owner, its partials were shown for: the
	// peers that drew them must see its outcome, and no other peer them.
	switch {
	case rs == nil:
	case c.reg == rs.reg:
		c.id = rs.id
	default:
		c.id = s.nextCallID()
	}
	if n := len(s.calls); n >= s.opts.MaxPendingCalls {
		s.mu.Unlock()
		s.logInfo("invocation refused: quota", slog.String(keyCapability, r.logKey), slog.Int("pending", n))
		return nil, protocol.Fail(protocol.CodeQuotaExceeded, "the session already has %d pending calls, its limit (MaxPendingCalls); wait for some to finish", n)
	}
	s.calls[c.id] = c
	s.mu.Unlock()
	return c, protocol.Outcome{}
}

// nextCallID returns "<session prefix>-<counter>": unique in the session,
// and across restarts because the prefix is random per session value.
func (s *Session) nextCallID() string {
	n := s.callCounter.Add(1)
	b := make([]byte, 0, len(s.idPrefix)+12)
	b = append(b, s.idPrefix...)
	return string(strconv.AppendUint(b, n, 36))
}

// run does steps 3 to 7 for a published call and returns its outcome.
func (s *Session) run(ctx context.Context, c *call) protocol.Outcome {
	if c.approval != nil && !s.awaitApproval(ctx, c) { // approval is set once, before the call is published
		<-c.done
		return c.outcome
	}
	r := c.reg // only a call awaiting a decision changes it, under the lock
	if c.approval != nil {
		s.mu.Lock()
		r = c.reg // fixed from here on: decided
		s.mu.Unlock()
	}
	c.parent = ctx
	c.deadline = time.Now().Add(r.timeout)
	if r.handler == nil {
		if out, gone := s.ownerGone(r); gone {
			s.finish(c, out)
			return c.outcome
		}
	}
	s.mu.Lock()
	if c.finished { // cancelled between approval and dispatch
		s.mu.Unlock()
		return c.outcome
	}
	if c.dispatched { // resumed after a restart: the peer has the call already
		s.mu.Unlock()
		s.await(ctx, c)
		return c.outcome
	}
	c.dispatched = true
	s.emitLocked(entry{typ: protocol.TypeCapabilityInvoked, call: c})
	if r.def[0].Render != nil {
		s.emitLocked(entry{typ: protocol.TypeRenderInvoked, call: c})
	}
	s.mu.Unlock()
	s.observe(CallDispatched, c, nil)

	if r.def[0].FireAndForget {
		if r.handler != nil {
			go s.runBackground(ctx, c)
		}
		s.finish(c, protocol.OK(json.RawMessage(`{}`)))
		return c.outcome
	}
	if r.handler != nil {
		s.dispatch(c)
	}
	s.await(ctx, c)
	return c.outcome
}

// runBackground runs the handler of a fire-and-forget call, whose outcome
// ({}) is already out: the caller's cancellation does not reach it, the call
// timeout does, and a failure is logged.
func (s *Session) runBackground(parent context.Context, c *call) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), c.reg.timeout)
	defer cancel()
	if out := s.callHandler(ctx, c); !out.IsOK() {
		s.logInfo("fire-and-forget handler failed", slog.String(keyCapability, c.reg.logKey),
			slog.String(keyCall, c.id), slog.String(keyCode, string(out.Err.Code)), slog.String("message", out.Err.Message))
	}
}

// callHandler runs the agent-side handler. A panic is recovered as code
// internal.
func (s *Session) callHandler(ctx context.Context, c *call) (out protocol.Outcome) {
	defer func() {
		if p := recover(); p != nil {
			s.logError("handler panicked", slog.String(keyCapability, c.reg.logKey), slog.String(keyCall, c.id),
				slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			out = protocol.Fail(protocol.CodeInternal, "the capability %q crashed; the session is unaffected", c.name)
		}
	}()
	c.hc = Call{ID: c.id, Name: c.name, Input: c.input, Invoker: c.invoker}
	v, err := c.reg.handler.Handle(ctx, &c.hc)
	if err != nil {
		if ctx.Err() != nil {
			return contextOutcome(ctx, c.reg.timeout)
		}
		return protocol.OutcomeOf(err)
	}
	return s.checkOutput(c, v)
}

// checkOutput validates a result against the output schema, if any.
func (s *Session) checkOutput(c *call, v json.RawMessage) protocol.Outcome {
	if len(v) == 0 {
		v = json.RawMessage("null")
	}
	if c.reg.output != nil {
		if err := c.reg.output.ValidateJSON(v); err != nil {
			return protocol.Fail(protocol.CodeInvalidOutput, "the result of %q does not match its outputSchema: %v", c.name, err)
		}
	} else if !jsonvalid.Valid(v) {
		return protocol.Fail(protocol.CodeInvalidOutput, "the result of %q is not valid JSON", c.name)
	}
	return protocol.OK(v)
}

// contextOutcome maps a done context onto timeout or cancelled.
func contextOutcome(ctx context.Context, timeout time.Duration) protocol.Outcome {
	if ctx.Err() == context.DeadlineExceeded {
		if timeout > 0 {
			return protocol.Fail(protocol.CodeTimeout, "no result within %s", timeout)
		}
		return protocol.Fail(protocol.CodeTimeout, "the caller's deadline passed")
	}
	return protocol.Fail(protocol.CodeCancelled, "the call was cancelled")
}

// finish ends a call with out unless it has already ended: the first
// outcome wins. It reports whether out was the one.
func (s *Session) finish(c *call, out protocol.Outcome) bool {
	s.mu.Lock()
	ok := s.finishLocked(c, out)
	s.mu.Unlock()
	if ok {
		s.afterFinish(c, out)
	}
	return ok
}

// finishLocked is the part of finish done under the lock: the outcome and
// its event. The call's waiters are woken by afterFinish, once Observe has
// seen the call finish: an in-process caller whose Invoke returned finds
// the call's CallFinished already counted and recorded (the call times of
// the operator API, the metrics).
func (s *Session) finishLocked(c *call, out protocol.Outcome) bool {
	if c.finished {
		return false
	}
	c.finished = true
	c.outcome = s.boundOutcome(c.name, out)
	delete(s.calls, c.id)
	var fireAndForget *Peer // a peer's fire-and-forget call may get its result yet
	if c.dispatched && c.reg.def[0].FireAndForget && c.reg.handler == nil {
		fireAndForget = &c.reg.owner
	}
	s.rememberFinishedLocked(c.id, out, fireAndForget)
	s.emitLocked(entry{typ: protocol.TypeCapabilityOutcome, call: c})
	c.unjournaled = s.journalClosed
	return true
}

// endLocked finishes c from code that holds the lock; what must run
// without it (Observe, then waking the waiters, the log line) runs on its
// own goroutine.
func (s *Session) endLocked(c *call, out protocol.Outcome) {
	if !s.finishLocked(c, out) {
		return
	}
	if s.opts.Observe == nil && !s.log.Enabled(context.Background(), slog.LevelInfo) {
		close(c.done)
		return
	}
	go s.afterFinish(c, out)
}

// afterFinish reports a finished call to Observe, wakes its waiters, and
// logs it at info: its capability, invoker, outcome code and duration.
// The log line comes after the waiters are woken, so that writing it adds
// nothing to a call's latency.
func (s *Session) afterFinish(c *call, _ protocol.Outcome) {
	out := c.outcome // as finishLocked bounded it, or the journal replaced it
	s.observe(CallFinished, c, func(e CallEvent) CallEvent { e.Outcome = out; return e })
	close(c.done)
	if s.log.Enabled(context.Background(), slog.LevelInfo) {
		code := "ok"
		if !out.IsOK() {
			code = string(out.Err.Code)
		}
		msg := "call finished"
		if c.unjournaled { // a stop or a failed journal: what the store holds is the call pending
			msg = "call left pending: its end was not journaled (the node is stopping, or the session's journal failed), and the session resumes it when it is loaded again"
		}
		s.log.LogAttrs(context.Background(), slog.LevelInfo, msg, slog.String(keyCapability, c.reg.logKey),
			slog.String(keyCall, c.id), slog.String(keyInvoker, string(c.invoker)), slog.String(keyCode, code),
			slog.Duration("duration", time.Since(c.started)))
	}
}

// finishedRing remembers how recent calls ended, so that a late result or
// approval gets an error that says what happened rather than "unknown".
// A busy session fills it, so an entry is one word without pointers and
// the ring has no map: a call id is its prefix and its counter
// (nextCallID), the prefix and the code indexes into small tables, and a
// lookup — only for an id no longer pending — reads the ring. The ring
// grows by doubling to its size, so 1,024 calls take 8 KiB, not the
// 9.6 KiB append would round up to.
type finishedRing struct {
	calls    []finishedCall // grows to size, then wraps
	size     int
	next     int
	prefixes []string        // the call-id prefixes seen, this session's first (finishedCall.prefix)
	codes    []protocol.Code // the codes seen, "" (a value outcome) first (finishedCall.code)
	owners   []Peer          // the peers that owned fire-and-forget calls (codeFireAndForget)
}

// finishedCall is one finished call of a finishedRing: from the high
// bits, its id's counter, its id's prefix (in prefixes) and how it ended
// (in codes; codeOverflow: an error whose code did not fit).
type finishedCall uint64

// The tables' bounds. A journal restores calls under the prefixes of the
// session's earlier processes, one each; a peer's error results may carry
// codes of their own. A call under a prefix past the bound, or whose
// counter passes maxFinishedCounter (a session that has made 5·10^14
// calls), is not remembered (a late result for it is told not_found); a
// code past the bound is told as "an error".
const (
	finishedCodeBits    = 9 // 256 codes and codeOverflow
	finishedPrefixBits  = 6
	maxFinishedPrefixes = 1 << finishedPrefixBits
	maxFinishedCodes    = 256
	codeOverflow        = 1<<finishedCodeBits - 1
	// codeFireAndForget and the codes after it mark a fire-and-forget call
	// a peer owned, dispatched and so resolved with {} at once:
	// codeFireAndForget+i is owners[i]'s. That peer may still send the
	// call's result (the spec lets it, and lets it not), which is then
	// acknowledged and dropped; anyone else's is refused as for any
	// finished call. A call whose owner is past maxFinishedOwners is
	// remembered as one that ended with a result.
	codeFireAndForget  = maxFinishedCodes
	maxFinishedOwners  = 64
	maxFinishedCounter = 1<<(64-finishedPrefixBits-finishedCodeBits) - 1
)

func newFinishedCall(n uint64, prefix, code uint16) finishedCall {
	return finishedCall(n<<(finishedPrefixBits+finishedCodeBits) | uint64(prefix)<<finishedCodeBits | uint64(code))
}

func (fc finishedCall) counter() uint64 { return uint64(fc) >> (finishedPrefixBits + finishedCodeBits) }
func (fc finishedCall) prefix() int {
	return int(uint64(fc)>>finishedCodeBits) & (maxFinishedPrefixes - 1)
}
func (fc finishedCall) code() uint16 { return uint16(fc) & codeOverflow }

// splitCallID returns a call id's prefix and counter, as nextCallID made
// them: the prefix up to its last '-', a counter in lower-case base 36
// without a leading zero.
func splitCallID(id string) (prefix string, n uint64, ok bool) {
	i := strings.LastIndexByte(id, '-')
	if i < 0 || i >= 16 {
		return "", 0, false
	}
	prefix, rest := id[:i+1], id[i+1:]
	if rest == "" || rest[0] == '0' || len(rest) > 13 {
		return "", 0, false // a uint64 in base 36 takes at most 13 digits
	}
	for j := 0; j < len(rest); j++ {
		if c := rest[j]; (c < '0' || c > '9') && (c < 'a' || c > 'z') {
			return "", 0, false // ParseUint would take upper case too: another id
		}
	}
	n, err := strconv.ParseUint(rest, 36, 64)
	return prefix, n, err == nil
}

// The tables of a finishedRing, for reuse.
const (
	finishedPrefix = iota
	finishedCode
	finishedOwner
)

// reuse returns an entry of a full table (finishedPrefix, finishedCode
// or finishedOwner), from from on, that no call the ring remembers refers
// to — the call the next one replaces aside — for a new value to take
// its place: a session restored more times than the table holds (each
// process makes its calls under a prefix of its own) would otherwise
// stop remembering the calls of the latest, while the earliest had long
// left the ring. It reports false when every entry is in use.
func (f *finishedRing) reuse(table, from int) (uint16, bool) {
	n := len(f.prefixes)
	switch table {
	case finishedCode:
		n = len(f.codes)
	case finishedOwner:
		n = len(f.owners)
	}
	used := make([]bool, n)
	for i, fc := range f.calls {
		if len(f.calls) == f.size && i == f.next {
			continue // replaced by the call being remembered
		}
		code := int(fc.code())
		switch {
		case table == finishedPrefix:
			used[fc.prefix()] = true
		case table == finishedCode && code < n:
			used[code] = true
		case table == finishedOwner && code >= codeFireAndForget && code-codeFireAndForget < n:
			used[code-codeFireAndForget] = true
		}
	}
	for i := from; i < n; i++ {
		if !used[i] {
			return uint16(i), true
		}
	}
	return 0, false
}

// index returns where v is in *table, adding it when there is room.
func index[T comparable](table *[]T, v T, limit int) (uint16, bool) {
	if i := slices.Index(*table, v); i >= 0 {
		return uint16(i), true
	}
	if len(*table) >= limit {
		return 0, false
	}
	*table = append(*table, v)
	return uint16(len(*table) - 1), true
}

// rememberFinishedLocked remembers how call id ended; fireAndForget is the
// peer that owns it when it was a fire-and-forget call that peer answers,
// dispatched (nil otherwise).
func (s *Session) rememberFinishedLocked(id string, out protocol.Outcome, fireAndForget *Peer) {
	f := &s.finished
	if f.size == 0 {
		return
	}
	if f.prefixes == nil {
		f.prefixes, f.codes = []string{s.idPrefix}, []protocol.Code{""}
	}
	prefix, n, ok := splitCallID(id)
	if !ok {
		return
	}
	if n > maxFinishedCounter {
		return
	}
	p, ok := index(&f.prefixes, prefix, maxFinishedPrefixes)
	if !ok {
		if p, ok = f.reuse(finishedPrefix, 1); !ok {
			return
		}
		f.prefixes[p] = prefix
	}
	code := uint16(0)
	switch {
	case fireAndForget != nil && out.IsOK():
		owner := Peer{Side: fireAndForget.Side, AppID: fireAndForget.AppID}
		i, ok := index(&f.owners, owner, maxFinishedOwners)
		if !ok {
			if i, ok = f.reuse(finishedOwner, 0); ok {
				f.owners[i] = owner
			}
		}
		if ok {
			code = codeFireAndForget + i
		}
	case !out.IsOK():
		if code, ok = index(&f.codes, out.Err.Code, maxFinishedCodes); !ok {
			if code, ok = f.reuse(finishedCode, 1); ok {
				f.codes[code] = out.Err.Code
			}
		}
		if !ok || out.Err.Code == "" {
			code = codeOverflow
		}
	}
	fc := newFinishedCall(n, p, code)
	switch {
	case len(f.calls) < cap(f.calls):
		f.calls = append(f.calls, fc)
		return
	case len(f.calls) < f.size:
		f.calls = append(make([]finishedCall, 0, min(f.size, max(16, 2*cap(f.calls)))), f.calls...)
		f.calls = append(f.calls, fc)
		return
	}
	f.calls[f.next] = fc
	f.next = (f.next + 1) % f.size
}

// finishedCode returns how a call the ring remembers ended: 0 with a
// result, from codeFireAndForget with {} at once (fireAndForgetOwner),
// codeOverflow with an error whose code did not fit, else an index into
// codes.
func (s *Session) finishedCode(id string) (uint16, bool) {
	f := &s.finished
	prefix, n, ok := splitCallID(id)
	if !ok {
		return 0, false
	}
	p := slices.Index(f.prefixes, prefix)
	if p < 0 {
		return 0, false // no call under that prefix was remembered
	}
	for _, fc := range f.calls {
		if fc.counter() == n && fc.prefix() == p {
			return fc.code(), true
		}
	}
	return 0, false
}

// fireAndForgetOwner returns the peer that owned a fire-and-forget call
// the ring remembers by code.
func (s *Session) fireAndForgetOwner(code uint16) (Peer, bool) {
	if code < codeFireAndForget || int(code-codeFireAndForget) >= len(s.finished.owners) {
		return Peer{}, false
	}
	return s.finished.owners[code-codeFireAndForget], true
}

// finishedHow says how a call the ring remembers ended: "with a result",
// "with {} at once (fire-and-forget)", "with <code>" or "with an error".
func (s *Session) finishedHow(id string) (string, bool) {
	code, ok := s.finishedCode(id)
	if _, ff := s.fireAndForgetOwner(code); ok && ff {
		return "with {} at once (fire-and-forget)", true
	}
	switch {
	case !ok:
		return "", false
	case code == codeOverflow:
		return "with an error", true
	case code == 0:
		return "with a result", true
	}
	return "with " + string(s.finished.codes[code]), true
}

// lookupCallLocked returns the pending call id, or an error saying that it
// is unknown or how it already finished.
func (s *Session) lookupCallLocked(id string) (*call, *protocol.Error) {
	if c, ok := s.calls[id]; ok {
		return c, nil
	}
	if how, ok := s.finishedHow(id); ok {
		return nil, protocol.Errorf(protocol.CodeConflict, "call %q already finished %s; nothing changed", id, how)
	}
	return nil, protocol.Errorf(protocol.CodeNotFound, "no pending call %q", id)
}

// Result delivers a capability_result from peer p for a client- or app-side
// call. It fails, changing nothing, when the call is unknown or finished
// (a late result after a timeout or cancel is dropped and logged), still
// awaiting approval, or owned by another peer. The result becomes the call's
// outcome: an error envelope {"error": …} an error outcome (its "code"
// extension kept when identifier-shaped), anything else a value checked
// against the outputSchema.
func (s *Session) Result(p Peer, m *protocol.CapabilityResult) error {
	if m.Result == nil {
		return protocol.Errorf(protocol.CodeInvalidRequest, "capability_result for %q has no result", m.CallID)
	}
	s.mu.Lock()
	c, err := s.lookupCallLocked(m.CallID)
	switch {
	case err != nil:
		code, _ := s.finishedCode(m.CallID)
		owner, ff := s.fireAndForgetOwner(code)
		s.mu.Unlock()
		if ff && owner.Same(p) {
			// The spec lets a fire-and-forget call's owner send its result
			// or not; the call resolved with {} when it was dispatched.
			s.logDebug("result of a fire-and-forget call dropped", slog.String(keyCall, m.CallID), slog.String(keyPeer, p.String()))
			return nil
		}
		s.logInfo("result dropped", slog.String(keyCall, m.CallID), slog.String(keyPeer, p.String()), slog.String("reason", err.Message))
		return err
	case !c.reg.owner.Same(p) || c.reg.handler != nil:
		s.mu.Unlock()
		return protocol.Errorf(protocol.CodeForbidden, "call %q to %q is answered by its %s side, not by %s", m.CallID, c.name, c.reg.def[0].Side, p)
	case !c.dispatched:
		s.mu.Unlock()
		return protocol.Errorf(protocol.CodeConflict, "call %q has not been dispatched yet (it is awaiting approval)", m.CallID)
	}
	s.mu.Unlock()
	if err := s.checkValue("the result of", c.name, m.Result); err != nil {
		// The call ends with the error, and the peer hears why.
		s.finish(c, protocol.Outcome{Err: err})
		return err
	}
	var out protocol.Outcome
	if msg, code, isErr := protocol.ResultError(m.Result); isErr {
		if code == "" {
			code = protocol.CodeToolError
		}
		out = protocol.Outcome{Err: &protocol.Error{Code: code, Message: msg}}
	} else {
		out = s.checkOutput(c, m.Result)
	}
	if !s.finish(c, out) {
		return protocol.Errorf(protocol.CodeConflict, "call %q finished before its result arrived; the result was dropped", m.CallID)
	}
	return nil
}

// Cancel ends a pending call with cancelled; its handler's context is
// cancelled. Cancelling an unknown or finished call is an error and changes
// nothing.
func (s *Session) Cancel(callID, reason string) error {
	s.mu.Lock()
	c, err := s.lookupCallLocked(callID)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	msg := "the call was cancelled"
	if reason != "" {
		msg += ": " + cutText(reason, MaxTextBytes)
	}
	if !s.finish(c, protocol.Fail(protocol.CodeCancelled, "%s", msg)) {
		return protocol.Errorf(protocol.CodeConflict, "call %q finished before it could be cancelled", callID)
	}
	return nil
}

// sortedCallsLocked returns the pending calls ordered by id.
func (s *Session) sortedCallsLocked() []*call {
	out := make([]*call, 0, len(s.calls))
	for _, c := range s.calls {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *call) int { return strings.Compare(a.id, b.id) })
	return out
}
