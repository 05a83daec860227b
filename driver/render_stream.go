package driver

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	if len(r.secrets) > 0 {
		if ts.redact == nil {
			ts.redact = &streamRedactor{secrets: r.secrets}
		}
		if fragment = ts.redact.write(fragment); fragment == "" {
			return
		}
	}
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
	redact  *streamRedactor       // with secrets: what of the arguments may stream yet
}

// step runs one model step for s: it lets the model's argument deltas
// reach s (see [Request.ToolCallDelta]), and closes the render streams of
// a step that failed, so that no partial props are left without a call.
//
// What the model streams and answers goes through the model's secrets'
// redaction (redact.go) before anything sees it.
func (d *Driver) step(ctx context.Context, s *session.Session, req *Request, onText func(string)) (*Reply, error) {
	req.sess = s
	req.secrets = secretsOf(d.model)
	ctx, stop := d.bound(ctx, req)
	defer stop()
	text := onText
	var rt *streamRedactor
	if len(req.secrets) > 0 {
		rt = &streamRedactor{secrets: req.secrets}
		text = func(piece string) {
			if out := rt.write(piece); out != "" {
				onText(out)
			}
		}
	}
	reply, err := d.model.Step(ctx, req, text)
	if cause := context.Cause(ctx); err != nil && (errors.Is(cause, errStepTimeout) || errors.Is(cause, errIdleTimeout)) {
		err = cause // the step's own bound, named, rather than the transport's "context canceled"
	}
	if rt != nil {
		if out := rt.flush(); out != "" {
			onText(out)
		}
		redactReply(reply, req.secrets)
	}
	if err != nil || ctx.Err() != nil {
		req.closeStreams()
	}
	return reply, err
}

// The errors of a step stopped by its bounds.
var (
	errStepTimeout = errors.New("the model step ran past its step timeout")
	errIdleTimeout = errors.New("the model's stream sent nothing within its idle timeout")
)

// bound returns ctx bounded by the step timeout and the idle timeout,
// which req.Progress starts again; stop releases them.
func (d *Driver) bound(ctx context.Context, req *Request) (context.Context, func()) {
	ctx, cancelStep := context.WithTimeoutCause(ctx, d.opts.StepTimeout, fmt.Errorf("%w (%s)", errStepTimeout, d.opts.StepTimeout))
	ctx, cancel := context.WithCancelCause(ctx)
	idle := fmt.Errorf("%w (%s)", errIdleTimeout, d.opts.IdleTimeout)
	t := time.AfterFunc(d.opts.IdleTimeout, func() { cancel(idle) })
	req.alive = func() { t.Reset(d.opts.IdleTimeout) }
	return ctx, func() {
		t.Stop()
		cancel(nil)
		cancelStep()
		req.alive = nil
	}
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
