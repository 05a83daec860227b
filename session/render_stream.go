package session

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/brainrt/brain/internal/jsonvalid"
	"github.com/brainrt/brain/internal/partialjson"
	"github.com/brainrt/brain/protocol"
)

// The bounds of one render stream (docs/protocol.md, "Streamed props").
const (
	// maxPartialRenders is the most partial render_invoked events one call
	// emits.
	maxPartialRenders = 64
	// partialRenderInterval and partialRenderStep set the rate: after the
	// first partial, the next one waits until this much time has passed
	// since the last attempt, or the props grew by partialRenderStep
	// bytes, or by an eighth, whichever is more.
	partialRenderInterval = 50 * time.Millisecond
	partialRenderStep     = 512
	// maxPartialProps bounds the props of one partial event (and the
	// argument text a stream collects): a frame is at most
	// protocol.MaxFrameBytes. A longer text streams no more partials; the
	// final props, at invocation, carry it all.
	maxPartialProps = 256 << 10
	// maxStreamBytes bounds the props of all partials of one call.
	maxStreamBytes = 4 << 20
	// maxOpenStreams bounds the render streams of one session open at
	// once, and with them what partials cost a step of many calls: the
	// argument text each holds and the events it may emit.
	maxOpenStreams = 8
)

type streamState uint8

const (
	streamOpen streamState = iota
	streamInvoked
	streamClosed
)

// RenderStream is a call to a streaming render capability whose input is
// still arriving — the arguments a model is streaming. It reserves the
// call's id; until the call is invoked with [Session.InvokeStreamed] it
// publishes the props as they grow, as render_invoked events with partial
// set, so that a client draws the surface while the model writes it. A
// partial event never starts a call, runs nothing and is not validated
// (the final render_invoked, at dispatch, carries the validated input as
// usual); it is journaled and shown to the same peers as the call's other
// events.
//
// A stream is bounded: at most 64 partials, the next one only 50 ms after
// the last attempt or once the props grew by 512 bytes (or an eighth);
// each at most 256 KiB, 4 MiB in all; props that are not a JSON object
// are dropped, and so is a partial equal to the last one; a session has at
// most 8 streams open. A stream that is never invoked must be closed with
// [RenderStream.Close] (it holds one of those 8 until then). A RenderStream
// is safe for concurrent use.
type RenderStream struct {
	s       *Session
	id      string
	name    string
	invoker protocol.Audience
	reg     *registration // the partials stop if the name is registered again
	owner   Peer

	mu        sync.Mutex
	state     streamState
	args      []byte // argument text appended so far (AppendArguments)
	argsFull  bool   // args passed maxPartialProps: no more partials from it
	events    int    // partials emitted
	bytes     int    // their props, in all
	last      []byte // props of the last partial
	tried     int    // size at the last attempt (see dueLocked)
	triedAt   time.Time
	attempted bool // an attempt has been made
}

// StreamRender reserves a call to the render capability name on behalf of
// invoker, whose props will stream in before the call is made (see
// [RenderStream]). The capability must be registered, visible to invoker,
// a render capability with render.streaming true, and not require approval
// (props are shown only after a decision, with the call's final
// render_invoked), and the session must have fewer than 8 streams open.
// Otherwise StreamRender returns a *protocol.Error — not_found, forbidden,
// invalid_request or quota_exceeded — and nothing changes: the caller
// invokes the capability as usual. Reserving emits nothing.
func (s *Session) StreamRender(invoker protocol.Audience, name string) (*RenderStream, error) {
	switch invoker {
	case protocol.AudienceLLM, protocol.AudienceUser, protocol.AudienceRuntime:
	default:
		return nil, protocol.Errorf(protocol.CodeInvalidRequest, "unknown invoker %q (want llm, user or runtime)", invoker)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.caps[name]
	switch {
	case r == nil:
		return nil, protocol.Errorf(protocol.CodeNotFound, "no capability named %q in this session", name)
	case !Visible(&r.def[0], invoker):
		return nil, protocol.Errorf(protocol.CodeForbidden, "capability %q is not available to the %s", name, invoker)
	case r.def[0].Render == nil || !r.def[0].Render.Streaming:
		return nil, protocol.Errorf(protocol.CodeInvalidRequest, "capability %q does not stream its props (it is not a render capability with render.streaming true)", name)
	case r.def[0].RequiresApproval:
		return nil, protocol.Errorf(protocol.CodeInvalidRequest, "capability %q requires approval: its props are shown once the call is approved, not while they stream", name)
	case s.streams >= maxOpenStreams:
		return nil, protocol.Errorf(protocol.CodeQuotaExceeded, "the session already has %d render streams open, its limit; %q gets its props when it is called", s.streams, name)
	}
	s.streams++
	return &RenderStream{s: s, id: s.nextCallID(), name: name, invoker: invoker, reg: r, owner: r.owner}, nil
}

// CallID returns the id the call will have: the callId of every partial
// render_invoked, of the final one, and of the call's outcome.
func (rs *RenderStream) CallID() string { return rs.id }

// Name returns the capability's name.
func (rs *RenderStream) Name() string { return rs.name }

// Props offers the props as they stand, a best-effort JSON object; it
// reports whether they went out as a partial render_invoked. They are
// dropped when the stream is invoked or closed, a bound is reached, the
// rate says not yet, they are not a JSON object (or not UTF-8), or they
// equal the last partial.
func (rs *RenderStream) Props(partial json.RawMessage) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if !rs.dueLocked(len(partial)) {
		return false
	}
	p := bytes.TrimSpace(partial)
	if !jsonvalid.Valid(p) {
		return false
	}
	return rs.offerLocked(bytes.Clone(p)) // the caller may reuse its buffer
}

// AppendArguments adds a fragment of the call's arguments as the model
// streams them (JSON text, cut anywhere) and, when the rate allows,
// offers the best-effort object that the text so far describes (see
// [partialjson.Complete]) as with [RenderStream.Props]. It reports whether
// a partial went out. Past 256 KiB of text it only stops streaming.
func (rs *RenderStream) AppendArguments(fragment string) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.state != streamOpen || rs.argsFull || fragment == "" {
		return false
	}
	if len(rs.args)+len(fragment) > maxPartialProps {
		rs.argsFull, rs.args = true, nil
		return false
	}
	rs.args = append(rs.args, fragment...)
	if !rs.dueLocked(len(rs.args)) {
		return false
	}
	p := partialjson.Complete(rs.args) // valid JSON (fuzzed), in a slice of its own
	if p == nil {
		return false
	}
	return rs.offerLocked(p)
}

// dueLocked applies the count and rate bounds to an attempt at size bytes,
// and records the attempt when it may go ahead.
func (rs *RenderStream) dueLocked(size int) bool {
	if rs.state != streamOpen || rs.events >= maxPartialRenders {
		return false
	}
	now := time.Now()
	if rs.attempted && now.Sub(rs.triedAt) < partialRenderInterval && size < rs.tried+max(partialRenderStep, rs.tried/8) {
		return false
	}
	rs.attempted, rs.triedAt, rs.tried = true, now, size
	return true
}

// offerLocked emits p, valid JSON that the stream may keep, as a partial
// render_invoked unless a check drops it. (The wire form is compacted when
// the event is encoded.)
func (rs *RenderStream) offerLocked(p []byte) bool {
	if len(p) == 0 || p[0] != '{' || EncodedSize(p) > maxPartialProps || rs.bytes+len(p) > maxStreamBytes ||
		!utf8.Valid(p) || bytes.Equal(p, rs.last) {
		return false
	}
	s := rs.s
	s.mu.Lock()
	if s.caps[rs.name] != rs.reg { // deregistered or registered again since the stream began
		s.mu.Unlock()
		return false
	}
	s.emitLocked(entry{typ: protocol.TypeRenderInvoked, owner: &rs.owner,
		msg: &protocol.RenderInvoked{CapabilityName: rs.name, Props: p, CallID: rs.id, Partial: true}})
	s.mu.Unlock()
	rs.events++
	rs.bytes += len(p)
	rs.last = p
	return true
}

// Close ends a stream that was not invoked: no call is made, and if it
// emitted partials, a capability_outcome with code cancelled tells the
// peers who drew them that the call will not come (it is the only event of
// that call id after its partials; no call was ever pending). Closing an
// invoked or closed stream does nothing.
func (rs *RenderStream) Close() {
	rs.mu.Lock()
	if rs.state != streamOpen {
		rs.mu.Unlock()
		return
	}
	rs.state = streamClosed
	emitted := rs.events > 0
	rs.args = nil
	rs.mu.Unlock()
	rs.release()
	if emitted {
		rs.end(protocol.Fail(protocol.CodeCancelled, "the call to %q was never made: its arguments stopped streaming", rs.name))
	}
}

// release gives back the session's stream slot (once: the caller moved
// the stream out of streamOpen).
func (rs *RenderStream) release() {
	rs.s.mu.Lock()
	rs.s.streams--
	rs.s.mu.Unlock()
}

// end emits the lone capability_outcome of a streamed call that never
// started.
func (rs *RenderStream) end(out protocol.Outcome) {
	s := rs.s
	s.mu.Lock()
	s.rememberFinishedLocked(rs.id, out, nil)
	s.emitLocked(entry{typ: protocol.TypeCapabilityOutcome, owner: &rs.owner,
		msg: &protocol.CapabilityOutcome{CallID: rs.id, Name: rs.name, Outcome: out}})
	s.mu.Unlock()
	s.logDebug("render stream ended without a call", slog.String(keyCall, rs.id), slog.String("name", rs.name))
}

// InvokeStreamed makes the call rs reserved, with its complete input, as
// [Session.Invoke] does for rs's invoker and capability: the call has rs's
// call id, its final render_invoked (the seed's, without partial) follows
// the partials, and no partial follows it. A call refused before it starts
// (not_found, forbidden, invalid_input, …) after partials went out is ended
// by a lone capability_outcome with that error, as [RenderStream.Close]
// does. If the capability was registered again since the stream began
// (another definition, maybe another owner), the call is made to the new
// registration as a new call with an id of its own, and a lone
// capability_outcome cancelled ends the partials' id: a call's events all
// go to one owner. A stream of another session, or one already invoked or
// closed, is invalid_request and changes nothing.
func (s *Session) InvokeStreamed(ctx context.Context, rs *RenderStream, input json.RawMessage) protocol.Outcome {
	if rs == nil || rs.s != s {
		return protocol.Fail(protocol.CodeInvalidRequest, "the render stream belongs to another session")
	}
	rs.mu.Lock()
	if rs.state != streamOpen {
		rs.mu.Unlock()
		return protocol.Fail(protocol.CodeInvalidRequest, "the render stream of call %q was already invoked or closed", rs.id)
	}
	rs.state = streamInvoked
	emitted := rs.events > 0
	rs.args = nil
	rs.mu.Unlock()
	rs.release()
	c, fail := s.start(rs.invoker, rs.name, input, rs)
	if c == nil {
		if emitted {
			rs.end(fail)
		}
		return fail
	}
	if c.id != rs.id && emitted { // made to another registration: a call of its own (see admit)
		rs.end(protocol.Fail(protocol.CodeCancelled, "the call to %q was made as a new call: the capability was registered again while its props streamed", rs.name))
	}
	if s.opts.Observe != nil {
		s.observe(CallStarted, c, func(e CallEvent) CallEvent { e.Context = ctx; return e })
	}
	return s.run(ctx, c)
}
