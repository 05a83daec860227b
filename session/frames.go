package session

import (
	"errors"
	"fmt"

	"github.com/brainrt/brain/protocol"
)

// HandleFrame applies one command frame from peer p and returns the reply
// to send back: an ack, or an error naming what was wrong. A command that
// fails changes nothing. The reply carries the frame's id in Ref and the
// session's last seq as of the reply.
//
// Commands: capability_register, capability_deregister, capability_result,
// capability_approve, and the extensions capability_invoke (a user
// invocation, client only: the ack carries the call id and the outcome
// arrives as a capability_outcome event), capability_cancel and
// capability_progress (progress.go). resume is
// the transport's business (see [Session.Subscribe]); messages the kernel
// sends are refused.
func (s *Session) HandleFrame(p Peer, f *protocol.Frame) *protocol.Frame {
	reply := &protocol.Frame{V: protocol.Version, Ref: f.ID}
	var ack *protocol.Ack
	var err error
	switch {
	case f.Msg == nil:
		err = protocol.Errorf(protocol.CodeInvalidRequest, "the frame carries no message")
	case p.Side == SideModel:
		// The model side only lists and invokes the llm audience (MCP, the
		// driver): a frame is a client's, an app's or an operator's.
		err = protocol.Errorf(protocol.CodeForbidden, "the model side sends no frames: it lists and invokes capabilities of the llm audience")
	default:
		ack, err = s.apply(p, f.Msg)
	}
	if err != nil {
		reply.Msg = ErrorReply(err)
	} else {
		reply.Msg = ack
	}
	reply.Seq = s.LastSeq()
	return reply
}

func (s *Session) apply(p Peer, m protocol.Message) (*protocol.Ack, error) {
	switch m := m.(type) {
	case *protocol.CapabilityRegister:
		return &protocol.Ack{}, s.Register(p, m.Capabilities...)
	case *protocol.CapabilityDeregister:
		return &protocol.Ack{}, s.Deregister(p, m.Names...)
	case *protocol.CapabilityResult:
		return &protocol.Ack{}, s.Result(p, m)
	case *protocol.CapabilityApprove:
		return &protocol.Ack{}, s.Approve(p, m)
	case *protocol.CapabilityCancel:
		if p.Side != SideClient && p.Side != SideOperator && p.Side != SideRuntime {
			return nil, protocol.Errorf(protocol.CodeForbidden, "%s may not cancel calls", p)
		}
		return &protocol.Ack{}, s.Cancel(m.CallID, m.Reason)
	case *protocol.CapabilityProgress:
		return &protocol.Ack{}, s.Progress(p, m) // progress.go
	case *protocol.CapabilityInvoke:
		if p.Side != SideClient && p.Side != SideOperator {
			return nil, protocol.Errorf(protocol.CodeForbidden, "only the client or an operator invokes capabilities on a user's behalf, not %s", p)
		}
		id, err := s.Start(protocol.AudienceUser, m.Name, m.Input)
		if err != nil {
			return nil, err
		}
		return &protocol.Ack{CallID: id}, nil
	case *protocol.TurnStart, *protocol.TurnEnd, *protocol.TurnCancel:
		return s.applyTurn(p, m) // turn.go
	case *protocol.Resume:
		return nil, protocol.Errorf(protocol.CodeInvalidRequest, "resume is answered by the connection, not the session")
	default:
		return nil, protocol.Errorf(protocol.CodeInvalidRequest, "%s is sent by the kernel, not to it", m.MessageType())
	}
}

// ErrorReply turns an error into an error reply message, keeping the code
// of errors that carry one (invalid_request otherwise).
func ErrorReply(err error) *protocol.ErrorReply {
	var c protocol.Coder
	code := protocol.CodeInvalidRequest
	if errors.As(err, &c) {
		code = c.ErrorCode()
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return &protocol.ErrorReply{Code: code, Message: pe.Message}
	}
	return &protocol.ErrorReply{Code: code, Message: fmt.Sprint(err)}
}
