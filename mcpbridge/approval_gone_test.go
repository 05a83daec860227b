package mcpbridge_test

import (
	"context"
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// TestExportApprovalCallerGone (issue 9, approvals): an MCP caller that
// gives up while its call awaits approval ends the call cancelled; a late
// approval is refused and the tool never runs for nobody.
func TestExportApprovalCallerGone(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			f := newFixture(t)
			cs := tr.connect(t, f.s, nil)
			sub := f.s.Subscribe(f.s.LastSeq())
			defer sub.Close()

			ctx, cancel := context.WithCancel(waitCtx(t))
			done := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "danger", Arguments: map[string]any{"why": "test"}})
				done <- err
			}()
			req := waitEvent(t, sub, "approval_requested", func(m protocol.Message) bool {
				_, ok := m.(*protocol.ApprovalRequested)
				return ok
			}).(*protocol.ApprovalRequested)
			cancel()
			if err := recv(t, done, "CallTool to return"); !errors.Is(err, context.Canceled) {
				t.Fatalf("CallTool err = %v, want context.Canceled", err)
			}
			out := waitEvent(t, sub, "the call's outcome", func(m protocol.Message) bool {
				o, ok := m.(*protocol.CapabilityOutcome)
				return ok && o.CallID == req.CallID
			}).(*protocol.CapabilityOutcome)
			if out.Outcome.Err == nil || out.Outcome.Err.Code != protocol.CodeCancelled {
				t.Fatalf("outcome = %+v, want cancelled", out.Outcome)
			}
			err := f.s.Approve(session.Client, &protocol.CapabilityApprove{CallID: req.CallID, Decision: protocol.DecisionApproved,
				DecidedBy: "ada", InputDigest: req.InputDigest})
			if err == nil {
				t.Fatal("an approval after the caller left was accepted")
			}
			if n := f.runs.Load(); n != 0 {
				t.Fatalf("the tool ran %d times for a caller that had gone", n)
			}
		})
	}
}
