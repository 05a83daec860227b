package session

import (
	"context"
	"encoding/json"
	"errors"
)

// What an in-process invoker (the MCP export, package mcpbridge) hands the
// bridge through the context of Session.Invoke: where the call's progress
// goes, and who to tell when the call's approval is requested, so that the
// invoker can ask its own user (MCP elicitation).

// SideMCP is the side of a decision made by the user of an MCP host,
// answering the elicitation request the MCP export sent for a call's
// approval. It decides only in a session whose Options.MCPDecisions is
// set, and only with the request's inputDigest.
const SideMCP PeerSide = "mcp"

// Progress is a report of how far a call has come; Total is 0 when unknown.
type Progress struct {
	Done    float64
	Total   float64
	Message string
}

type progressKey struct{}

// WithProgress returns a context for [Session.Invoke] whose call reports
// its progress to fn: an agent-side handler's ReportProgress calls reach
// it. fn must be quick and safe for concurrent use.
func WithProgress(ctx context.Context, fn func(Progress)) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

// ReportProgress reports p for the call whose handler runs with ctx (the
// ctx a [Handler] is given); it does nothing when the invoker asked for no
// progress.
func ReportProgress(ctx context.Context, p Progress) {
	if fn, ok := ctx.Value(progressKey{}).(func(Progress)); ok && fn != nil {
		fn(p)
	}
}

// ProgressFunc returns the progress function of the call whose handler
// runs with ctx, or nil when the invoker asked for none.
func ProgressFunc(ctx context.Context) func(Progress) {
	fn, _ := ctx.Value(progressKey{}).(func(Progress))
	return fn
}

// ApprovalRequest is a call's approval request as its invoker is told of
// it (see [WithApprovalRequested]).
type ApprovalRequest struct {
	CallID      string
	Name        string
	Input       json.RawMessage
	InputDigest string
	// Capability is the definition the request is bound to.
	DisplayName string
	Description string
}

type approvalKey struct{}

// WithApprovalRequested returns a context for [Session.Invoke] whose call,
// if it needs approval, tells fn of its approval request once the request
// is out (approval_requested journaled and visible), on a goroutine of its
// own; the ctx fn is given ends when the call does. A client or operator
// may still decide first.
func WithApprovalRequested(ctx context.Context, fn func(ctx context.Context, r ApprovalRequest)) context.Context {
	return context.WithValue(ctx, approvalKey{}, fn)
}

// tellApprovalRequestedLocked runs the invoker's hook of ctx for c's
// current request, if it has one, after withdrawing what it was told of an
// earlier request of c (a re-registration re-issues it: reissueLocked), so
// that an MCP host asks its user again, about the new definition. s.mu is
// held.
//
// The hook's context ends, with its cause saying why, when the request is
// decided (by anyone: Approve), re-issued, or the call ends — whichever
// comes first; an MCP host is told the cause as it withdraws the question.
func (s *Session) tellApprovalRequestedLocked(ctx context.Context, c *call) {
	fn, ok := ctx.Value(approvalKey{}).(func(context.Context, ApprovalRequest))
	if !ok || fn == nil {
		return
	}
	if c.withdrawAsk != nil {
		c.withdrawAsk(ErrApprovalReissued)
	}
	c.askCtx = ctx
	r := ApprovalRequest{CallID: c.id, Name: c.name, Input: c.input, InputDigest: c.digest,
		DisplayName: c.reg.def[0].DisplayName, Description: c.reg.def[0].Description}
	hctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	c.withdrawAsk = cancel
	done := c.done
	go func() {
		select {
		case <-done:
			cancel(ErrCallEnded)
		case <-ctx.Done():
			cancel(context.Cause(ctx))
		case <-hctx.Done(): // withdrawn: decided, or a newer request was told
		}
	}()
	go fn(hctx, r)
}

// The causes of an approval hook's context's end (tellApprovalRequestedLocked),
// besides a decision's (the decision and its decider) and the invoker's own.
var (
	ErrApprovalReissued = errors.New("the capability was registered again while the call awaited approval: its approval is asked anew")
	ErrCallEnded        = errors.New("the call has ended")
)

// Started is what [WithStarted] tells of the call Invoke published: its
// id, and a channel closed once it has finished (its outcome is final, and
// Invoke returns it at once).
type Started struct {
	CallID string
	Done   <-chan struct{}
}

type startedKey struct{}

// WithStarted returns a context for [Session.Invoke] that tells fn of the
// call it publishes, before the call goes on (not of a call refused before
// it began). An invoker that may stop waiting (its endpoint closing) uses
// it to tell a call that has just finished — whose outcome it must still
// deliver — from one still running. fn must not block.
func WithStarted(ctx context.Context, fn func(Started)) context.Context {
	return context.WithValue(ctx, startedKey{}, fn)
}

func tellStarted(ctx context.Context, c *call) {
	if fn, ok := ctx.Value(startedKey{}).(func(Started)); ok && fn != nil {
		fn(Started{CallID: c.id, Done: c.done})
	}
}
