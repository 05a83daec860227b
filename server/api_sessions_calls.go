package server

import (
	"encoding/binary"
	"net/http"
	"sync"
	"time"

	"github.com/brainrt/brain/internal/textcut"
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
	// OutcomeBytes is the size of an outcome's value too large to be kept
	// here (over maxKeptText; Outcome is then absent): the value is in the
	// session's capability_outcome event.
	OutcomeBytes int `json:"outcomeBytes,omitempty"`
}

// maxKeptText bounds what a call's record keeps of each text a peer
// chose — its outcome's value or error message, its decision's
// decidedBy; a longer message or decidedBy is cut (textcut), a longer
// value left out with its size (OutcomeBytes). The whole of each is in
// the session's events, where the console reads it; without the bound a
// session's latest 1,024 records held every result in full, up to its
// journal's 64 MiB.
const maxKeptText = 256

// CallPoint is one point of a call's life.
type CallPoint struct {
	Kind string    `json:"kind"` // call_started, approval_requested, approval_decided, call_dispatched, call_finished
	Time time.Time `json:"time"`
}

// callTimes keeps the timings of a session's latest calls. A call being
// made has a record of its own; once it finishes, its record is encoded
// (appendCall) and appended to a chunk of a few KiB that holds others
// one after another — bytes without pointers, about 60–100 a call, about
// 30 once the chunk is full and compressed — and the oldest
// chunk goes once the others hold maxCallTimes calls: a busy session
// keeps its latest 1,024 calls, and the console reads one now and then.
type callTimes struct {
	mu     sync.Mutex
	live   map[string]*callRecord // calls not finished
	chunks []callChunk            // finished calls, encoded; oldest first; all but the last packed (calltimes_pack.go)
	total  int                    // the calls in chunks
	base   int64                  // Unix ns of the first point observed: the encoded points' origin
}

// callChunkBytes is a chunk's size (a call larger than it has one of its
// own); a session's first chunk starts at firstCallChunkBytes and grows
// to it.
const (
	callChunkBytes      = 4 << 10
	firstCallChunkBytes = 256
)

// scratch lends callTimes the buffer a call is encoded into before it is
// copied into its chunk (at its exact size, which its length before it
// needs).
var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// callRecord is a call's CallTimes as a session keeps it while the call
// is made: the points as kinds and Unix nanoseconds.
type callRecord struct {
	id           string
	name         string
	invoker      protocol.Audience
	points       []callPoint
	decision     protocol.Decision
	decidedBy    string
	outcome      *protocol.Outcome
	outcomeBytes int // a value left out (CallTimes.OutcomeBytes)
}

type callPoint struct {
	kind session.CallEventKind
	at   int64 // Unix nanoseconds
}

func (ct *callTimes) observe(ev session.CallEvent) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	c := ct.live[ev.CallID]
	if c == nil {
		if len(ct.live) >= maxCallTimes {
			return // calls that never finish (their session moved): no more records
		}
		if ct.live == nil {
			ct.live = map[string]*callRecord{}
		}
		// Started, dispatched, finished: a call without approval fits.
		c = &callRecord{id: ev.CallID, name: ev.Name, invoker: ev.Invoker, points: make([]callPoint, 0, 3)}
		ct.live[ev.CallID] = c
	}
	c.points = append(c.points, callPoint{ev.Kind, ev.Time.UnixNano()})
	switch ev.Kind {
	case session.ApprovalDecided:
		c.decision, c.decidedBy = ev.Decision, textcut.Cut(ev.DecidedBy, maxKeptText)
	case session.CallFinished:
		c.outcome, c.outcomeBytes = keptOutcome(ev.Outcome)
		delete(ct.live, c.id)
		ct.keep(c)
	}
}

// keptOutcome is what a call's record keeps of its outcome (maxKeptText).
func keptOutcome(out protocol.Outcome) (kept *protocol.Outcome, leftOut int) {
	switch {
	case out.Err != nil:
		return &protocol.Outcome{Err: &protocol.Error{Code: out.Err.Code, Message: textcut.Cut(out.Err.Message, maxKeptText)}}, 0
	case len(out.Value) > maxKeptText:
		return nil, len(out.Value)
	}
	return &out, 0
}

// keep encodes a finished call into the newest chunk, and lets the oldest
// chunk go once the others hold maxCallTimes calls.
func (ct *callTimes) keep(c *callRecord) {
	if ct.base == 0 && len(c.points) > 0 {
		ct.base = c.points[0].at
	}
	buf := scratch.Get().(*[]byte)
	rec := appendCall((*buf)[:0], c, ct.base)
	defer func() {
		if cap(rec) <= callChunkBytes { // a large outcome's buffer is not kept
			*buf = rec[:0]
			scratch.Put(buf)
		}
	}()
	need := binary.MaxVarintLen64 + len(rec)
	n := len(ct.chunks)
	switch {
	case n == 0:
		ct.chunks = append(ct.chunks, callChunk{b: make([]byte, 0, max(firstCallChunkBytes, need))})
		n++
	case len(ct.chunks[n-1].b)+need <= cap(ct.chunks[n-1].b):
	case cap(ct.chunks[n-1].b) < callChunkBytes:
		// A session's first chunk grows to callChunkBytes: one that made a
		// few calls holds a few hundred bytes.
		last := ct.chunks[n-1].b
		ct.chunks[n-1].b = append(make([]byte, 0, max(min(2*cap(last), callChunkBytes), len(last)+need)), last...)
	default:
		ct.chunks[n-1].pack()
		ct.chunks = append(ct.chunks, callChunk{b: make([]byte, 0, max(callChunkBytes, need))})
		n++
	}
	last := &ct.chunks[n-1]
	last.b = append(binary.AppendUvarint(last.b, uint64(len(rec))), rec...)
	last.calls++
	ct.total++
	for len(ct.chunks) > 1 && ct.total-ct.chunks[0].calls >= maxCallTimes {
		ct.total -= ct.chunks[0].calls
		ct.chunks[0] = callChunk{}
		ct.chunks = ct.chunks[1:]
	}
}

func (ct *callTimes) get(id string) (CallTimes, bool) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if c := ct.live[id]; c != nil {
		return c.times(), true
	}
	buf := scratch.Get().(*[]byte)
	defer func() {
		if cap(*buf) <= 2*callChunkBytes {
			scratch.Put(buf)
		}
	}()
	for i := len(ct.chunks) - 1; i >= 0; i-- { // the latest first; an id is one call's
		b, err := ct.chunks[i].records(*buf)
		if err != nil {
			continue // not this process's bytes: its calls are not kept (a bug)
		}
		if ct.chunks[i].packed {
			*buf = b[:0]
		}
		for len(b) > 0 {
			n, k := binary.Uvarint(b)
			rec := b[k : k+int(n)]
			if isCall(rec, id) {
				return decodeCall(rec, ct.base).times(), true
			}
			b = b[k+int(n):]
		}
	}
	return CallTimes{}, false
}

// times returns the record as the API shows it.
func (c *callRecord) times() CallTimes {
	out := CallTimes{CallID: c.id, Name: c.name, Invoker: c.invoker, Points: make([]CallPoint, len(c.points)),
		Decision: c.decision, DecidedBy: c.decidedBy, Outcome: c.outcome, OutcomeBytes: c.outcomeBytes}
	for i, p := range c.points {
		out.Points[i] = CallPoint{Kind: p.kind.String(), Time: time.Unix(0, p.at).UTC()}
	}
	return out
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
