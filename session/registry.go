package session

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unique"

	"github.com/mtibben/confusables"
	"golang.org/x/text/unicode/norm"

	"github.com/brainrt/brain/internal/textcut"
	"github.com/brainrt/brain/protocol"
)

// registration is one registered capability with what the bridge needs to
// route it. It is immutable once registered: a replacement is a new value,
// and calls in flight keep the one they started with.
type registration struct {
	def     *[1]protocol.Capability // the definition, shared by every registration of it (definitions.go): never modified
	owner   Peer
	input   *Schema
	output  *Schema // nil when the capability has no outputSchema
	handler Handler // agent side only
	timeout time.Duration
	logKey  string // capability:<origin>:<name>
	rev     string // revision: the digest of cap's definition (see revisionOf)
}

// RegisterError is a rejected registration or deregistration: which
// capability, and the rule it broke. Nothing in the session changed.
type RegisterError struct {
	Name string
	Code protocol.Code
	Err  error
	// Deregister is set when a deregistration was refused.
	Deregister bool
}

// maxNameInError bounds how much of a capability's name an error repeats
// (a name that may be registered is repeated whole): a peer's name may be
// anything up to its frame's size.
const maxNameInError = protocol.MaxNameBytes

func (e *RegisterError) Error() string {
	op := "register"
	if e.Deregister {
		op = "deregister"
	}
	return fmt.Sprintf("%s %q: %v", op, textcut.Cut(e.Name, maxNameInError), e.Err)
}

// Unwrap returns the broken rule.
func (e *RegisterError) Unwrap() error { return e.Err }

// ErrorCode returns invalid_request, forbidden or conflict.
func (e *RegisterError) ErrorCode() protocol.Code { return e.Code }

// Register registers capabilities on behalf of a client or app peer. The
// batch is all or nothing: each capability is validated (a non-empty name
// unique in the batch, known field values, input and output schemas that
// compile as JSON Schema 2020-12, a valid render spec, callTimeoutMs > 0)
// and checked against the trust rules (see [Peer]); the first failure is
// returned as a *RegisterError and nothing changes. Re-registering a name
// from the same origin replaces it; a name held by another origin is a
// conflict; more than Options.MaxCapabilities registrations is
// quota_exceeded. One capability_register event carries the batch's
// changes: re-registering a capability unchanged (same peer, the same
// definition) emits and changes nothing.
//
// A replacement with another definition withdraws the approval requests
// pending for the old one (approval_withdrawn, code stale_approval) and
// issues new ones bound to the new definition; calls already dispatched
// keep the definition they were made to.
//
// Agent-side capabilities need a Go handler: register them with
// [Session.RegisterAgent].
func (s *Session) Register(p Peer, caps ...protocol.Capability) error {
	if p.Side == SideRuntime {
		return &RegisterError{Name: firstName(caps), Code: protocol.CodeInvalidRequest,
			Err: fmt.Errorf("the runtime registers agent-side capabilities with RegisterAgent, which takes their handler")}
	}
	regs := make([]*registration, 0, len(caps))
	for i := range caps {
		r, err := s.prepare(p, caps[i], nil)
		if err != nil {
			return err
		}
		regs = append(regs, r)
	}
	return s.commit(regs)
}

// RegisterAgent registers an agent-side capability whose calls run h, on
// behalf of the runtime. The capability must have side "agent" and an origin
// the runtime may claim (agent, flow, skill, mcp, connector, mount); it is
// validated like [Session.Register].
func (s *Session) RegisterAgent(c protocol.Capability, h Handler) error {
	if h == nil {
		return &RegisterError{Name: c.Name, Code: protocol.CodeInvalidRequest, Err: fmt.Errorf("handler is nil")}
	}
	r, err := s.prepare(Runtime, c, h)
	if err != nil {
		return err
	}
	return s.commit([]*registration{r})
}

func firstName[T protocol.Capability | string](items []T) string {
	if len(items) == 0 {
		return ""
	}
	switch v := any(items[0]).(type) {
	case protocol.Capability:
		return v.Name
	case string:
		return v
	}
	return ""
}

// prepare validates one capability and compiles what invoking it needs,
// without touching the session.
func (s *Session) prepare(p Peer, c protocol.Capability, h Handler) (*registration, error) {
	fail := func(code protocol.Code, err error) error {
		return &RegisterError{Name: c.Name, Code: code, Err: err}
	}
	if err := c.Validate(); err != nil {
		return nil, fail(protocol.CodeInvalidRequest, err)
	}
	if c.Origin.Kind == protocol.OriginFramework {
		return nil, fail(protocol.CodeForbidden, fmt.Errorf("origin kind %q is built in: nobody may register it", protocol.OriginFramework))
	}
	if err := checkTrust(p, &c); err != nil {
		return nil, fail(protocol.CodeForbidden, err)
	}
	r := &registration{owner: p, handler: h, timeout: s.opts.DefaultCallTimeout,
		logKey: unique.Make("capability:" + string(c.Origin.Kind) + ":" + c.Name).Value()} // interned, as revisions are
	var err error
	if r.input, err = CompileSchema(c.InputSchema); err != nil {
		return nil, fail(protocol.CodeInvalidRequest, fmt.Errorf("inputSchema: %w", err))
	}
	if c.OutputSchema != nil {
		if r.output, err = CompileSchema(c.OutputSchema); err != nil {
			return nil, fail(protocol.CodeInvalidRequest, fmt.Errorf("outputSchema: %w", err))
		}
	}
	// The registration keeps the compiled schemas' own copies of their
	// text (shared by every registration of the same schema, never
	// modified: listings clone them), not copies of its own.
	c.InputSchema, c.OutputSchema = r.input.raw, nil
	if r.output != nil {
		c.OutputSchema = r.output.raw
	}
	if c.CallTimeoutMs != nil { // bounded: a larger one would wrap around to a negative duration, a timeout at once
		r.timeout = time.Duration(min(*c.CallTimeoutMs, protocol.MaxCallTimeoutMs)) * time.Millisecond
	}
	if r.rev, err = revisionOf(&c); err != nil {
		return nil, fail(protocol.CodeInvalidRequest, err)
	}
	r.def = definitions.share(r.rev, &c) // c still holds the caller's slices: share copies what it keeps
	return r, nil
}

// putCapLocked sets name's registration, and keeps s.looks — the
// look-alike key of each name in s.caps — in step, so that a
// registration's check costs one key, not one a name in the session (it
// built the map of all of them at each registration: 1,000 registered
// one by one took 7 times as long). A journal restored from before names
// were checked may hold two alike; the first keeps the key. s.mu is held.
func (s *Session) putCapLocked(name string, r *registration) {
	if _, ok := s.caps[name]; !ok {
		if key := lookAlikeKey(name); s.looks[key] == "" {
			s.looks[key] = name
		}
	}
	s.caps[name] = r
}

// dropCapLocked deletes name's registration, and its look-alike key.
// s.mu is held.
func (s *Session) dropCapLocked(name string) {
	if _, ok := s.caps[name]; !ok {
		return
	}
	delete(s.caps, name)
	if key := lookAlikeKey(name); s.looks[key] == name {
		delete(s.looks, key)
	}
}

// lookAlikeKey is what two names that a model or a person could take for
// each other share: Unicode's compatibility forms folded (NFKC: ｆ, ﬁ),
// case folded, and the skeleton of UTS #39's confusables (Cyrillic рор
// for pop, é composed or not). A tenant's probe registered FS.READ and
// fs.reаd (a Cyrillic а), then an all-Cyrillic fs.ѕеагсһ, beside the
// kernel's own tools; brain build refuses names alike in case within an
// artifact for the same reason.
func lookAlikeKey(name string) string {
	return confusables.Skeleton(strings.ToLower(norm.NFKC.String(name)))
}

// LookAlike reports whether names a and b, different, are alike as a
// session tells them (lookAlikeKey): a session refuses the second, so an
// environment refuses to attach a tool whose name looks like another's.
func LookAlike(a, b string) bool { return a != b && lookAlikeKey(a) == lookAlikeKey(b) }

// lookAlikeError refuses name for looking like other, registered in the
// session or (inBatch) in the same registration.
func lookAlikeError(name, other string, inBatch bool) *RegisterError {
	undo := fmt.Sprintf("deregister %q first", other)
	if inBatch {
		undo = "register one of them"
	}
	how := "looks like"
	if strings.EqualFold(name, other) {
		how = "differs only in case from"
	}
	return &RegisterError{Name: name, Code: protocol.CodeConflict,
		Err: fmt.Errorf("the name %s %q: a model or a person could take one for the other; choose another name, or %s", how, other, undo)}
}

// commit installs prepared registrations after checking names against the
// batch and the session, and emits one capability_register event.
func (s *Session) commit(regs []*registration) error {
	if len(regs) == 0 {
		return nil
	}
	all := &protocol.CapabilityRegister{Capabilities: make([]protocol.Capability, len(regs))}
	for i, r := range regs {
		all.Capabilities[i] = r.def[0]
	}
	if err := s.checkEvent("the registration", all); err != nil { // its event must fit the journal
		return &RegisterError{Name: regs[0].def[0].Name, Code: protocol.CodeTooLarge, Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := make(map[string]bool, len(regs))
	added := 0
	var batch map[string]string // look-alike key → name, of the batch's new names
	for _, r := range regs {
		name := r.def[0].Name
		if seen[name] {
			return &RegisterError{Name: name, Code: protocol.CodeInvalidRequest, Err: fmt.Errorf("the name appears twice in one registration")}
		}
		seen[name] = true
		old, ok := s.caps[name]
		if ok && (old.def[0].Origin != r.def[0].Origin || !old.owner.Same(r.owner)) {
			return &RegisterError{Name: name, Code: protocol.CodeConflict,
				Err: fmt.Errorf("the name is registered by origin %s (%s); only that peer may replace it", old.def[0].Origin, old.owner)}
		}
		if !ok {
			added++
			key := lookAlikeKey(name)
			if other := s.looks[key]; other != "" {
				return lookAlikeError(name, other, false)
			}
			if other := batch[key]; other != "" {
				return lookAlikeError(name, other, true)
			}
			if batch == nil {
				batch = map[string]string{}
			}
			batch[key] = name
		}
	}
	if n := s.userCapsLocked(); n+added > s.opts.MaxCapabilities {
		return &RegisterError{Name: regs[0].def[0].Name, Code: protocol.CodeQuotaExceeded,
			Err: fmt.Errorf("the session has %d capabilities of its peers (its built-in ones aside) and this registration adds %d, over its limit of %d (MaxCapabilities); deregister some first", n, added, s.opts.MaxCapabilities)}
	}
	var fresh []*registration // added or replaced: the event's
	changed := false          // a definition was added or replaced: a new revision
	type replaced struct{ old, r *registration }
	var reissue []replaced
	for _, r := range regs {
		name := r.def[0].Name
		old := s.caps[name]
		switch {
		case old != nil && old.rev == r.rev:
			// Unchanged: nothing to tell anyone. An agent-side one takes
			// its new handler.
			if r.handler != nil {
				s.putCapLocked(name, r)
			}
			continue
		case old == nil && s.journaled[name] == r.rev:
			// Registered again unchanged after a restart.
			delete(s.journaled, name)
			s.putCapLocked(name, r)
			changed = true
			continue
		}
		delete(s.journaled, name)
		s.putCapLocked(name, r)
		changed = true
		if old != nil {
			reissue = append(reissue, replaced{old, r})
		}
		fresh = append(fresh, r)
		s.logDebug("capability registered", slog.String(keyCapability, r.logKey), slog.String(keyOrigin, r.def[0].Origin.String()))
	}
	if changed {
		s.registryChangedLocked()
	}
	switch len(fresh) {
	case 0:
	case 1:
		// The event carries the shared definition itself (definitions.go).
		s.emitLocked(entry{typ: protocol.TypeCapabilityRegister, msg: &protocol.CapabilityRegister{Capabilities: fresh[0].def[:]}})
	default:
		msg := &protocol.CapabilityRegister{Capabilities: make([]protocol.Capability, len(fresh))}
		for i, r := range fresh {
			msg.Capabilities[i] = r.def[0]
		}
		s.emitLocked(entry{typ: protocol.TypeCapabilityRegister, msg: msg})
	}
	// The new definitions are journaled first: the requests issued again
	// name their revision, which a restore must know when it reads them
	// (else a restart would end such a call stale_approval).
	for _, x := range reissue {
		s.reissueLocked(x.old, x.r)
	}
	return nil
}

// userCapsLocked counts the registrations that are not built in.
func (s *Session) userCapsLocked() int {
	n := 0
	for _, r := range s.caps {
		if r.def[0].Origin.Kind != protocol.OriginFramework {
			n++
		}
	}
	return n
}

// Deregister removes capabilities by name on behalf of p. Names that are
// not registered are ignored silently (the spec's rule); a name registered
// by another peer, or a built-in, is forbidden and nothing is removed. One
// capability_deregister event names what was removed. Calls still pending
// to a removed capability end with unavailable.
func (s *Session) Deregister(p Peer, names ...string) error {
	if p.Side == SideOperator {
		return &RegisterError{Deregister: true, Name: firstName(names), Code: protocol.CodeForbidden, Err: fmt.Errorf("an operator may not deregister capabilities")}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		r, ok := s.caps[n]
		switch {
		case !ok:
		case r.def[0].Origin.Kind == protocol.OriginFramework: // whatever the peer claims to be
			return &RegisterError{Deregister: true, Name: n, Code: protocol.CodeForbidden, Err: fmt.Errorf("built in: nobody may deregister it")}
		case !r.owner.Same(p):
			return &RegisterError{Deregister: true, Name: n, Code: protocol.CodeForbidden,
				Err: fmt.Errorf("registered by %s (origin %s); %s may not deregister it", r.owner, r.def[0].Origin, p)}
		}
	}
	s.removeLocked(names)
	return nil
}

// removeLocked deletes the registered names among names and emits the
// deregister event.
func (s *Session) removeLocked(names []string) {
	removed := make([]string, 0, len(names))
	var regs []*registration
	for _, n := range names {
		if r, ok := s.caps[n]; ok {
			s.dropCapLocked(n)
			delete(s.journaled, n)
			removed = append(removed, n)
			regs = append(regs, r)
			s.logDebug("capability deregistered", slog.String(keyCapability, r.logKey))
		}
	}
	if len(removed) == 0 {
		return
	}
	s.registryChangedLocked()
	s.emitLocked(entry{typ: protocol.TypeCapabilityDeregister, msg: &protocol.CapabilityDeregister{Names: removed}})
	for _, c := range s.sortedCallsLocked() {
		if slices.Contains(regs, c.reg) {
			s.endLocked(c, protocol.Fail(protocol.CodeUnavailable, "capability %q was deregistered by %s while the call was pending", c.name, c.reg.owner))
		}
	}
}

// Owner returns the peer that registered name and answers its calls.
func (s *Session) Owner(name string) (Peer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.caps[name]
	if !ok {
		return Peer{}, false
	}
	return r.owner, true
}

// Lookup returns the capability registered under name.
func (s *Session) Lookup(name string) (protocol.Capability, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.caps[name]
	if !ok {
		return protocol.Capability{}, false
	}
	return cloneCapability(r.def[0]), true
}

// List returns the capabilities visible to audience a, sorted by name (see
// [Visible] for what visible means).
func (s *Session) List(a protocol.Audience) []protocol.Capability {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listLocked(&a)
}

// registryRevs numbers the registries' revisions across all sessions of
// the process, so that a revision never names two different registries.
var registryRevs atomic.Uint64

// registryChangedLocked gives the registry a new revision. Every change to
// s.caps once the session can be reached must call it; [Restore]'s replay
// changes s.caps before anyone can read the session.
func (s *Session) registryChangedLocked() { s.capsRev.Store(registryRevs.Add(1)) }

// RegistryRevision returns the registry's revision: a number that changes
// whenever a capability is registered, replaced or deregistered (the
// turn-scoped ones dropped when a turn ends included). Revisions are
// unique in the process: two reads that return the same revision, of the
// same session or not, saw the same registry, so whatever a caller built
// from [Session.ListRevision] at that revision is still current. It takes
// no lock, which makes it the cheap way to read the registry again before
// each model step.
func (s *Session) RegistryRevision() uint64 { return s.capsRev.Load() }

// ListRevision returns [Session.List] of audience a and the revision of
// the registry it was read from (see [Session.RegistryRevision]), both read
// at once.
func (s *Session) ListRevision(a protocol.Audience) ([]protocol.Capability, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listLocked(&a), s.capsRev.Load()
}

// listLocked lists every capability (a == nil) or those visible to *a.
func (s *Session) listLocked(a *protocol.Audience) []protocol.Capability {
	out := make([]protocol.Capability, 0, len(s.caps))
	for _, r := range s.caps {
		if a == nil || Visible(&r.def[0], *a) {
			out = append(out, cloneCapability(r.def[0]))
		}
	}
	slices.SortFunc(out, func(x, y protocol.Capability) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// Visible reports whether audience a may see and invoke c. The llm and
// runtime audiences follow c's audience (["llm","user"] when unset); the user
// audience follows the spec's IsUserInvokable, so the per-origin defaults
// decide what reaches a command palette when audience is unset.
func Visible(c *protocol.Capability, a protocol.Audience) bool {
	if a == protocol.AudienceUser {
		return protocol.IsUserInvokable(c)
	}
	return c.HasAudience(a)
}

// PromptSection renders the <CAPABILITIES> system-prompt section: every
// llm-visible capability in name order, its description, and its
// promptFragment appended.
func (s *Session) PromptSection() string {
	return RenderPromptSection(s.List(protocol.AudienceLLM))
}

// RenderPromptSection renders the <CAPABILITIES> section of caps, as
// [Session.PromptSection] does for the session's llm-audience list: for a
// caller that has that list already (a driver building a model step).
func RenderPromptSection(caps []protocol.Capability) string {
	var b strings.Builder
	b.WriteString("<CAPABILITIES>\n")
	for _, c := range caps {
		fmt.Fprintf(&b, "## %s\n%s\n", c.Name, strings.TrimSpace(c.Description))
		if f := strings.TrimSpace(c.PromptFragment); f != "" {
			b.WriteString(f)
			b.WriteByte('\n')
		}
		b.WriteByte('\n')
	}
	b.WriteString("</CAPABILITIES>\n")
	return b.String()
}

// CapabilitiesListName is the built-in capability that lists what the
// invoker may call.
const CapabilitiesListName = "__capabilities.list"

var capabilitiesListSchema = json.RawMessage(`{"type":"object","properties":{"prefix":{"type":"string","description":"Only capabilities whose name starts with this."}},"additionalProperties":false}`)

// capabilitiesList is __capabilities.list's definition, its revision and
// its compiled schema: the same in every session, made once.
var capabilitiesList = sync.OnceValue(func() *registration {
	c := protocol.Capability{
		Name:        CapabilitiesListName,
		Description: "List the capabilities you can call in this session, with their descriptions and input schemas.",
		InputSchema: capabilitiesListSchema,
		Side:        protocol.SideAgent,
		Origin:      protocol.Origin{Kind: protocol.OriginFramework},
		Kind:        protocol.KindQuery,
		Audience:    []protocol.Audience{protocol.AudienceLLM, protocol.AudienceUser, protocol.AudienceRuntime},
	}
	in, err := CompileSchema(c.InputSchema)
	if err != nil {
		panic(err) // a bug in the constant above
	}
	c.InputSchema = in.raw
	rev, err := revisionOf(&c)
	if err != nil {
		panic(err) // a bug in the constant above
	}
	return &registration{def: &[1]protocol.Capability{c}, owner: Peer{Side: "framework"}, input: in,
		logKey: "capability:framework:" + c.Name, rev: rev}
})

// IsBuiltin reports whether name is a capability every session has built
// in (origin framework), which no peer and no tool can register.
func IsBuiltin(name string) bool { return name == CapabilitiesListName }

// registerBuiltins installs __capabilities.list (origin framework), which
// no peer can register, replace or deregister.
func (s *Session) registerBuiltins() {
	r := *capabilitiesList()
	r.handler, r.timeout = HandlerFunc(s.listCapabilities), s.opts.DefaultCallTimeout
	s.putCapLocked(r.def[0].Name, &r)
	s.registryChangedLocked() // New has not published s yet: no lock is needed
}

type listedCapability struct {
	Name        string          `json:"name"`
	DisplayName string          `json:"displayName,omitempty"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Kind        protocol.Kind   `json:"kind,omitempty"`
}

func (s *Session) listCapabilities(_ context.Context, c *Call) (json.RawMessage, error) {
	var in struct {
		Prefix string `json:"prefix"`
	}
	if err := json.Unmarshal(c.Input, &in); err != nil {
		return nil, err
	}
	out := struct {
		Capabilities []listedCapability `json:"capabilities"`
	}{Capabilities: []listedCapability{}}
	for _, x := range s.List(c.Invoker) {
		if strings.HasPrefix(x.Name, in.Prefix) {
			out.Capabilities = append(out.Capabilities, listedCapability{x.Name, x.DisplayName, x.Description, x.InputSchema, x.Kind})
		}
	}
	return json.Marshal(out)
}

// cloneCapability copies the slices and pointers of c, so that callers can
// neither change a registration nor see it change.
func cloneCapability(c protocol.Capability) protocol.Capability {
	c.InputSchema = slices.Clone(c.InputSchema)
	c.OutputSchema = slices.Clone(c.OutputSchema)
	if c.Audience != nil {
		c.Audience = slices.Clone(c.Audience)
	}
	if c.UserInvokable != nil {
		v := *c.UserInvokable
		c.UserInvokable = &v
	}
	if c.CallTimeoutMs != nil {
		v := *c.CallTimeoutMs
		c.CallTimeoutMs = &v
	}
	if c.Render != nil {
		r := *c.Render
		r.Targets = slices.Clone(r.Targets)
		if r.Interactions != nil {
			r.Interactions = slices.Clone(r.Interactions)
		}
		c.Render = &r
	}
	return c
}

// CallOwner returns the party that owns pending call id: the owner of the
// registration the call was made to, which is not necessarily the current
// owner of its name. It reports false for a call that is not pending.
func (s *Session) CallOwner(id string) (Peer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.calls[id]
	if !ok {
		return Peer{}, false
	}
	return c.reg.owner, true
}
