package kernel

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/brainrt/brain/protocol"
)

// Policy says how an attached tool is offered as a capability: the fields a
// manifest does not decide, set by whoever runs the environment (the serve
// config's policy section, docs/serve.md). The zero Policy changes nothing.
type Policy struct {
	// RequiresApproval, when not nil, sets the capability's
	// requiresApproval: the session waits for a capability_approve before
	// the tool runs. The session enforces it; [Environment.Invoke], the
	// direct path with nobody to ask, does not (brain mcp leaves such tools
	// out).
	RequiresApproval *bool
	// Audience, when not nil, sets who may invoke the capability (llm,
	// user, runtime). Unset means the protocol's default, ["llm","user"].
	Audience []protocol.Audience
	// CallTimeout, when greater than 0, bounds each call of the tool,
	// instead of the environment's CallTimeout (sent as callTimeoutMs).
	CallTimeout time.Duration
	// DisplayName, when not empty, is the capability's displayName.
	DisplayName string
	// PromptFragment, when not empty, is the capability's promptFragment:
	// text the <CAPABILITIES> prompt section shows beside the tool.
	PromptFragment string
	// ShareInstances, when not nil and true, lets one instance of the tool
	// serve calls of every session: what a call leaves in its memory (a
	// cache, a package variable) is seen by the next call, whichever
	// session makes it. It is a trust decision — the tool is trusted not
	// to keep one session's data where another's calls can read it — that
	// saves instantiating the tool once per session. Unset, instances are
	// per session (docs/security.md, "Artifacts (WebAssembly)", "State stays in its session").
	ShareInstances *bool
}

// PolicyRule applies a [Policy] to every tool whose name matches Pattern:
// a tool name, or a glob as in [path.Match] ("fs.*" matches fs.read and
// fs.search; "*" matches every tool).
//
// # Notes
//
// Every rule that matches a tool applies, in order: a field set by a later
// rule overrides the same field of an earlier one, so list general patterns
// first and exact names after them.
type PolicyRule struct {
	Pattern string
	Policy
}

// Validate checks the rule: a non-empty, well-formed pattern, known audience
// values without repeats, and a timeout that is not negative. The error
// names the field.
func (r PolicyRule) Validate() error {
	if r.Pattern == "" {
		return fmt.Errorf("pattern: must not be empty")
	}
	if strings.ContainsFunc(r.Pattern, func(c rune) bool { return c <= ' ' || c == 0x7f }) {
		return fmt.Errorf("pattern %q: must not contain spaces or control characters", r.Pattern)
	}
	if _, err := path.Match(r.Pattern, ""); err != nil {
		return fmt.Errorf("pattern %q: %w", r.Pattern, err)
	}
	for i, a := range r.Audience {
		switch a {
		case protocol.AudienceLLM, protocol.AudienceUser, protocol.AudienceRuntime:
		default:
			return fmt.Errorf("audience[%d]: unknown audience %q (want llm, user or runtime)", i, a)
		}
		if slices.Contains(r.Audience[:i], a) {
			return fmt.Errorf("audience[%d]: %q is listed twice", i, a)
		}
	}
	if r.Audience != nil && len(r.Audience) == 0 {
		return fmt.Errorf("audience: must not be empty (nobody could invoke the tool); leave it out for the default")
	}
	if r.CallTimeout < 0 {
		return fmt.Errorf("callTimeout: must not be negative, got %s", r.CallTimeout)
	}
	if r.CallTimeout > 0 && r.CallTimeout < time.Millisecond {
		return fmt.Errorf("callTimeout: %s is less than 1ms", r.CallTimeout)
	}
	return nil
}

// Matches reports whether the rule applies to the tool name.
func (r PolicyRule) Matches(name string) bool {
	ok, err := path.Match(r.Pattern, name)
	return err == nil && ok
}

// policyFor merges the rules that match name, in order.
func policyFor(rules []PolicyRule, name string) Policy {
	var p Policy
	for _, r := range rules {
		if !r.Matches(name) {
			continue
		}
		if r.RequiresApproval != nil {
			v := *r.RequiresApproval
			p.RequiresApproval = &v
		}
		if r.Audience != nil {
			p.Audience = slices.Clone(r.Audience)
		}
		if r.CallTimeout > 0 {
			p.CallTimeout = r.CallTimeout
		}
		if r.DisplayName != "" {
			p.DisplayName = r.DisplayName
		}
		if r.PromptFragment != "" {
			p.PromptFragment = r.PromptFragment
		}
		if r.ShareInstances != nil {
			v := *r.ShareInstances
			p.ShareInstances = &v
		}
	}
	return p
}

// shared reports whether the tool's instances serve every session.
func (p Policy) shared() bool { return p.ShareInstances != nil && *p.ShareInstances }

// checkPolicies validates every rule; the error names the rule by index.
func checkPolicies(rules []PolicyRule) error {
	for i, r := range rules {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("policy[%d]: %w", i, err)
		}
	}
	return nil
}

// apply sets the policy's fields on c.
func (p Policy) apply(c *protocol.Capability) {
	if p.RequiresApproval != nil {
		c.RequiresApproval = *p.RequiresApproval
	}
	if p.Audience != nil {
		c.Audience = slices.Clone(p.Audience)
	}
	if p.CallTimeout > 0 {
		ms := p.CallTimeout.Milliseconds()
		c.CallTimeoutMs = &ms
	}
	if p.DisplayName != "" {
		c.DisplayName = p.DisplayName
	}
	if p.PromptFragment != "" {
		c.PromptFragment = p.PromptFragment
	}
}

// capability is the session capability of one attached tool: side agent,
// origin agent, with the environment's policy for it applied.
func (e *Environment) capability(name string, at *attached) protocol.Capability {
	c := protocol.Capability{
		Name: name, Description: at.manifest.Description,
		InputSchema: at.manifest.InputSchema, OutputSchema: at.manifest.OutputSchema,
		Side: protocol.SideAgent, Origin: protocol.Origin{Kind: protocol.OriginAgent},
	}
	at.policy.apply(&c)
	return c
}

// Capabilities returns each attached tool as the capability a session
// offers (side agent, origin agent, the policy applied), sorted by name. A
// process that registers the tools in a session elsewhere (brain env) sends
// exactly these.
func (e *Environment) Capabilities() []protocol.Capability {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]protocol.Capability, 0, len(e.tools))
	for n, at := range e.tools {
		out = append(out, e.capability(n, at))
	}
	slices.SortFunc(out, func(a, b protocol.Capability) int { return strings.Compare(a.Name, b.Name) })
	return out
}
