package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unique"

	"github.com/brainrt/brain/internal/textcut"
	"github.com/brainrt/brain/protocol"
)

// Approvals are bound, single-use and unforgeable:
//
//   - an approval request names its call, the registration it was made to
//     (revision, a digest of the capability's definition) and the exact
//     input (inputDigest, over the revision, the name and the input bytes
//     as events carry them); an approving decision must echo the digest;
//   - a call has at most one decision: the first one is journaled as
//     approval_decided before it takes effect, and every later one, and
//     every decision of a call restored from a journal that holds one, is
//     refused;
//   - only the client and operators decide, never the invoker (the model,
//     the runtime, an MCP caller), an app or an environment — except, with
//     Options.MCPDecisions, the user of the MCP host that made the call,
//     answering its elicitation (SideMCP, digest required); the decision
//     records who decided as the connection authenticated, and what the
//     frame's decidedBy claimed;
//   - a request expires after Options.ApprovalTimeout, and ends cancelled
//     when its caller is gone.

// revisionOf names a capability definition: the digest of its JSON.
func revisionOf(c *protocol.Capability) (string, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("the definition does not encode as JSON: %w", err)
	}
	sum := sha256.Sum256(b)
	// Interned: every session registers the same few definitions (the
	// environment's tools, a platform's client capabilities), and a
	// revision is kept for the registration's life.
	return unique.Make("sha256:" + hex.EncodeToString(sum[:])).Value(), nil
}

// inputDigest binds an approval request to registration r and input:
// sha256 of the revision, the name and the input, separated by newlines.
func inputDigest(r *registration, input []byte) string {
	h := sha256.New()
	h.Write([]byte(r.rev))
	h.Write([]byte{'\n'})
	h.Write([]byte(r.def[0].Name))
	h.Write([]byte{'\n'})
	h.Write(input)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// canonicalInput returns input as an event carries it on the wire: the
// encoding of json.RawMessage(input), compact and HTML-escaped.
func canonicalInput(input []byte) (json.RawMessage, error) {
	b, err := json.Marshal(json.RawMessage(input))
	if err != nil {
		return nil, err
	}
	return b, nil
}

// requestLocked publishes the current approval request of c.
func (s *Session) requestLocked(c *call) {
	c.requested = true
	defer c.firstEventOutLocked() // the request is the first event of a call that needs approval
	s.emitLocked(entry{typ: protocol.TypeApprovalRequested, owner: &c.reg.owner, msg: &protocol.ApprovalRequested{
		CallID: c.id, Name: c.name, Input: c.input, Invoker: c.invoker, InputDigest: c.digest, Revision: c.reg.rev, Detached: c.detached,
	}})
}

// awaitApproval publishes approval_requested and waits for the decision.
// It reports whether the call was approved; otherwise the call is finished.
func (s *Session) awaitApproval(ctx context.Context, c *call) bool {
	// Observed before the request is visible: a decision can only follow
	// the request event, so no observer sees ApprovalDecided before it.
	s.observe(ApprovalRequested, c, nil)
	s.mu.Lock()
	if c.finished {
		s.mu.Unlock()
		return false
	}
	if !c.resumed {
		s.requestLocked(c)
		s.tellApprovalRequestedLocked(ctx, c) // invoker.go: an MCP host may ask its user
	}
	s.mu.Unlock()
	timer := time.NewTimer(s.opts.ApprovalTimeout)
	defer timer.Stop()
	select {
	case d := <-c.approval:
		if d.Decision == protocol.DecisionApproved {
			if ctx.Err() != nil { // approved, but nobody waits for the result any more
				s.finish(c, protocol.Fail(protocol.CodeCancelled, "the call was approved after its caller had gone; it did not run"))
				return false
			}
			if c.callerGone {
				s.finish(c, protocol.Fail(protocol.CodeCancelled,
					"the call was approved after a restart or a handover, and the caller that made it (an MCP request, the model loop) went with the kernel that had it; it did not run: invoke it again"))
				return false
			}
			return true
		}
		s.finish(c, protocol.Fail(protocol.CodeRejected, "%s", rejection(d.DecidedBy, d.Feedback)))
	case <-c.done:
	case <-timer.C:
		s.finish(c, protocol.Fail(protocol.CodeTimeout, "no approval within %s (ApprovalTimeout); the call did not run", s.opts.ApprovalTimeout))
	case <-ctx.Done():
		out := contextOutcome(ctx, 0)
		out.Err.Message = "the caller went away while the call awaited approval; it did not run"
		var tc *turnCancelled
		if errors.As(context.Cause(ctx), &tc) { // the model loop's turn: say who ended it
			out.Err.Message = tc.Error() + " while the call awaited approval; it did not run"
		}
		s.finish(c, out)
	}
	return false
}

// Approve delivers a capability_approve from peer p. Only the client and
// operators decide (and SideMCP with Options.MCPDecisions and the
// request's inputDigest); the runtime may reject (a policy) but never
// approve. It fails, changing nothing, for an unknown or finished
// call, a call that needs no approval or was already decided (the first
// decision wins, also across restarts), an unknown decision, an approval
// with another request's inputDigest (stale_approval). An approval without inputDigest — the seed's
// capability_approve — is taken for the one request the call ever showed;
// once that request was withdrawn and issued again it is stale_approval,
// and with Options.RequireApprovalDigest it is invalid_request. The
// decision is journaled as approval_decided,
// naming p and the frame's decidedBy, before it takes effect; an approval
// the journal fails to store ends the call with unavailable instead of
// running it, and Approve reports unavailable.
func (s *Session) Approve(p Peer, m *protocol.CapabilityApprove) error {
	if m.Decision != protocol.DecisionApproved && m.Decision != protocol.DecisionRejected {
		return protocol.Errorf(protocol.CodeInvalidRequest, "decision %q is neither approved nor rejected", m.Decision)
	}
	if len(m.Feedback) > MaxTextBytes || len(m.DecidedBy) > MaxTextBytes {
		return protocol.Errorf(protocol.CodeTooLarge, "a decision's feedback and decidedBy are at most %d bytes each (feedback %d, decidedBy %d); nothing was decided", MaxTextBytes, len(m.Feedback), len(m.DecidedBy))
	}
	switch {
	case p.Side == SideClient || p.Side == SideOperator:
	case p.Side == SideMCP && s.opts.MCPDecisions && m.InputDigest != "":
		// The user of an MCP host answered the elicitation for this very
		// request (invoker.go): trusted only when the kernel says so, and
		// only bound to the digest the user was shown.
	case p.Side == SideMCP:
		return protocol.Errorf(protocol.CodeForbidden, "%s may not %s calls here: decisions through MCP elicitation are off (approvals.mcp_elicitation), or the decision carries no inputDigest", p, verb(m.Decision))
	case p.Side == SideRuntime && m.Decision == protocol.DecisionRejected:
		// Trusted code in the kernel's process (a policy) may refuse a call;
		// it never approves one, since it may be the invoker.
	default:
		return protocol.Errorf(protocol.CodeForbidden, "%s may not %s calls; the client or an operator decides", p, verb(m.Decision))
	}
	s.mu.Lock()
	c, err := s.lookupCallLocked(m.CallID)
	switch {
	case err != nil:
		s.mu.Unlock()
		s.logInfo("approval dropped", slog.String(keyCall, m.CallID), slog.String(keyPeer, p.String()), slog.String("reason", err.Message))
		return err
	case c.approval == nil:
		s.mu.Unlock()
		return protocol.Errorf(protocol.CodeConflict, "call %q does not require approval", m.CallID)
	case c.decided:
		s.mu.Unlock()
		return protocol.Errorf(protocol.CodeConflict, "call %q was already decided; the first decision stands", m.CallID)
	case m.Decision == protocol.DecisionApproved && m.InputDigest == "" && s.opts.RequireApprovalDigest:
		s.mu.Unlock()
		return protocol.Errorf(protocol.CodeInvalidRequest, "approving call %q needs inputDigest (approvals.require_digest): echo the one its approval_requested carries", m.CallID)
	case m.Decision == protocol.DecisionApproved && m.InputDigest == "" && c.reissued:
		// A decision without a digest is taken to be on the request the
		// decider saw; once the request was withdrawn and issued again,
		// it cannot say which one that was.
		s.mu.Unlock()
		s.logInfo("approval refused: no digest on a re-issued request", slog.String(keyCall, m.CallID), slog.String(keyPeer, p.String()))
		return protocol.Errorf(protocol.CodeStaleApproval,
			"call %q's approval request was withdrawn and issued again (its capability changed); a decision without inputDigest cannot say which request it answers: echo the inputDigest of the latest approval_requested (%q); nothing was decided", m.CallID, c.digest)
	case m.InputDigest != "" && m.InputDigest != c.digest:
		s.mu.Unlock()
		s.logInfo("approval refused: stale digest", slog.String(keyCall, m.CallID), slog.String(keyPeer, p.String()))
		return protocol.Errorf(protocol.CodeStaleApproval,
			"the decision's inputDigest %q is not that of the pending request for call %q (%q): the capability or its input changed; nothing was decided", m.InputDigest, m.CallID, c.digest)
	}
	rec := &protocol.ApprovalDecided{CallID: c.id, Name: c.name, Decision: m.Decision, DecidedBy: m.DecidedBy,
		Decider: protocol.Decider{Side: string(p.Side), Name: p.Name}, Feedback: m.Feedback, InputDigest: m.InputDigest}
	jerr := s.emitDurableLocked(entry{typ: protocol.TypeApprovalDecided, owner: &c.reg.owner, msg: rec})
	c.decided = true
	c.awaitingApproval = false
	if c.withdrawAsk != nil { // the question an MCP host may still show its user
		c.withdrawAsk(decidedElsewhere(p, m))
	}
	if jerr != nil && m.Decision == protocol.DecisionApproved {
		// Acting on an approval the journal may not hold could run the call
		// twice: once now, once after a restart that asks again.
		s.endLocked(c, protocol.Fail(protocol.CodeUnavailable,
			"the approval could not be journaled (%v); the call did not run: invoke it again", jerr))
		s.mu.Unlock()
		return protocol.Errorf(protocol.CodeUnavailable, "the approval of call %q could not be journaled (%v); the call ended without running", m.CallID, jerr)
	}
	logKey := c.reg.logKey
	s.mu.Unlock()
	s.logInfo("call decided", slog.String(keyCapability, logKey), slog.String(keyCall, c.id),
		slog.String("decision", string(m.Decision)), slog.String("decider", p.String()), slog.String("decidedBy", m.DecidedBy))
	s.observe(ApprovalDecided, c, func(e CallEvent) CallEvent {
		e.Decision, e.DecidedBy = m.Decision, decidedBy(p, m.DecidedBy)
		return e
	})
	// Handed to the waiting call only now: observed after, its dispatch
	// and its end would reach an observer before the decision. The channel
	// holds one, and c.decided (set above, under the lock) lets no second
	// decision in, so the send never waits.
	c.approval <- *m
	return nil
}

// decidedElsewhere is why a decided call's question is withdrawn from an
// MCP host that may still show it: "the call was approved by the client
// (bob)", "… by the operator ada".
func decidedElsewhere(p Peer, m *protocol.CapabilityApprove) error {
	who := "the " + string(p.Side)
	if p.Side == SideApp {
		who = "the app " + p.AppID
	}
	if p.Name != "" && p.Name != string(p.Side) { // a token named after its side says nothing more
		who += " " + p.Name
	}
	if m.DecidedBy != "" && m.DecidedBy != p.Name {
		who += " (" + textcut.Cut(m.DecidedBy, 64) + ")"
	}
	return fmt.Errorf("the call was %s by %s", m.Decision, who)
}

func verb(d protocol.Decision) string {
	if d == protocol.DecisionApproved {
		return "approve"
	}
	return "reject"
}

// decidedBy is how a decision names who decided: the authenticated peer,
// then what the frame claimed.
func decidedBy(p Peer, claimed string) string {
	return p.String() + " (" + claimed + ")"
}

// reissueLocked withdraws the approval requests of undecided calls made to
// old, now replaced by r with another definition, and issues new ones
// bound to r. Calls that r no longer fits (it needs no approval, or refuses
// their input) end without running.
func (s *Session) reissueLocked(old, r *registration) {
	for _, c := range s.sortedCallsLocked() {
		if c.reg != old || !c.awaitingApproval || c.decided || c.finished {
			continue
		}
		if !c.requested { // its request is not out yet: it will be issued for r
			if r.def[0].RequiresApproval && r.input.ValidateJSON(c.input) == nil {
				c.reg, c.digest = r, inputDigest(r, c.input)
				continue
			}
		} else {
			s.emitLocked(entry{typ: protocol.TypeApprovalWithdrawn, owner: &old.owner, msg: &protocol.ApprovalWithdrawn{
				CallID: c.id, Name: c.name, InputDigest: c.digest, Code: protocol.CodeStaleApproval,
				Message: fmt.Sprintf("capability %q was re-registered with another definition; a decision on this request would not apply to it", c.name),
			}})
		}
		switch {
		case !r.def[0].RequiresApproval:
			s.endLocked(c, protocol.Fail(protocol.CodeStaleApproval,
				"capability %q was re-registered while the call awaited approval; the call did not run: invoke it again", c.name))
		case r.input.ValidateJSON(c.input) != nil:
			s.endLocked(c, protocol.Fail(protocol.CodeInvalidInput,
				"capability %q was re-registered while the call awaited approval, and its new inputSchema refuses the call's input; the call did not run", c.name))
		default:
			c.reg, c.digest, c.reissued = r, inputDigest(r, c.input), true
			s.requestLocked(c)
			if c.askCtx != nil {
				s.tellApprovalRequestedLocked(c.askCtx, c) // the host asks again, about the new definition
			}
		}
	}
}

// rejection is the message of a call's rejected outcome: who rejected it
// (decidedBy, when the decider gave one: a token without a name gives
// none) and the feedback, for the model.
func rejection(decidedBy, feedback string) string {
	msg := "the user rejected the call"
	if decidedBy != "" {
		msg = "the user (" + decidedBy + ") rejected the call"
	}
	if feedback != "" {
		msg += ": " + feedback
	}
	return msg
}
