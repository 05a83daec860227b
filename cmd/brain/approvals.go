package main

import (
	"time"

	"github.com/brainrt/brain/session"
)

// approvalsConfig is the serve config's `approvals:` (docs/serve.md,
// "Approvals and gone peers"): how long a decision is waited for, and how
// long a call waits for its owning peer to reconnect. Absent keys keep the
// session defaults.
type approvalsConfig struct {
	// Timeout is how long an approval request waits for a decision
	// (session.Options.ApprovalTimeout); default 10m.
	Timeout string `yaml:"timeout"`
	// PeerGrace is how long a call to a disconnected client, app or
	// environment waits for it to come back (session.Options.PeerGrace);
	// default 5s, "0s" for none.
	PeerGrace string `yaml:"peer_grace"`
	// RequireDigest refuses a capability_approve that does not echo its
	// request's inputDigest (session.Options.RequireApprovalDigest). Off by
	// default: the seed's capability_approve has no digest.
	RequireDigest bool `yaml:"require_digest"`
	// MCPElicitation lets the user of an MCP host decide the approvals of
	// that host's own calls, by answering an elicitation request
	// (session.Options.MCPDecisions; docs/mcp.md, "Approvals through the
	// host"). Off by default: it trusts whoever sits at the MCP host.
	MCPElicitation bool `yaml:"mcp_elicitation"`
}

// maxApprovalTimeout bounds approvals.timeout: a week.
const maxApprovalTimeout = 7 * 24 * time.Hour

// validate checks each key; errors name it and where it is.
func (a approvalsConfig) validate(pos positions) error {
	if a.Timeout != "" {
		d, err := time.ParseDuration(a.Timeout)
		if err != nil || d <= 0 || d > maxApprovalTimeout {
			return pos.errorf("$.approvals.timeout", "%q: want a duration above 0 and at most %s, such as 10m", a.Timeout, maxApprovalTimeout)
		}
	}
	if a.PeerGrace != "" {
		d, err := time.ParseDuration(a.PeerGrace)
		if err != nil || d < 0 || d > time.Hour {
			return pos.errorf("$.approvals.peer_grace", "%q: want a duration from 0s (no grace) to 1h, such as 5s", a.PeerGrace)
		}
	}
	return nil
}

// session sets the durations and the digest rule in o; validate has
// passed.
func (a approvalsConfig) session(o *session.Options) {
	o.RequireApprovalDigest = a.RequireDigest
	o.MCPDecisions = a.MCPElicitation
	if d, err := time.ParseDuration(a.Timeout); err == nil {
		o.ApprovalTimeout = d
	}
	if d, err := time.ParseDuration(a.PeerGrace); err == nil {
		o.PeerGrace = d
		if d == 0 {
			o.PeerGrace = -1 // session.Options: negative is no grace, 0 the default
		}
	}
}
