package session_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// frameSession is the session every HandleFrame case starts from: a client
// call dispatched and waiting for its result, and a call waiting for
// approval.
type frameSession struct {
	s                    *session.Session
	sub                  *session.Subscription
	clientCall, apprCall string
	apprDigest           string
}

func newFrameSession(t *testing.T) *frameSession {
	t.Helper()
	s := session.New("test", nil)
	both := []protocol.Audience{protocol.AudienceLLM, protocol.AudienceUser}
	react := clientCap("c.react")
	react.Audience = both
	llmOnly := clientCap("c.llm")
	llmOnly.Audience = []protocol.Audience{protocol.AudienceLLM}
	if err := s.Register(session.Client, react, llmOnly); err != nil {
		t.Fatal(err)
	}
	if err := s.Register(session.App("calendar"), appCap("calendar", "cal.add")); err != nil {
		t.Fatal(err)
	}
	echoCap := agentCap("a.echo")
	echoCap.Audience = both
	del := agentCap("a.delete")
	del.Audience, del.RequiresApproval = both, true
	if err := s.RegisterAgent(echoCap, echo); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterAgent(del, echo); err != nil {
		t.Fatal(err)
	}
	sub := watch(t, s)
	fs := &frameSession{s: s, sub: sub}
	var err *protocol.Error
	if fs.clientCall, err = s.Start(protocol.AudienceLLM, "c.react", textInput); err != nil {
		t.Fatal(err)
	}
	waitFor(t, sub, func(m *protocol.CapabilityInvoked) bool { return m.CallID == fs.clientCall })
	if fs.apprCall, err = s.Start(protocol.AudienceLLM, "a.delete", textInput); err != nil {
		t.Fatal(err)
	}
	req, _ := waitFor(t, sub, func(m *protocol.ApprovalRequested) bool { return m.CallID == fs.apprCall })
	fs.apprDigest = req.InputDigest
	t.Cleanup(func() { // end what the case left pending
		_ = s.Cancel(fs.clientCall, "")
		_ = s.Cancel(fs.apprCall, "")
	})
	return fs
}

// decodeFrame decodes a peer's frame from the wire.
func decodeFrame(t *testing.T, id, msg string) *protocol.Frame {
	t.Helper()
	raw := `{"v":2,"msg":` + msg + `}`
	if id != "" {
		raw = fmt.Sprintf(`{"v":2,"id":%q,"msg":%s}`, id, msg)
	}
	f, err := protocol.DecodeFrame([]byte(raw))
	if err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return f
}

func TestHandleFrame(t *testing.T) {
	calendar := session.App("calendar")
	capJSON := func(name, side, origin string) string {
		return fmt.Sprintf(`{"name":%q,"description":"d","inputSchema":{"type":"object"},"side":%q,"origin":%s}`, name, side, origin)
	}
	type ids = *frameSession
	tests := []struct {
		name  string
		peer  session.Peer
		msg   func(ids) string
		code  protocol.Code // "" means ack
		check func(t *testing.T, fs *frameSession, before uint64, reply *protocol.Frame)
	}{
		{name: "register", peer: session.Client, msg: func(ids) string {
			return `{"type":"capability_register","capabilities":[` + capJSON("c.new", "client", `{"kind":"client"}`) + `]}`
		}, check: func(t *testing.T, fs *frameSession, before uint64, _ *protocol.Frame) {
			if _, ok := fs.s.Lookup("c.new"); !ok || fs.s.LastSeq() != before+1 {
				t.Error("the registration did not happen, as one event")
			}
		}},
		{name: "register by an app", peer: calendar, msg: func(ids) string {
			return `{"type":"capability_register","capabilities":[` + capJSON("cal.new", "app", `{"kind":"app","appId":"calendar"}`) + `]}`
		}},
		{name: "register forbidden origin", peer: session.Client, msg: func(ids) string {
			return `{"type":"capability_register","capabilities":[` + capJSON("c.ok", "client", `{"kind":"client"}`) + `,` +
				capJSON("c.agent", "agent", `{"kind":"agent"}`) + `]}`
		}, code: protocol.CodeForbidden},
		{name: "register another app's", peer: calendar, msg: func(ids) string {
			return `{"type":"capability_register","capabilities":[` + capJSON("cal.x", "app", `{"kind":"app","appId":"mail"}`) + `]}`
		}, code: protocol.CodeForbidden},
		{name: "register a name twice", peer: session.Client, msg: func(ids) string {
			c := capJSON("c.twice", "client", `{"kind":"client"}`)
			return `{"type":"capability_register","capabilities":[` + c + `,` + c + `]}`
		}, code: protocol.CodeInvalidRequest},
		{name: "register a taken name", peer: session.Client, msg: func(ids) string {
			return `{"type":"capability_register","capabilities":[` + capJSON("a.echo", "client", `{"kind":"client"}`) + `]}`
		}, code: protocol.CodeConflict},
		{name: "register an external $ref", peer: session.Client, msg: func(ids) string {
			return `{"type":"capability_register","capabilities":[{"name":"c.ref","description":"d","inputSchema":{"$ref":"file:///etc/passwd"},"side":"client","origin":{"kind":"client"}}]}`
		}, code: protocol.CodeInvalidRequest},
		{name: "deregister", peer: session.Client, msg: func(ids) string {
			return `{"type":"capability_deregister","names":["c.llm","nope"]}`
		}},
		{name: "deregister unknown", peer: session.Client, msg: func(ids) string {
			return `{"type":"capability_deregister","names":["nope"]}`
		}},
		{name: "deregister another's", peer: calendar, msg: func(ids) string {
			return `{"type":"capability_deregister","names":["c.react"]}`
		}, code: protocol.CodeForbidden},
		{name: "deregister the built-in", peer: session.Client, msg: func(ids) string {
			return `{"type":"capability_deregister","names":["__capabilities.list"]}`
		}, code: protocol.CodeForbidden},
		{name: "result", peer: session.Client, msg: func(fs ids) string {
			return fmt.Sprintf(`{"type":"capability_result","callId":%q,"result":{"shown":true}}`, fs.clientCall)
		}, check: func(t *testing.T, fs *frameSession, _ uint64, _ *protocol.Frame) {
			o, _ := waitFor(t, fs.sub, func(o *protocol.CapabilityOutcome) bool { return o.CallID == fs.clientCall })
			wantValue(t, o.Outcome, `{"shown":true}`)
		}},
		{name: "result with an error envelope", peer: session.Client, msg: func(fs ids) string {
			return fmt.Sprintf(`{"type":"capability_result","callId":%q,"result":{"error":"slow down","code":"rate_limited"}}`, fs.clientCall)
		}, check: func(t *testing.T, fs *frameSession, _ uint64, _ *protocol.Frame) {
			o, _ := waitFor(t, fs.sub, func(o *protocol.CapabilityOutcome) bool { return o.CallID == fs.clientCall })
			wantCode(t, o.Outcome, "rate_limited")
		}},
		{name: "result from an app", peer: calendar, msg: func(fs ids) string {
			return fmt.Sprintf(`{"type":"capability_result","callId":%q,"result":{}}`, fs.clientCall)
		}, code: protocol.CodeForbidden},
		{name: "result for an unknown call", peer: session.Client, msg: func(ids) string {
			return `{"type":"capability_result","callId":"c-nope","result":{}}`
		}, code: protocol.CodeNotFound},
		{name: "result for a call awaiting approval", peer: session.Client, msg: func(fs ids) string {
			return fmt.Sprintf(`{"type":"capability_result","callId":%q,"result":{}}`, fs.apprCall)
		}, code: protocol.CodeForbidden}, // agent side: no peer answers it
		{name: "approve", peer: session.Client, msg: func(fs ids) string {
			return fmt.Sprintf(`{"type":"capability_approve","callId":%q,"decision":"approved","decidedBy":"ada","inputDigest":%q}`, fs.apprCall, fs.apprDigest)
		}, check: func(t *testing.T, fs *frameSession, _ uint64, reply *protocol.Frame) {
			decidedBefore(t, fs, reply)
			o, _ := waitFor(t, fs.sub, func(o *protocol.CapabilityOutcome) bool { return o.CallID == fs.apprCall })
			wantValue(t, o.Outcome, string(textInput))
		}},
		{name: "reject", peer: session.Client, msg: func(fs ids) string {
			return fmt.Sprintf(`{"type":"capability_approve","callId":%q,"decision":"rejected","feedback":"no","decidedBy":"ada"}`, fs.apprCall)
		}, check: func(t *testing.T, fs *frameSession, _ uint64, reply *protocol.Frame) {
			decidedBefore(t, fs, reply)
			o, _ := waitFor(t, fs.sub, func(o *protocol.CapabilityOutcome) bool { return o.CallID == fs.apprCall })
			wantCode(t, o.Outcome, protocol.CodeRejected)
		}},
		{name: "approve from an app", peer: calendar, msg: func(fs ids) string {
			return fmt.Sprintf(`{"type":"capability_approve","callId":%q,"decision":"approved","decidedBy":"ada"}`, fs.apprCall)
		}, code: protocol.CodeForbidden},
		{name: "approve an unknown call", peer: session.Client, msg: func(ids) string {
			return `{"type":"capability_approve","callId":"c-nope","decision":"approved","decidedBy":"ada"}`
		}, code: protocol.CodeNotFound},
		{name: "approve with an unknown decision", peer: session.Client, msg: func(fs ids) string {
			return fmt.Sprintf(`{"type":"capability_approve","callId":%q,"decision":"later","decidedBy":"ada"}`, fs.apprCall)
		}, code: protocol.CodeInvalidRequest},
		{name: "cancel", peer: session.Client, msg: func(fs ids) string {
			return fmt.Sprintf(`{"type":"capability_cancel","callId":%q,"reason":"stop"}`, fs.clientCall)
		}, check: func(t *testing.T, fs *frameSession, _ uint64, _ *protocol.Frame) {
			o, _ := waitFor(t, fs.sub, func(o *protocol.CapabilityOutcome) bool { return o.CallID == fs.clientCall })
			wantCode(t, o.Outcome, protocol.CodeCancelled)
		}},
		{name: "cancel by the runtime", peer: session.Runtime, msg: func(fs ids) string {
			return fmt.Sprintf(`{"type":"capability_cancel","callId":%q}`, fs.apprCall)
		}},
		{name: "cancel from an app", peer: calendar, msg: func(fs ids) string {
			return fmt.Sprintf(`{"type":"capability_cancel","callId":%q}`, fs.clientCall)
		}, code: protocol.CodeForbidden},
		{name: "cancel an unknown call", peer: session.Client, msg: func(ids) string {
			return `{"type":"capability_cancel","callId":"c-nope"}`
		}, code: protocol.CodeNotFound},
		{name: "invoke", peer: session.Client, msg: func(ids) string {
			return `{"type":"capability_invoke","name":"a.echo","input":{"text":"from cmdK"}}`
		}, check: func(t *testing.T, fs *frameSession, _ uint64, reply *protocol.Frame) {
			ack := reply.Msg.(*protocol.Ack)
			if ack.CallID == "" {
				t.Fatal("the ack of capability_invoke carries no callId")
			}
			o, _ := waitFor(t, fs.sub, func(o *protocol.CapabilityOutcome) bool { return o.CallID == ack.CallID })
			wantValue(t, o.Outcome, `{"text":"from cmdK"}`)
		}},
		{name: "invoke llm-only", peer: session.Client, msg: func(ids) string {
			return `{"type":"capability_invoke","name":"c.llm","input":{"text":"x"}}`
		}, code: protocol.CodeForbidden},
		{name: "invoke unknown", peer: session.Client, msg: func(ids) string {
			return `{"type":"capability_invoke","name":"nope","input":{}}`
		}, code: protocol.CodeNotFound},
		{name: "invoke with bad input", peer: session.Client, msg: func(ids) string {
			return `{"type":"capability_invoke","name":"a.echo","input":{"text":1}}`
		}, code: protocol.CodeInvalidInput},
		{name: "invoke from an app", peer: calendar, msg: func(ids) string {
			return `{"type":"capability_invoke","name":"a.echo","input":{"text":"x"}}`
		}, code: protocol.CodeForbidden},
		{name: "invoke from the runtime", peer: session.Runtime, msg: func(ids) string {
			return `{"type":"capability_invoke","name":"a.echo","input":{"text":"x"}}`
		}, code: protocol.CodeForbidden},
		{name: "resume", peer: session.Client, msg: func(ids) string { return `{"type":"resume","afterSeq":0}` },
			code: protocol.CodeInvalidRequest},
	}
	kernelOnly := map[string]string{
		"capability_invoked": `{"type":"capability_invoked","callId":"c1","name":"a.echo","input":{},"invokedBy":"agent"}`,
		"render_invoked":     `{"type":"render_invoked","capabilityName":"a.echo","props":{},"callId":"c1"}`,
		"approval_requested": `{"type":"approval_requested","callId":"c1","name":"a.echo","input":{},"invoker":"llm"}`,
		"capability_outcome": `{"type":"capability_outcome","callId":"c1","name":"a.echo","outcome":{"ok":true,"value":{}}}`,
		"snapshot":           `{"type":"snapshot","seq":1,"capabilities":[],"pendingCalls":[]}`,
		"ack":                `{"type":"ack"}`,
		"error":              `{"type":"error","code":"internal","message":"x"}`,
	}
	for typ, msg := range kernelOnly {
		for _, p := range []session.Peer{session.Client, calendar} {
			tests = append(tests, struct {
				name  string
				peer  session.Peer
				msg   func(ids) string
				code  protocol.Code
				check func(t *testing.T, fs *frameSession, before uint64, reply *protocol.Frame)
			}{name: typ + " from " + p.String(), peer: p, msg: func(ids) string { return msg }, code: protocol.CodeInvalidRequest})
		}
	}
	for _, tt := range tests {
		for _, id := range []string{"p-7", ""} {
			t.Run(fmt.Sprintf("%s/id=%q", tt.name, id), func(t *testing.T) {
				fs := newFrameSession(t)
				before, seq := state(t, fs.s), fs.s.LastSeq()
				reply := fs.s.HandleFrame(tt.peer, decodeFrame(t, id, tt.msg(fs)))
				if reply.V != protocol.Version || reply.Ref != id || reply.ID != "" {
					t.Errorf("reply v=%d ref=%q id=%q, want v=2 ref=%q", reply.V, reply.Ref, reply.ID, id)
				}
				// The reply's seq is the session's last seq when it replied:
				// every effect of the command is at or before it. An invoke
				// and a decision hand the call to its own goroutine, whose
				// events (the call's run, its outcome) may follow the ack.
				if runsOn := tt.name == "invoke" || tt.name == "approve" || tt.name == "reject"; runsOn && tt.code == "" {
					if reply.Seq < seq || reply.Seq > fs.s.LastSeq() {
						t.Errorf("reply seq %d, want between %d and %d", reply.Seq, seq, fs.s.LastSeq())
					}
				} else if reply.Seq != fs.s.LastSeq() {
					t.Errorf("reply seq %d, session's last seq %d", reply.Seq, fs.s.LastSeq())
				}
				if _, err := protocol.EncodeFrame(reply); err != nil {
					t.Errorf("the reply does not encode: %v", err)
				}
				if tt.code != "" {
					er, ok := reply.Msg.(*protocol.ErrorReply)
					if !ok {
						t.Fatalf("reply %s, want an error %s", jsonOf(t, reply.Msg), tt.code)
					}
					if er.Code != tt.code || er.Message == "" {
						t.Fatalf("error reply %s, want code %s", jsonOf(t, er), tt.code)
					}
					if after := state(t, fs.s); after != before || fs.s.LastSeq() != seq {
						t.Errorf("a failed command changed the session:\nbefore %s\nafter  %s", before, after)
					}
					return
				}
				ack, ok := reply.Msg.(*protocol.Ack)
				if !ok {
					t.Fatalf("reply %s, want an ack", jsonOf(t, reply.Msg))
				}
				if tt.name != "invoke" && ack.CallID != "" {
					t.Errorf("ack of %s carries callId %q", tt.name, ack.CallID)
				}
				if tt.check != nil {
					tt.check(t, fs, seq, reply)
				}
			})
		}
	}
}

// decidedBefore checks that the approval_decided of fs's approval call is
// at or before the seq of the reply to the decision: the decision is the
// command's effect; the call's run and outcome come after, on its own.
func decidedBefore(t *testing.T, fs *frameSession, reply *protocol.Frame) {
	t.Helper()
	_, seq := waitFor(t, fs.sub, func(d *protocol.ApprovalDecided) bool { return d.CallID == fs.apprCall })
	if seq > reply.Seq {
		t.Errorf("approval_decided at seq %d, after the reply's seq %d", seq, reply.Seq)
	}
}

// TestHandleFrameInvokeFlow: a user invokes a client-side capability from
// the command palette; the client answers it; the outcome is an event.
func TestHandleFrameInvokeFlow(t *testing.T) {
	s := session.New("test", nil)
	c := clientCap("platform.open")
	c.Audience = []protocol.Audience{protocol.AudienceUser}
	c.RequiresApproval = true
	if err := s.Register(session.Client, c); err != nil {
		t.Fatal(err)
	}
	sub := watch(t, s)
	reply := s.HandleFrame(session.Client, decodeFrame(t, "1", `{"type":"capability_invoke","name":"platform.open","input":{"text":"README"}}`))
	ack, ok := reply.Msg.(*protocol.Ack)
	if !ok || ack.CallID == "" {
		t.Fatalf("reply %s, want an ack with a callId", jsonOf(t, reply.Msg))
	}
	req, _ := waitFor(t, sub, func(m *protocol.ApprovalRequested) bool { return m.CallID == ack.CallID })
	if req.Invoker != protocol.AudienceUser {
		t.Errorf("approval_requested invoker %q, want user", req.Invoker)
	}
	reply = s.HandleFrame(session.Client, decodeFrame(t, "2",
		fmt.Sprintf(`{"type":"capability_approve","callId":%q,"decision":"approved","decidedBy":"ada","inputDigest":%q}`, ack.CallID, req.InputDigest)))
	if _, ok := reply.Msg.(*protocol.Ack); !ok {
		t.Fatalf("approve: %s", jsonOf(t, reply.Msg))
	}
	inv, _ := waitFor(t, sub, func(m *protocol.CapabilityInvoked) bool { return m.CallID == ack.CallID })
	if !jsonEqual(inv.Input, []byte(`{"text":"README"}`)) {
		t.Errorf("capability_invoked input %s", inv.Input)
	}
	reply = s.HandleFrame(session.Client, decodeFrame(t, "3",
		fmt.Sprintf(`{"type":"capability_result","callId":%q,"result":{"opened":true}}`, ack.CallID)))
	if _, ok := reply.Msg.(*protocol.Ack); !ok {
		t.Fatalf("result: %s", jsonOf(t, reply.Msg))
	}
	o, seq := waitFor(t, sub, func(m *protocol.CapabilityOutcome) bool { return m.CallID == ack.CallID })
	wantValue(t, o.Outcome, `{"opened":true}`)
	if reply.Seq != seq {
		t.Errorf("the result's reply has seq %d; its outcome event is %d", reply.Seq, seq)
	}
	reply = s.HandleFrame(session.Client, decodeFrame(t, "4",
		fmt.Sprintf(`{"type":"capability_result","callId":%q,"result":{"opened":true}}`, ack.CallID)))
	if er, ok := reply.Msg.(*protocol.ErrorReply); !ok || er.Code != protocol.CodeConflict || reply.Ref != "4" {
		t.Fatalf("second result: %s", jsonOf(t, reply))
	}
}

func TestErrorReply(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		code    protocol.Code
		message string
	}{
		{"plain", errors.New("bad"), protocol.CodeInvalidRequest, "bad"},
		{"protocol error", protocol.Errorf(protocol.CodeNotFound, "no call %q", "c1"), protocol.CodeNotFound, `no call "c1"`},
		{"register error", &session.RegisterError{Name: "x", Code: protocol.CodeConflict, Err: errors.New("taken")}, protocol.CodeConflict, `register "x": taken`},
		{"coded", codedError{"busy", "try later"}, "busy", "try later"},
		{"wrapped protocol error", fmt.Errorf("ctx: %w", protocol.Errorf(protocol.CodeForbidden, "no")), protocol.CodeForbidden, "no"},
		{"context", context.Canceled, protocol.CodeInvalidRequest, "context canceled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := session.ErrorReply(tt.err)
			if got.Code != tt.code || !strings.Contains(got.Message, tt.message) {
				t.Fatalf("ErrorReply = %s, want code %s and message %q", jsonOf(t, got), tt.code, tt.message)
			}
		})
	}
}
