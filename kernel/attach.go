package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
	"github.com/brainrt/brain/tool"
)

// Attachment is one tool to attach with its binding values. Binding values
// live only in the environment; they never appear in a manifest, a receipt
// or a log.
type Attachment struct {
	Tool     tool.Attachable
	Bindings map[string]json.RawMessage
}

// AttachReceipt says which tools were attached and, for each that was not,
// why.
type AttachReceipt struct {
	Environment string    `json:"environment"`
	Provides    []string  `json:"provides"`
	Attached    []string  `json:"attached"`
	Failures    []Failure `json:"failures,omitempty"`
}

// OK reports whether every tool was attached.
func (r *AttachReceipt) OK() bool { return len(r.Failures) == 0 }

// Attach provisions each tool. A tool fails — and is named on the receipt
// with the reason — when its manifest is invalid, its name is already
// attached, it requires a handle the environment does not provide, a
// binding value is missing, unknown or fails its schema, its input schema
// does not compile, or its provisioning (init) fails or panics. Tools that
// pass are attached (and registered in the environment's session, if any).
// Nothing fails later at the first call for any of these reasons.
func (e *Environment) Attach(ctx context.Context, atts ...Attachment) AttachReceipt {
	e.mu.RLock()
	rec := AttachReceipt{Environment: e.opts.ID, Attached: []string{}}
	for _, k := range e.providesLocked() {
		rec.Provides = append(rec.Provides, string(k))
	}
	setUp := e.setUp
	e.mu.RUnlock()
	policyErr := checkPolicies(e.opts.Policies)
	for _, a := range atts {
		name := "(unnamed)"
		if a.Tool != nil {
			name = a.Tool.Manifest().Name
		}
		fail := func(code protocol.Code, format string, args ...any) {
			reason := fmt.Sprintf(format, args...)
			rec.Failures = append(rec.Failures, Failure{Name: name, Code: code, Reason: reason})
			e.log.Debug("attach failed", slog.String("tool", name), slog.String("code", string(code)), slog.String("reason", reason))
		}
		if !setUp {
			fail(protocol.CodeUnavailable, "the environment is not set up")
			continue
		}
		if a.Tool == nil {
			fail(protocol.CodeInvalidRequest, "no tool given")
			continue
		}
		if policyErr != nil {
			fail(protocol.CodeInvalidRequest, "%v", policyErr)
			continue
		}
		at, code, err := e.provision(ctx, a)
		if err != nil {
			fail(code, "%v", err)
			continue
		}
		if code, err := e.install(name, at); err != nil {
			_ = at.inst.Close()
			fail(code, "%v", err)
			continue
		}
		rec.Attached = append(rec.Attached, name)
	}
	return rec
}

// provision checks one attachment and provisions its tool.
func (e *Environment) provision(ctx context.Context, a Attachment) (*attached, protocol.Code, error) {
	m := a.Tool.Manifest()
	if err := m.Validate(); err != nil {
		return nil, protocol.CodeInvalidRequest, err
	}
	e.mu.RLock()
	_, dup := e.tools[m.Name]
	twin := e.lookAlikeLocked(m.Name)
	var missing []string
	for _, k := range m.Requires {
		if _, ok := e.provided[k]; !ok {
			missing = append(missing, string(k))
		}
	}
	e.mu.RUnlock()
	switch {
	case dup:
		return nil, protocol.CodeConflict, alreadyAttached(m.Name)
	case twin != "":
		// Every session would refuse the second, and then none could open.
		return nil, protocol.CodeConflict, lookAlikeAttached(m.Name, twin)
	case session.IsBuiltin(m.Name):
		// Every session has it already and refuses the registration: the
		// tool would attach, and then no session could open.
		return nil, protocol.CodeConflict, fmt.Errorf("%q is the name of a capability every session has built in, which no tool replaces: give the tool another name", m.Name)
	}
	if len(missing) > 0 {
		return nil, protocol.CodeUnavailable, fmt.Errorf("requires %v, which this environment does not provide (provides %v)", missing, e.providesSorted())
	}
	var err error
	if a.Bindings, err = checkBindings(&m, a.Bindings); err != nil {
		return nil, protocol.CodeInvalidInput, err
	}
	at := &attached{manifest: m, policy: policyFor(e.opts.Policies, m.Name)}
	if at.input, err = session.CompileSchema(m.InputSchema); err != nil {
		return nil, protocol.CodeInvalidRequest, fmt.Errorf("input_schema: %w", err)
	}
	if m.Payload != "" && m.OutputSchema != nil {
		if at.output, err = session.CompileSchema(m.OutputSchema); err != nil {
			return nil, protocol.CodeInvalidRequest, fmt.Errorf("output_schema: %w", err)
		}
	}
	hs, release, err := e.acquire(ctx, m.Requires)
	if err != nil {
		return nil, protocol.CodeUnavailable, err
	}
	defer release()
	at.inst, err = provisionSafely(ctx, a, hs)
	if err != nil {
		// The tool's own failure (init threw or returned an error with no
		// code) is tool_error, as a call's is; a panic is internal. The
		// code is the failure's, once: not again inside its reason.
		code, msg := codeOnce(err)
		return nil, code, fmt.Errorf("provision: %s", msg)
	}
	return at, "", nil
}

// codeOnce returns err's code and its text without that code: an error
// that wraps a *protocol.Error prints its code before its message.
func codeOnce(err error) (protocol.Code, string) {
	code := protocol.OutcomeOf(err).Err.Code
	msg := err.Error()
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Code == code {
		msg = strings.Replace(msg, pe.Error(), pe.Message, 1)
	}
	return code, msg
}

// provisionSafely turns a panic in a tool's provisioning into an error.
func provisionSafely(ctx context.Context, a Attachment, hs tool.Handles) (inst tool.Instance, err error) {
	defer func() {
		if p := recover(); p != nil {
			inst, err = nil, protocol.Errorf(protocol.CodeInternal, "panicked: %v", p)
		}
	}()
	return a.Tool.Provision(newToolContext(ctx), hs, a.Bindings)
}

// checkBindings requires a value for every declared binding — the
// schema's top-level "default" stands in for one not given (zod's
// .default(443)) — refuses values for undeclared ones, and validates each
// against its schema. It returns the values with the defaults added (a
// new map when it adds any; values is not changed).
func checkBindings(m *tool.Manifest, values map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	for _, name := range slices.Sorted(maps.Keys(values)) { // sorted: several undeclared ones give the same error every time
		if !slices.Contains(m.BindingNames, name) {
			return nil, fmt.Errorf("binding %q is not declared by the tool (it declares %v)", name, m.BindingNames)
		}
	}
	out, copied := values, false
	for _, name := range m.BindingNames {
		v, ok := values[name]
		if !ok {
			var d struct {
				Default json.RawMessage `json:"default"`
			}
			if json.Unmarshal(m.BindingSchemas[name], &d) != nil || d.Default == nil {
				return nil, fmt.Errorf("binding %q has no value", name)
			}
			if !copied {
				out, copied = maps.Clone(values), true
				if out == nil {
					out = map[string]json.RawMessage{}
				}
			}
			v = d.Default
			out[name] = v
		}
		s, err := session.CompileSchema(m.BindingSchemas[name])
		if err != nil {
			return nil, fmt.Errorf("binding %q: schema: %w", name, err)
		}
		if err := s.ValidateJSON(v); err != nil {
			// The value itself is never echoed: it may be a secret.
			return nil, fmt.Errorf("binding %q: the value does not match its schema: %v", name, err)
		}
	}
	return out, nil
}

func (e *Environment) providesSorted() []string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	var out []string
	for _, k := range e.providesLocked() {
		out = append(out, string(k))
	}
	return out
}

// lookAlikeLocked returns the name of an attached tool, or of a
// capability every session has built in, that name looks like (a model or
// a person could take one for the other: session.LookAlike), or "". e.mu
// is held.
func (e *Environment) lookAlikeLocked(name string) string {
	if session.LookAlike(name, session.CapabilitiesListName) {
		return session.CapabilitiesListName
	}
	for other := range e.tools {
		if session.LookAlike(name, other) {
			return other
		}
	}
	return ""
}

// lookAlikeAttached is the refusal of a tool whose name looks like
// another's.
func lookAlikeAttached(name, other string) error {
	return fmt.Errorf("a tool named %q looks like %q, already attached (or built into every session): a model or a person could take one for the other, and every session would refuse the second; give it another name", name, other)
}

// alreadyAttached is the refusal of a second tool of one name.
func alreadyAttached(name string) error {
	return fmt.Errorf("a tool named %q is already attached: an environment attaches a name once (a config lists it once, in tools: or in artifacts:)", name)
}

// install adds a provisioned tool and registers it in every exposed
// session; if a session refuses it, it is not attached.
func (e *Environment) install(name string, at *attached) (protocol.Code, error) {
	e.mu.Lock()
	if _, dup := e.tools[name]; dup {
		e.mu.Unlock()
		return protocol.CodeConflict, alreadyAttached(name)
	}
	if twin := e.lookAlikeLocked(name); twin != "" {
		e.mu.Unlock()
		return protocol.CodeConflict, lookAlikeAttached(name, twin)
	}
	e.tools[name] = at
	sessions := slices.Clone(e.sessions)
	e.mu.Unlock()
	for i, s := range sessions {
		if err := e.register(s, name, at); err != nil {
			for _, done := range sessions[:i] {
				_ = done.Deregister(session.Runtime, name)
			}
			e.mu.Lock()
			delete(e.tools, name)
			e.mu.Unlock()
			return protocol.OutcomeOf(err).Err.Code, fmt.Errorf("register in session %s: %w", s.ID(), err)
		}
	}
	return "", nil
}

// register makes one attached tool a capability of s.
func (e *Environment) register(s *session.Session, name string, at *attached) error {
	return s.RegisterAgent(e.capability(name, at), sessionHandler{e: e, name: name, session: s.ID()})
}

// Expose registers every attached tool in s as an agent-side capability
// (origin agent), and keeps s in step: tools attached later are registered
// there too, and Detach deregisters them. One environment can serve many
// sessions. Options.Session is exposed by New.
func (e *Environment) Expose(s *session.Session) error {
	e.mu.Lock()
	e.sessions = append(e.sessions, s)
	tools := make(map[string]*attached, len(e.tools))
	for n, at := range e.tools {
		tools[n] = at
	}
	e.mu.Unlock()
	for _, n := range slices.Sorted(maps.Keys(tools)) { // sorted: every session's log registers them in one order
		at := tools[n]
		if err := e.register(s, n, at); err != nil {
			return fmt.Errorf("expose %q to session %s: %w", n, s.ID(), err)
		}
	}
	return nil
}

// Unexpose stops keeping s in step and deregisters the tools from it.
func (e *Environment) Unexpose(s *session.Session) {
	e.mu.Lock()
	e.sessions = slices.DeleteFunc(e.sessions, func(x *session.Session) bool { return x == s })
	names := make([]string, 0, len(e.tools))
	for n := range e.tools {
		names = append(names, n)
	}
	e.mu.Unlock()
	_ = s.Deregister(session.Runtime, names...)
	e.endSession(s.ID())
}

// endSession tells every attached instance that keeps per-session state
// that session id has left this environment.
func (e *Environment) endSession(id string) {
	e.mu.RLock()
	var enders []tool.SessionEnder
	for _, at := range e.tools {
		if se, ok := at.inst.(tool.SessionEnder); ok {
			enders = append(enders, se)
		}
	}
	e.mu.RUnlock()
	for _, se := range enders {
		se.EndSession(id)
	}
}

// Detach removes tools by name, closing their instances and deregistering
// them from the session. Unknown names are ignored.
func (e *Environment) Detach(names ...string) {
	e.mu.Lock()
	var gone []*attached
	var goneNames []string
	for _, n := range names {
		if at, ok := e.tools[n]; ok {
			delete(e.tools, n)
			gone = append(gone, at)
			goneNames = append(goneNames, n)
		}
	}
	sessions := slices.Clone(e.sessions)
	e.mu.Unlock()
	if len(goneNames) > 0 {
		for _, s := range sessions {
			_ = s.Deregister(session.Runtime, goneNames...)
		}
	}
	for _, at := range gone {
		_ = at.inst.Close()
	}
}

// Tools returns the manifests of the attached tools, sorted by name.
func (e *Environment) Tools() []tool.Manifest {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]tool.Manifest, 0, len(e.tools))
	for _, at := range e.tools {
		out = append(out, at.manifest)
	}
	slices.SortFunc(out, func(a, b tool.Manifest) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// sessionHandler runs a session's call to an attached tool.
type sessionHandler struct {
	e       *Environment
	name    string
	session string
}

func (h sessionHandler) Handle(ctx context.Context, c *session.Call) (json.RawMessage, error) {
	call := Call{ID: c.ID, Session: h.session, Input: c.Input}
	if fn := session.ProgressFunc(ctx); fn != nil { // the invoker asked for progress (an MCP caller's progressToken)
		call.Progress = func(p tool.Progress) { fn(session.Progress{Done: p.Done, Total: p.Total, Message: p.Message}) }
	}
	out := h.e.invoke(ctx, h.name, call, false)
	if out.Err != nil {
		return nil, out.Err
	}
	return out.Value, nil
}

// Forget stops keeping s in step without deregistering anything: for a
// session that is leaving memory (hibernating) with its registry intact.
func (e *Environment) Forget(s *session.Session) {
	e.mu.Lock()
	e.sessions = slices.DeleteFunc(e.sessions, func(x *session.Session) bool { return x == s })
	e.mu.Unlock()
	e.endSession(s.ID())
}
