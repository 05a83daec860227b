package server

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// Approval is one pending approval in the inbox across sessions: the
// pending call as a snapshot shows it (every field of
// [protocol.PendingCall], including any the kernel adds, such as the
// digest to echo in capability_approve), with its session and the time it
// was requested.
type Approval struct {
	Session string
	// Since is when the approval was requested; zero when this process did
	// not see the request (a call restored after a restart).
	Since time.Time
	Call  protocol.PendingCall
}

// MarshalJSON flattens the pending call's fields beside session and since.
func (a Approval) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(a.Call)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["session"], _ = json.Marshal(a.Session)
	if !a.Since.IsZero() {
		m["since"], _ = json.Marshal(a.Since.UTC())
	}
	return json.Marshal(m)
}

// inboxEvent is one change of the inbox: an approval added, or one
// removed (decided, timed out, cancelled).
type inboxEvent struct {
	Type    string `json:"type"` // "approval_added" or "approval_removed"
	Session string `json:"session"`
	CallID  string `json:"callId"`
	// Decision and DecidedBy, when an approval_removed is a decision.
	Decision  protocol.Decision `json:"decision,omitempty"`
	DecidedBy string            `json:"decidedBy,omitempty"`
	// Code is the call's outcome code when it ended without a decision.
	Code protocol.Code `json:"code,omitempty"`
}

type inboxKey struct{ session, call string }

// inbox follows the approvals of every live session through the sessions'
// Observe hook, and fans changes out to the open inbox streams. observe
// never blocks: a stream that cannot keep up is told to reload the list.
type inbox struct {
	mu    sync.Mutex
	since map[inboxKey]time.Time
	subs  map[*inboxSub]struct{}
}

type inboxSub struct {
	events chan inboxEvent
	resync chan struct{} // 1-buffered: the stream lost events; send the whole list
}

func newInbox() inbox {
	return inbox{since: map[inboxKey]time.Time{}, subs: map[*inboxSub]struct{}{}}
}

func (ib *inbox) observe(ev session.CallEvent) {
	k := inboxKey{ev.Session, ev.CallID}
	var out inboxEvent
	ib.mu.Lock()
	switch ev.Kind {
	case session.ApprovalRequested:
		ib.since[k] = ev.Time
		out = inboxEvent{Type: "approval_added", Session: ev.Session, CallID: ev.CallID}
	case session.ApprovalDecided:
		delete(ib.since, k)
		out = inboxEvent{Type: "approval_removed", Session: ev.Session, CallID: ev.CallID, Decision: ev.Decision, DecidedBy: ev.DecidedBy}
	case session.CallFinished:
		if _, ok := ib.since[k]; !ok {
			ib.mu.Unlock()
			return
		}
		delete(ib.since, k)
		out = inboxEvent{Type: "approval_removed", Session: ev.Session, CallID: ev.CallID}
		if ev.Outcome.Err != nil {
			out.Code = ev.Outcome.Err.Code
		}
	default:
		ib.mu.Unlock()
		return
	}
	for sub := range ib.subs {
		select {
		case sub.events <- out:
		default:
			select {
			case sub.resync <- struct{}{}:
			default:
			}
		}
	}
	ib.mu.Unlock()
}

func (ib *inbox) subscribe() (*inboxSub, func()) {
	sub := &inboxSub{events: make(chan inboxEvent, 256), resync: make(chan struct{}, 1)}
	ib.mu.Lock()
	ib.subs[sub] = struct{}{}
	ib.mu.Unlock()
	return sub, func() {
		ib.mu.Lock()
		delete(ib.subs, sub)
		ib.mu.Unlock()
	}
}

func (ib *inbox) sinceOf(sessionID, callID string) time.Time {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	return ib.since[inboxKey{sessionID, callID}]
}

// Approvals returns every pending approval of the live sessions, oldest
// first. (A session with a pending call is never hibernated, so every
// pending approval is in a live session, except for sessions of a restarted
// kernel that nothing has woken yet.)
func (m *Manager) Approvals() []Approval {
	var out []Approval
	for _, s := range m.liveSessions() {
		for _, c := range s.Snapshot().PendingCalls {
			if c.State == protocol.CallAwaitingApproval {
				out = append(out, Approval{Session: s.ID(), Since: m.inbox.sinceOf(s.ID(), c.CallID), Call: c})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Approval) int {
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		return strings.Compare(a.Session+"/"+a.Call.CallID, b.Session+"/"+b.Call.CallID)
	})
	return out
}

// approval returns one pending approval, if it is still pending.
func (m *Manager) approval(sessionID, callID string) (Approval, bool) {
	m.mu.Lock()
	e := m.live[sessionID]
	m.mu.Unlock()
	if e == nil {
		return Approval{}, false
	}
	select {
	case <-e.ready:
	default:
		return Approval{}, false
	}
	if e.err != nil {
		return Approval{}, false
	}
	for _, c := range e.s.Snapshot().PendingCalls {
		if c.CallID == callID && c.State == protocol.CallAwaitingApproval {
			return Approval{Session: sessionID, Since: m.inbox.sinceOf(sessionID, callID), Call: c}, true
		}
	}
	return Approval{}, false
}

func (m *Manager) liveSessions() []*session.Session {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*session.Session
	for _, e := range m.live {
		select {
		case <-e.ready:
			if e.err == nil {
				out = append(out, e.s)
			}
		default:
		}
	}
	return out
}

func (srv *Server) handleApprovals(w http.ResponseWriter, _ *http.Request, _ Principal) {
	list := srv.opts.Manager.Approvals()
	if list == nil {
		list = []Approval{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"approvals": list})
}

// handleApprovalsWS is GET /v1/approvals/ws: the inbox as a stream. The
// first message is {"type":"approvals","approvals":[…]}; then
// approval_added (with the approval) and approval_removed as they happen.
// When a call ends before its decision is reported (a fast handler), its
// approval_removed comes twice: as the call ends, then with the decision.
// A stream that falls behind gets a fresh "approvals" list. The stream is
// read-only: decisions go to the session (capability_approve).
func (srv *Server) handleApprovalsWS(w http.ResponseWriter, r *http.Request, _ Principal) {
	if !srv.sameOrListedOrigin(w, r) { // Accept's rule, with brain's words
		return
	}
	r.Host = clientHost(r) // what Accept checks the Origin against, as serveWS does
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: srv.opts.OriginPatterns})
	if err != nil {
		return
	}
	m := srv.opts.Manager
	sub, unsubscribe := m.inbox.subscribe() // before the list: nothing falls between
	defer unsubscribe()
	ctx := conn.CloseRead(r.Context())
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer endWith(connEnd(r.Context()), cancel)() // a console sign-in's or a token's end (conn_end.go)
	write := func(v any) bool {
		b, err := json.Marshal(v)
		if err != nil {
			return false
		}
		// Not under ctx: a write whose context ends drops the connection
		// (coder/websocket), and an end that came during a write (a
		// sign-out, a token removed) must close it with its code and
		// reason, below, once the write is done.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), srv.opts.WriteTimeout)
		defer cancel()
		return conn.Write(wctx, websocket.MessageText, b) == nil
	}
	list := func() bool {
		l := m.Approvals()
		if l == nil {
			l = []Approval{}
		}
		return write(map[string]any{"type": "approvals", "approvals": l})
	}
	if !list() {
		return
	}
	for {
		select {
		case ev := <-sub.events:
			if ev.Type == "approval_added" {
				a, ok := m.approval(ev.Session, ev.CallID)
				if !ok {
					continue // decided already: its removal follows
				}
				if !write(map[string]any{"type": ev.Type, "session": ev.Session, "callId": ev.CallID, "approval": a}) {
					return
				}
				continue
			}
			if !write(ev) {
				return
			}
		case <-sub.resync:
			if !list() {
				return
			}
		case <-ctx.Done():
			if ce, ok := closeCause(context.Cause(ctx)); ok {
				_ = conn.Close(ce.code, ce.reason)
				return
			}
			_ = conn.Close(websocket.StatusNormalClosure, "")
			return
		}
	}
}
