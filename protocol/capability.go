package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"time"
)

// Audience is who may see and invoke a capability.
type Audience string

// The audiences of the spec's CapabilityAudience.
const (
	// AudienceLLM: an LLM tool, listed in the <CAPABILITIES> prompt section.
	AudienceLLM Audience = "llm"
	// AudienceUser: user-facing surfaces such as a command palette.
	AudienceUser Audience = "user"
	// AudienceRuntime: trusted runner and platform code only; never reaches
	// the LLM or a user surface.
	AudienceRuntime Audience = "runtime"
)

// DefaultAudience is what an absent `audience` means: ["llm", "user"].
func DefaultAudience() []Audience { return []Audience{AudienceLLM, AudienceUser} }

// Side is where a capability's handler runs.
type Side string

// The sides of the spec.
const (
	SideClient Side = "client"
	SideAgent  Side = "agent"
	SideApp    Side = "app"
)

// Scope is a capability's lifetime.
type Scope string

// The scopes of the spec. An absent scope means ScopeSession.
const (
	ScopeSession Scope = "session"
	ScopeTurn    Scope = "turn"
)

// Kind is a documentation hint: side effect, render or pure query.
type Kind string

// The kinds of the spec.
const (
	KindEffect Kind = "effect"
	KindRender Kind = "render"
	KindQuery  Kind = "query"
)

// Capability is a named, schema-typed entry point that the LLM (or a user,
// or trusted runtime code) can invoke during a session. Its JSON is the
// spec's Capability type: optional fields are omitted when zero, except
// UserInvokable and Audience, whose "unset" differs from their zero value
// (nil means absent; a non-nil empty Audience encodes as []).
type Capability struct {
	Name          string          `json:"name"`
	DisplayName   string          `json:"displayName,omitempty"`
	Description   string          `json:"description"`
	InputSchema   json.RawMessage `json:"inputSchema"`
	OutputSchema  json.RawMessage `json:"outputSchema,omitempty"`
	Side          Side            `json:"side"`
	Origin        Origin          `json:"origin"`
	Scope         Scope           `json:"scope,omitempty"`
	FireAndForget bool            `json:"fireAndForget,omitempty"`
	// RequiresApproval makes the bridge wait for a capability_approve
	// before dispatch.
	RequiresApproval bool `json:"requiresApproval,omitempty"`
	Kind             Kind `json:"kind,omitempty"`
	// UserInvokable is the deprecated v2.x shim; nil means unset.
	UserInvokable *bool `json:"userInvokable,omitempty"`
	// Audience is nil when unset (meaning ["llm","user"]).
	Audience       []Audience  `json:"audience,omitzero"`
	PromptFragment string      `json:"promptFragment,omitempty"`
	CallTimeoutMs  *int64      `json:"callTimeoutMs,omitempty"`
	Render         *RenderSpec `json:"render,omitempty"`
}

// capabilityFields are the JSON names Capability accepts (anything else is a
// decode error) and those it requires.
var capabilityFields, capabilityRequired = jsonFields(reflect.TypeOf(Capability{}))

// UnmarshalJSON decodes strictly: unknown fields, and missing required
// fields (name, description, inputSchema, side, origin), are errors naming
// the field.
func (c *Capability) UnmarshalJSON(data []byte) error {
	if err := checkFields(data, capabilityFields, capabilityRequired...); err != nil {
		return err
	}
	type plain Capability
	var p struct {
		plain
		// The spec's callTimeoutMs is a number: any JSON number decodes
		// (callTimeoutMs), where an int64 field would refuse 1500.5.
		CallTimeoutMs json.RawMessage `json:"callTimeoutMs,omitempty"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*c = Capability(p.plain)
	if raw := p.CallTimeoutMs; len(raw) > 0 && string(raw) != "null" {
		ms, err := callTimeoutMs(raw)
		if err != nil {
			return err
		}
		c.CallTimeoutMs = &ms
	}
	return nil
}

// MaxCallTimeoutMs is the longest call timeout a timer holds, about 292
// years; a callTimeoutMs above it is taken as it.
const MaxCallTimeoutMs = math.MaxInt64 / int64(time.Millisecond)

// callTimeoutMs reads the spec's callTimeoutMs, a JSON number, as whole
// milliseconds: a fraction rounds up (1500.5 waits 1501 ms, never less
// than asked), and a number past MaxCallTimeoutMs is MaxCallTimeoutMs.
// What is not greater than 0 is an error, as Validate has it.
func callTimeoutMs(raw json.RawMessage) (int64, error) {
	if c := raw[0]; c != '-' && (c < '0' || c > '9') {
		return 0, fmt.Errorf("callTimeoutMs: must be a number of milliseconds, got %.40s", raw)
	}
	n := json.Number(raw)
	if ms, err := n.Int64(); err == nil {
		if ms <= 0 {
			return 0, fmt.Errorf("callTimeoutMs: must be greater than 0, got %.40s", raw)
		}
		return min(ms, MaxCallTimeoutMs), nil
	}
	f, err := n.Float64()
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return 0, fmt.Errorf("callTimeoutMs: %.40s is not a number", raw)
	case raw[0] == '-' || f == 0 && !nonZeroMantissa(raw): // -1e400 is -Inf, 1e-400 is 0: too small for a float, not zero
		return 0, fmt.Errorf("callTimeoutMs: must be greater than 0, got %.40s", raw)
	case f >= float64(MaxCallTimeoutMs):
		return MaxCallTimeoutMs, nil
	}
	return max(int64(math.Ceil(f)), 1), nil
}

// nonZeroMantissa reports whether a JSON number's digits before its
// exponent are not all zeros.
func nonZeroMantissa(num []byte) bool {
	for _, c := range num {
		switch {
		case c == 'e' || c == 'E':
			return false
		case c >= '1' && c <= '9':
			return true
		}
	}
	return false
}

// AudienceOrDefault returns the capability's audience, or DefaultAudience
// when unset.
func (c *Capability) AudienceOrDefault() []Audience {
	if c.Audience == nil {
		return DefaultAudience()
	}
	return c.Audience
}

// HasAudience reports whether a is among the capability's audiences
// (applying the default when unset).
func (c *Capability) HasAudience(a Audience) bool {
	if c.Audience == nil {
		return a == AudienceLLM || a == AudienceUser
	}
	for _, x := range c.Audience {
		if x == a {
			return true
		}
	}
	return false
}

// IsRenderCapability reports whether the capability draws UI: its render
// block is set (the spec's isRenderCapability).
func IsRenderCapability(c *Capability) bool { return c.Render != nil }

// IsUserInvokable decides whether a capability appears in user-facing
// surfaces, following the spec's resolution order: audience when set, then
// the deprecated userInvokable, then the per-origin default table (false for
// every origin except mcp, true when kind is effect, and skill, true when
// kind is effect or render).
func IsUserInvokable(c *Capability) bool {
	if c.Audience != nil {
		for _, a := range c.Audience {
			if a == AudienceUser {
				return true
			}
		}
		return false
	}
	if c.UserInvokable != nil {
		return *c.UserInvokable
	}
	switch c.Origin.Kind {
	case OriginMCP:
		return c.Kind == KindEffect
	case OriginSkill:
		return c.Kind == KindEffect || c.Kind == KindRender
	default:
		return false
	}
}
