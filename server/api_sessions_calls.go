package server

import (
	"net/http"
	"sync"
	"time"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// maxCallTimes is how many recent calls per session keep their timings.
const maxCallTimes = 1024

// CallTimes is the kernel's record of one call's life, for the console's
// call page: when each point was reached (see [session.CallEventKind]).
type CallTimes struct {
	CallID  string            `json:"callId"`
	Name    string            `json:"name"`
	Invoker protocol.Audience `json:"invoker"`
	Points  []CallPoint       `json:"points"`
	// Decision and DecidedBy (the authenticated peer, then the frame's
	// decidedBy in parentheses) once the approval was decided.
	Decision  protocol.Decision `json:"decision,omitempty"`
	DecidedBy string            `json:"decidedBy,omitempty"`
	Outcome   *protocol.Outcome `json:"outcome,omitempty"`
}

// CallPoint is one point of a call's life.
type CallPoint struct {
	Kind string    `json:"kind"` // call_started, approval_requested, approval_decided, call_dispatched, call_finished
	Time time.Time `json:"time"`
}

// callTimes keeps the timings of a session's latest calls.
type callTimes struct {
	mu    sync.Mutex
	byID  map[string]*CallTimes
	order []string // ring of ids, oldest first once full
	next  int
}

func (ct *callTimes) observe(ev session.CallEvent) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	c := ct.byID[ev.CallID]
	if c == nil {
		if ct.byID == nil {
			ct.byID = map[string]*CallTimes{}
		}
		if len(ct.order) < maxCallTimes {
			ct.order = append(ct.order, ev.CallID)
		} else {
			delete(ct.byID, ct.order[ct.next])
			ct.order[ct.next] = ev.CallID
			ct.next = (ct.next + 1) % maxCallTimes
		}
		c = &CallTimes{CallID: ev.CallID, Name: ev.Name, Invoker: ev.Invoker}
		ct.byID[ev.CallID] = c
	}
	c.Points = append(c.Points, CallPoint{Kind: ev.Kind.String(), Time: ev.Time.UTC()})
	switch ev.Kind {
	case session.ApprovalDecided:
		c.Decision, c.DecidedBy = ev.Decision, ev.DecidedBy
	case session.CallFinished:
		out := ev.Outcome
		c.Outcome = &out
	}
}

func (ct *callTimes) get(id string) (CallTimes, bool) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	c := ct.byID[id]
	if c == nil {
		return CallTimes{}, false
	}
	out := *c
	out.Points = append([]CallPoint(nil), c.Points...)
	return out, true
}

// handleCallTimes is GET /v1/sessions/{id}/calls/{call}: the kernel's
// timings of one of the session's recent calls (operator).
func (srv *Server) handleCallTimes(w http.ResponseWriter, r *http.Request, pr Principal) {
	id := r.PathValue("id")
	s, release, ok := srv.openSession(w, r, id, pr, false)
	if !ok {
		return
	}
	defer release()
	_ = s
	m := srv.opts.Manager
	m.mu.Lock()
	e := m.live[id]
	m.mu.Unlock()
	var c CallTimes
	if e != nil {
		c, ok = e.calls.get(r.PathValue("call"))
	}
	if e == nil || !ok {
		httpError(w, http.StatusNotFound, "not_found", "no recent call "+r.PathValue("call")+" in session "+id)
		return
	}
	writeJSON(w, http.StatusOK, c)
}
