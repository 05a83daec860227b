package mcpbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// CallerHeader is the request header in which a kernel that has
// authenticated an MCP request names its caller (the token's name) for the
// export: it is who an elicitation-answered approval records as decider
// ({side: "mcp", name}). A kernel must set it itself on every request it
// passes on (and drop one a client sent); package server does.
const CallerHeader = "Brain-Mcp-Caller"

// callTool runs one tools/call through the session's bridge.
//
// The call is session.Invoke on a context of its own, which ends when the
// MCP request does — notifications/cancelled, or the client's HTTP request
// ending before its response (the SDK's patched transport cancels it then:
// BRAIN-PATCH.md) — so that a call whose caller is gone ends cancelled and,
// if it awaits approval, never runs. It does not end when the Server is
// closed: Close returns at once, the handler answers unavailable, and the
// call stays pending in the session (a stop is not an event; the next
// owner decides what becomes of it).
func (srv *Server) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if srv.admit != nil {
		if err := srv.admit(srv.s); err != nil {
			return resultOf(protocol.Outcome{Err: err}), nil
		}
	}
	if !srv.enter() {
		return resultOf(protocol.Fail(protocol.CodeUnavailable, "this MCP endpoint is closing (the session moved to another node, or brain is stopping); call again")), nil
	}
	defer srv.exit()

	callCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		select {
		case <-srv.closing: // detached: the call outlives this endpoint
		default:
			cancel()
		}
	})
	defer stop()
	if token := req.Params.GetProgressToken(); token != nil && req.Session != nil {
		ss := req.Session
		callCtx = session.WithProgress(callCtx, func(p session.Progress) {
			_ = ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: p.Done, Total: p.Total, Message: p.Message})
		})
	}
	// An elicitation still open when the call ends is withdrawn before the
	// result goes out: afterwards its notifications/cancelled could only
	// go to a stream that no longer exists, and the host would go on
	// asking its user about a call that is over.
	elicitCtx, withdraw := context.WithCancelCause(ctx)
	defer withdraw(session.ErrCallEnded)
	var asking sync.WaitGroup
	if srv.elicit && req.Session != nil && canElicit(req.Session) {
		ss, caller := req.Session, callerOf(req)
		callCtx = session.WithApprovalRequested(callCtx, func(actx context.Context, r session.ApprovalRequest) {
			asking.Add(1)
			defer asking.Done()
			srv.askApproval(actx, elicitCtx, ss, caller, r)
		})
	}
	finished := func(out protocol.Outcome) (*mcp.CallToolResult, error) {
		cancel()
		withdraw(session.ErrCallEnded)
		asking.Wait()
		return resultOf(out), nil
	}

	started := make(chan session.Started, 1)
	callCtx = session.WithStarted(callCtx, func(st session.Started) { started <- st })
	done := make(chan protocol.Outcome, 1)
	go func() { done <- srv.s.Invoke(callCtx, protocol.AudienceLLM, req.Params.Name, arguments(req)) }()
	select {
	case out := <-done:
		return finished(out)
	case <-srv.closing:
		select {
		case out := <-done:
			return finished(out)
		case st := <-started:
			select {
			case <-st.Done: // it has just ended (a Delete cancels first): deliver that
				return finished(<-done)
			default:
			}
		default:
		}
		// callCtx is left to the call: it ends when the call does.
		return resultOf(protocol.Fail(protocol.CodeUnavailable,
			"this MCP endpoint closed before the call finished (the session moved to another node, or brain is stopping); the call is still pending in the session, and its outcome will be in the session's log")), nil
	}
}

// canElicit reports whether the client announced form elicitation.
func canElicit(ss *mcp.ServerSession) bool {
	p := ss.InitializeParams()
	if p == nil || p.Capabilities == nil || p.Capabilities.Elicitation == nil {
		return false
	}
	e := p.Capabilities.Elicitation
	return e.Form != nil || e.URL == nil // neither: form, for older clients
}

// callerOf names the authenticated caller of req, as the kernel said.
func callerOf(req *mcp.CallToolRequest) string {
	if req.Extra == nil || req.Extra.Header == nil {
		return ""
	}
	return req.Extra.Header.Get(CallerHeader)
}

// approvalSchema is the form an approval asks the host's user to fill.
var approvalSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"decision":{"type":"string","title":"Decision","enum":["approve","reject"],"enumNames":["Approve","Reject"],"description":"Approve runs the call with exactly this input; reject tells the model why not."},` +
	`"feedback":{"type":"string","title":"Feedback","description":"Optional: why, for the model (sent with a rejection)."}` +
	`},"required":["decision"]}`)

// askApproval sends the MCP host an elicitation request for a call's
// approval and decides the call with the answer, as the host's user
// (decider {side: "mcp", name: caller}), bound to the request's digest.
// Declining rejects; dismissing (cancel) decides nothing, and the call
// keeps waiting for the client, an operator or its expiry. An answer that
// is no decision (accepted with content outside the form's schema) is
// asked again, saying why, up to maxApprovalAsks in all: the host's user
// believes they answered, and a call left waiting on its own would look
// hung to them. actx ends when the call does, which withdraws the question
// from the host (the SDK sends notifications/cancelled for it). reqCtx is
// the tools/call's own context: the elicitation is sent on that request's
// stream.
func (srv *Server) askApproval(actx, reqCtx context.Context, ss *mcp.ServerSession, caller string, r session.ApprovalRequest) {
	// Its cause is the host's notifications/cancelled's reason (go-sdk
	// patch 15): "the call was approved by the operator (ada)".
	ctx, cancel := context.WithCancelCause(reqCtx)
	defer cancel(nil)
	stop := context.AfterFunc(actx, func() { cancel(context.Cause(actx)) })
	defer stop()
	message := approvalMessage(r)
	for ask := 1; ; ask++ {
		d, unreadable, err := srv.elicitDecision(ctx, ss, message, r, caller)
		if err != nil {
			if actx.Err() == nil {
				srv.log.Info("approval elicitation failed; the call waits for another decider", slog.String(keyCall, r.CallID), slog.String("error", err.Error()))
			}
			return
		}
		if unreadable != "" {
			if ask == maxApprovalAsks {
				srv.log.Info("approval elicitation answered without a decision, "+fmt.Sprint(ask)+" times; the call waits for another decider", slog.String(keyCall, r.CallID), slog.String("answer", unreadable))
				return
			}
			message = "Your answer could not be read as a decision (" + unreadable + "): choose Approve or Reject.\n\n" + approvalMessage(r)
			continue
		}
		if d == nil { // dismissed
			return
		}
		if err := srv.s.Approve(session.Peer{Side: session.SideMCP, Name: caller}, d); err != nil {
			srv.log.Info("elicited decision refused", slog.String(keyCall, r.CallID), slog.String("error", err.Error()))
		}
		return
	}
}

// maxApprovalAsks bounds how often one approval is asked of a host whose
// answers are no decision: a host that cannot fill the form is not asked
// for ever.
const maxApprovalAsks = 3

// elicitDecision asks the host once: the decision its user made (nil when
// they dismissed the question), or why the answer is no decision, or the
// elicitation's failure.
func (srv *Server) elicitDecision(ctx context.Context, ss *mcp.ServerSession, message string, r session.ApprovalRequest, caller string) (*protocol.CapabilityApprove, string, error) {
	res, err := ss.Elicit(ctx, &mcp.ElicitParams{Mode: "form", Message: message, RequestedSchema: approvalSchema})
	if err != nil {
		if ctx.Err() == nil && strings.Contains(err.Error(), "does not match requested schema") {
			return nil, "it does not match the form", nil // the SDK's check of the content
		}
		return nil, "", err
	}
	d := &protocol.CapabilityApprove{CallID: r.CallID, InputDigest: r.InputDigest, DecidedBy: caller}
	switch res.Action {
	case "accept":
		decision, _ := res.Content["decision"].(string)
		switch decision {
		case "approve":
			d.Decision = protocol.DecisionApproved
		case "reject":
			d.Decision = protocol.DecisionRejected
			d.Feedback, _ = res.Content["feedback"].(string)
		default:
			return nil, "no decision given", nil
		}
	case "decline":
		d.Decision = protocol.DecisionRejected
		d.Feedback, _ = res.Content["feedback"].(string)
	default: // cancel: dismissed, no choice made
		return nil, "", nil
	}
	if len(d.Feedback) > session.MaxTextBytes {
		d.Feedback = d.Feedback[:session.MaxTextBytes]
	}
	return d, "", nil
}

// approvalMessage is what the host shows its user: the capability, its
// display name and description, and the input, as the session holds it.
func approvalMessage(r session.ApprovalRequest) string {
	var b strings.Builder
	name := r.Name
	if r.DisplayName != "" {
		name = r.DisplayName + " (" + r.Name + ")"
	}
	fmt.Fprintf(&b, "brain asks you to approve a call of %s", name)
	if r.Description != "" {
		fmt.Fprintf(&b, ": %s", r.Description)
	}
	in := string(r.Input)
	const maxShown = 4000
	if len(in) > maxShown {
		in = in[:maxShown] + "… (cut; " + fmt.Sprint(len(r.Input)) + " bytes in all)"
	}
	fmt.Fprintf(&b, "\n\nInput:\n%s\n\nApprove runs it with exactly this input; reject tells the model why not.", in)
	return b.String()
}
