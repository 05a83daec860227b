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
	byID  map[string]*callRecord
	order []string // ring of ids, oldest first once full
	next  int
}

// callRecord is a call's CallTimes as a session keeps it between reads:
// the points as kinds and Unix nanoseconds (no pointers for the collector
// to follow, 16 bytes a point), made into CallTimes only when asked.
type callRecord struct {
	name      string
	invoker   protocol.Audience
	points    []callPoint
	decision  protocol.Decision
	decidedBy string
	outcome   *protocol.Outcome
}

type callPoint struct {
	kind session.CallEventKind
	at   int64 // Unix nanoseconds
}

func (ct *callTimes) observe(ev session.CallEvent) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	c := ct.byID[ev.CallID]
	if c == nil {
		if ct.byID == nil {
			ct.byID = map[string]*callRecord{}
		}
		if len(ct.order) < maxCallTimes {
			ct.order = append(ct.order, ev.CallID)
		} else {
			delete(ct.byID, ct.order[ct.next])
			ct.order[ct.next] = ev.CallID
			ct.next = (ct.next + 1) % maxCallTimes
		}
		// Started, dispatched, finished: a call without approval fits.
		c = &callRecord{name: ev.Name, invoker: ev.Invoker, points: make([]callPoint, 0, 3)}
		ct.byID[ev.CallID] = c
	}
	c.points = append(c.points, callPoint{ev.Kind, ev.Time.UnixNano()})
	switch ev.Kind {
	case session.ApprovalDecided:
		c.decision, c.decidedBy = ev.Decision, ev.DecidedBy
	case session.CallFinished:
		out := ev.Outcome
		c.outcome = &out
	}
}

func (ct *callTimes) get(id string) (CallTimes, bool) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	c := ct.byID[id]
	if c == nil {
		return CallTimes{}, false
	}
	out := CallTimes{CallID: id, Name: c.name, Invoker: c.invoker, Points: make([]CallPoint, len(c.points)),
		Decision: c.decision, DecidedBy: c.decidedBy, Outcome: c.outcome}
	for i, p := range c.points {
		out.Points[i] = CallPoint{Kind: p.kind.String(), Time: time.Unix(0, p.at).UTC()}
	}
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
