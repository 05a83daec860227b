package protocol

import "encoding/json"

// Type is a message's `type` discriminant.
type Type string

// Seed message types, from spec/capabilities.d.ts. Register and deregister
// have the same shape in both directions (command and event).
const (
	TypeCapabilityRegister   Type = "capability_register"
	TypeCapabilityDeregister Type = "capability_deregister"
	TypeCapabilityResult     Type = "capability_result"
	TypeCapabilityApprove    Type = "capability_approve"
	TypeCapabilityInvoked    Type = "capability_invoked"
	TypeRenderInvoked        Type = "render_invoked"
)

// Extension message types: ours, documented in docs/protocol.md as
// extensions. They never change a seed message's shape.
const (
	TypeCapabilityInvoke   Type = "capability_invoke"   // peer → kernel: a user invocation
	TypeCapabilityCancel   Type = "capability_cancel"   // peer → kernel: cancel one call
	TypeCapabilityProgress Type = "capability_progress" // peer → kernel: how far a call it answers has come
	TypeApprovalRequested  Type = "approval_requested"  // kernel → peer: show a confirm UI
	TypeApprovalDecided    Type = "approval_decided"    // kernel → peer: who decided an approval, journaled first
	TypeApprovalWithdrawn  Type = "approval_withdrawn"  // kernel → peer: an approval request that can no longer be decided
	TypeCapabilityOutcome  Type = "capability_outcome"  // kernel → peer: a call's terminal outcome
	TypeResume             Type = "resume"              // peer → kernel: replay after a seq
	TypeSnapshot           Type = "snapshot"            // kernel → peer: state when replay is impossible
	TypeAck                Type = "ack"                 // kernel → peer: reply to a command
	TypeError              Type = "error"               // kernel → peer: reply to a command that failed
)

// Message is one message carried by a [Frame]: a seed message or an
// extension.
type Message interface {
	MessageType() Type
}

// CapabilityRegister registers capabilities (client → agent as a command;
// agent → client as an event).
type CapabilityRegister struct {
	Capabilities []Capability `json:"capabilities"`
}

// CapabilityDeregister removes capabilities by name, in either direction.
// Unknown names are ignored.
type CapabilityDeregister struct {
	Names []string `json:"names"`
}

// CapabilityResult returns the result of a client- or app-side call. Result
// is the value, or an error envelope {"error": "..."} (see [ResultError]).
type CapabilityResult struct {
	CallID string          `json:"callId"`
	Result json.RawMessage `json:"result"`
}

// Decision is a user's answer to an approval request.
type Decision string

// The decisions of the spec.
const (
	DecisionApproved Decision = "approved"
	DecisionRejected Decision = "rejected"
)

// CapabilityApprove approves or rejects a call that requires approval.
//
// InputDigest (extension) echoes the inputDigest of the approval_requested
// being answered: it is required to approve, and a decision whose digest is
// not the pending request's is refused (code stale_approval). A rejection
// may omit it.
type CapabilityApprove struct {
	CallID      string   `json:"callId"`
	Decision    Decision `json:"decision"`
	Feedback    string   `json:"feedback,omitempty"`
	DecidedBy   string   `json:"decidedBy"`
	InputDigest string   `json:"inputDigest,omitempty"`
}

// InvokedByAgent is the only value of CapabilityInvoked.InvokedBy in the seed.
const InvokedByAgent = "agent"

// CapabilityInvoked tells peers that a capability was invoked; for client-
// and app-side capabilities the owning peer runs the handler and answers
// with [CapabilityResult].
type CapabilityInvoked struct {
	CallID    string          `json:"callId"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	InvokedBy string          `json:"invokedBy"`
}

// RenderInvoked asks the client to draw a render capability; it shares its
// CallID with the matching CapabilityInvoked.
//
// Partial (extension) marks props a model is still streaming, for a
// capability whose render.streaming is true: best-effort JSON, not
// validated, emitted before the call starts (docs/protocol.md, "Streamed
// props"). The seed's render_invoked, at dispatch, never sets it.
type RenderInvoked struct {
	CapabilityName string          `json:"capabilityName"`
	Props          json.RawMessage `json:"props"`
	CallID         string          `json:"callId"`
	Partial        bool            `json:"partial,omitempty"`
}

// CapabilityInvoke (extension) invokes a capability from a peer: a user
// acting through a command palette. The kernel answers with an ack naming
// the call id in CallID; the result arrives as a capability_outcome event.
type CapabilityInvoke struct {
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// CapabilityCancel (extension) cancels one pending call; it ends with a
// cancelled outcome. Cancelling a finished or unknown call is an error reply.
type CapabilityCancel struct {
	CallID string `json:"callId"`
	Reason string `json:"reason,omitempty"`
}

// CapabilityProgress (extension) reports how far a call has come, from the
// peer that answers it (a client or app handling a capability_invoked).
// The kernel passes it to the call's invoker when the invoker asked for
// progress (an MCP caller's progressToken: notifications/progress) and
// journals nothing: progress is a hint, and reports arriving faster than
// the invoker needs are coalesced. Total is 0 when unknown.
type CapabilityProgress struct {
	CallID   string  `json:"callId"`
	Progress float64 `json:"progress"`
	Total    float64 `json:"total,omitempty"`
	Message  string  `json:"message,omitempty"`
}

// ApprovalRequested (extension) tells peers that a call waits for a
// capability_approve, so a client knows to show its confirm UI.
//
// InputDigest, "sha256:<hex>", binds the request to exactly this input and
// this registration of the capability (Revision): an approving
// capability_approve must echo it. Both are omitted only in events journaled
// before they existed.
//
// Detached says that nobody waits in the kernel for the call's outcome: it
// reaches its invoker as a capability_outcome event (a capability_invoke);
// otherwise a caller waits in the kernel (an MCP request, the model loop),
// and a call restored after a restart or a handover, whose caller went
// with the kernel that had it, ends cancelled once approved.
type ApprovalRequested struct {
	CallID      string          `json:"callId"`
	Name        string          `json:"name"`
	Input       json.RawMessage `json:"input"`
	Invoker     Audience        `json:"invoker"`
	InputDigest string          `json:"inputDigest,omitempty"`
	Revision    string          `json:"revision,omitempty"`
	Detached    bool            `json:"detached,omitempty"`
}

// Decider is who decided an approval, as the kernel authenticated the
// connection: its side ("client", "operator", "runtime") and the name of
// its credentials, when they have one.
type Decider struct {
	Side string `json:"side"`
	Name string `json:"name,omitempty"`
}

// ApprovalDecided (extension) records a decision on an approval request. It
// is journaled before the decision takes effect, and a call has at most one.
// DecidedBy is what the deciding frame claimed; Decider is who the
// connection authenticated as.
type ApprovalDecided struct {
	CallID      string   `json:"callId"`
	Name        string   `json:"name"`
	Decision    Decision `json:"decision"`
	DecidedBy   string   `json:"decidedBy"`
	Decider     Decider  `json:"decider"`
	Feedback    string   `json:"feedback,omitempty"`
	InputDigest string   `json:"inputDigest,omitempty"`
}

// ApprovalWithdrawn (extension) ends an approval request that can no longer
// be decided, although its call goes on: the capability was re-registered
// with a different definition, and a new approval_requested for the same
// call follows. A decision echoing the withdrawn request's digest is
// refused.
type ApprovalWithdrawn struct {
	CallID      string `json:"callId"`
	Name        string `json:"name"`
	InputDigest string `json:"inputDigest,omitempty"`
	Code        Code   `json:"code"`
	Message     string `json:"message"`
}

// CapabilityOutcome (extension) is the terminal outcome of one call. Every
// call, whatever its side, ends with exactly one.
type CapabilityOutcome struct {
	CallID  string  `json:"callId"`
	Name    string  `json:"name"`
	Outcome Outcome `json:"outcome"`
}

// Resume (extension) asks for every event after AfterSeq, then the live
// stream. 0 means from the beginning.
type Resume struct {
	AfterSeq uint64 `json:"afterSeq"`
}

// CallState is where a pending call stands.
type CallState string

// The states of a pending call.
const (
	CallAwaitingApproval CallState = "awaiting_approval"
	CallRunning          CallState = "running"
)

// PendingCall describes a call that has not finished, in a [Snapshot].
//
// InputDigest and Revision are those of the call's approval request, for a
// call awaiting approval.
type PendingCall struct {
	CallID      string          `json:"callId"`
	Name        string          `json:"name"`
	Input       json.RawMessage `json:"input"`
	Invoker     Audience        `json:"invoker"`
	State       CallState       `json:"state"`
	InputDigest string          `json:"inputDigest,omitempty"`
	Revision    string          `json:"revision,omitempty"`
}

// Snapshot (extension) is the session's state as of Seq, sent instead of a
// replay when a subscriber is too far behind: every registration, every
// pending call (pending approvals are the calls in state awaiting_approval)
// and the current turn (nil before the session's first). The live stream
// continues after Seq.
type Snapshot struct {
	Seq          uint64        `json:"seq"`
	Capabilities []Capability  `json:"capabilities"`
	PendingCalls []PendingCall `json:"pendingCalls"`
	Turn         *SnapshotTurn `json:"turn,omitempty"`
}

// SnapshotTurn is the session's latest turn in a [Snapshot]: its number
// and whether it is still running (its turn_ended has not been emitted).
type SnapshotTurn struct {
	Turn    int  `json:"turn"`
	Running bool `json:"running"`
}

// Ack (extension) answers a peer command that succeeded. CallID is set when
// the command started a call (capability_invoke).
type Ack struct {
	CallID string `json:"callId,omitempty"`
}

// ErrorReply (extension) answers a peer command that failed, or reports a
// frame that could not be decoded.
type ErrorReply struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
}

func (*CapabilityRegister) MessageType() Type   { return TypeCapabilityRegister }
func (*CapabilityDeregister) MessageType() Type { return TypeCapabilityDeregister }
func (*CapabilityResult) MessageType() Type     { return TypeCapabilityResult }
func (*CapabilityApprove) MessageType() Type    { return TypeCapabilityApprove }
func (*CapabilityInvoked) MessageType() Type    { return TypeCapabilityInvoked }
func (*RenderInvoked) MessageType() Type        { return TypeRenderInvoked }
func (*CapabilityInvoke) MessageType() Type     { return TypeCapabilityInvoke }
func (*CapabilityCancel) MessageType() Type     { return TypeCapabilityCancel }
func (*CapabilityProgress) MessageType() Type   { return TypeCapabilityProgress }
func (*ApprovalRequested) MessageType() Type    { return TypeApprovalRequested }
func (*ApprovalDecided) MessageType() Type      { return TypeApprovalDecided }
func (*ApprovalWithdrawn) MessageType() Type    { return TypeApprovalWithdrawn }
func (*CapabilityOutcome) MessageType() Type    { return TypeCapabilityOutcome }
func (*Resume) MessageType() Type               { return TypeResume }
func (*Snapshot) MessageType() Type             { return TypeSnapshot }
func (*Ack) MessageType() Type                  { return TypeAck }
func (*ErrorReply) MessageType() Type           { return TypeError }
