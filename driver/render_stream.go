package driver

import (
	"context"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// ToolCallDelta tells the driver that the model is streaming the
// arguments of a tool call: index is the call's position in this step's
// [Reply.ToolCalls], name the tool's name (provider-safe, as offered) as
// far as it has arrived, fragment the next piece of the arguments text. A
// [Model] that streams calls it as pieces arrive, from the goroutine
// running Step, before Step returns; calling it is optional and changes
// nothing in the Reply.
//
// The driver uses it to show a streaming render capability's props while
// the model writes them (a capability with render.streaming true: see
// [session.Session.StreamRender]); for other tools it does nothing.
func (r *Request) ToolCallDelta(index int, name, fragment string) {
	if r.sess == nil || fragment == "" || index < 0 || index >= maxStreamedCalls {
		return
	}
	for len(r.streams) <= index {
		r.streams = append(r.streams, toolStream{})
	}
	ts := &r.streams[index]
	if !ts.decided { // on the call's first fragment: its name came before its arguments
		ts.decided = true
		if n, ok := r.names.capability(name); ok {
			ts.rs, _ = r.sess.StreamRender(protocol.AudienceLLM, n) // not a streaming render capability: no stream
		}
	}
	if ts.rs != nil {
		ts.rs.AppendArguments(fragment)
	}
}

// maxStreamedCalls bounds the tool calls of one step that stream props.
const maxStreamedCalls = 128

// toolStream is one tool call of a step whose arguments are streaming.
type toolStream struct {
	decided bool
	rs      *session.RenderStream // nil unless a streaming render capability
}

// step runs one model step for s: it lets the model's argument deltas
// reach s (see [Request.ToolCallDelta]), and closes the render streams of
// a step that failed, so that no partial props are left without a call.
func (d *Driver) step(ctx context.Context, s *session.Session, req *Request, onText func(string)) (*Reply, error) {
	req.sess = s
	reply, err := d.model.Step(ctx, req, onText)
	if err != nil || ctx.Err() != nil {
		req.closeStreams()
	}
	return reply, err
}

// bindStreams gives each call of the step the render stream its arguments
// streamed into, and closes the streams of calls that will not be invoked
// with them (an unknown tool, arguments that are not JSON, another name).
func (r *Request) bindStreams(calls []pendingCall) {
	for i := range r.streams {
		ts := &r.streams[i]
		if ts.rs == nil {
			continue
		}
		if i < len(calls) && calls[i].known && calls[i].badJSON == nil && calls[i].call.Name == ts.rs.Name() {
			calls[i].stream = ts.rs
		} else {
			ts.rs.Close()
		}
		ts.rs = nil
	}
}

// closeStreams closes the step's render streams not yet bound to a call.
func (r *Request) closeStreams() {
	for i := range r.streams {
		if rs := r.streams[i].rs; rs != nil {
			rs.Close()
			r.streams[i].rs = nil
		}
	}
}
