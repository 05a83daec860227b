package protocol

import (
	"encoding/json"
	"fmt"
)

// Turn and conversation extension message types (docs/protocol.md,
// "Turns and the conversation"). A turn is one exchange with the model: it
// starts with a user message (or a platform's own signal) and ends with a
// reason. The conversation is the session's record of user messages,
// assistant messages, tool calls and their results.
const (
	TypeTurnStart           Type = "turn_start"           // peer → kernel: start a turn, optionally with a user message
	TypeTurnEnd             Type = "turn_end"             // peer → kernel: end the current turn (a platform running its own model loop)
	TypeTurnCancel          Type = "turn_cancel"          // peer → kernel: cancel the running turn
	TypeTurnStarted         Type = "turn_started"         // kernel → peers: a turn began
	TypeTurnEnded           Type = "turn_ended"           // kernel → peers: a turn ended, with its reason
	TypeConversationMessage Type = "conversation_message" // kernel → peers: a message joined the conversation
	TypeAssistantDelta      Type = "assistant_delta"      // kernel → peers: streamed assistant text
)

// TurnReason says why a turn ended. The kernel's own reasons are the
// constants below; a platform ending its own turn with turn_end may give
// any identifier-shaped reason (see [IsIdentifierCode]).
type TurnReason string

// The reasons a turn ends.
const (
	// TurnCompleted: the model answered without tool calls (or a platform
	// ended its turn).
	TurnCompleted TurnReason = "completed"
	// TurnStepLimit: the driver's step limit was reached.
	TurnStepLimit TurnReason = "step_limit"
	// TurnCancelled: a peer or the Go API cancelled the turn.
	TurnCancelled TurnReason = "cancelled"
	// TurnError: the model could not be reached or answered badly; the
	// turn_ended event's error says what happened.
	TurnError TurnReason = "error"
	// TurnInterrupted: the kernel stopped (was killed or restarted) during
	// the turn; the turn was ended when the session was restored.
	TurnInterrupted TurnReason = "interrupted"
)

// TurnStart (extension, command) starts a turn. Message, when set, is the
// user's message: it joins the conversation, and a kernel with a model
// driver runs the turn. Without a driver the turn stays open until a
// turn_end. Starting a turn while one is running is a conflict.
type TurnStart struct {
	Message string `json:"message,omitempty"`
}

// TurnEnd (extension, command) ends the current turn with Reason (default
// "completed"), dropping scope "turn" capabilities. Sent without a turn
// having been started, it ends an implicit one: a platform that runs its
// own model loop may send only turn_end.
type TurnEnd struct {
	Reason TurnReason `json:"reason,omitempty"`
}

// TurnCancel (extension, command) cancels the running turn: a driver stops
// streaming, its pending tool calls end cancelled, and the turn ends with
// reason "cancelled". With no turn running it is a conflict.
type TurnCancel struct {
	Reason string `json:"reason,omitempty"`
}

// TurnStarted (extension, event) says that turn Turn began, StartedBy whom,
// with the user's Message if there was one.
type TurnStarted struct {
	Turn      int    `json:"turn"`
	Message   string `json:"message,omitempty"`
	StartedBy string `json:"startedBy,omitempty"`
}

// TurnEnded (extension, event) says that turn Turn ended, and why. Error
// explains reasons "error", "interrupted" and "cancelled".
type TurnEnded struct {
	Turn   int        `json:"turn"`
	Reason TurnReason `json:"reason"`
	Error  string     `json:"error,omitempty"`
}

// Role is who a conversation message is from.
type Role string

// The roles of the conversation.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	// RoleTool is the result of one tool call, answering the assistant
	// message that made it.
	RoleTool Role = "tool"
)

// ToolCall is one tool call an assistant message makes. Name is the
// capability's name as registered (not a provider's mapped name); Input is
// the arguments as JSON — when the model produced text that is not JSON,
// Input is that text as a JSON string, and the call's outcome is
// invalid_input.
type ToolCall struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// ChatMessage is one message of the conversation:
//
//	{"role":"user","text":"what is in notes.txt?"}
//	{"role":"assistant","text":"Let me look.","toolCalls":[{"id":"call_1","name":"fs.read","input":{"path":"notes.txt"}}],"usage":{"inputTokens":812,"outputTokens":24},"durationMs":640}
//	{"role":"tool","toolCallId":"call_1","name":"fs.read","outcome":{"ok":true,"value":{"text":"…"}},"durationMs":3}
//
// Usage and DurationMs (extensions) say what a message cost; they are
// never sent to a model.
type ChatMessage struct {
	Role       Role       `json:"role"`
	Text       string     `json:"text,omitempty"`
	ToolCalls  []ToolCall `json:"toolCalls,omitempty"`
	ToolCallID string     `json:"toolCallId,omitempty"`
	Name       string     `json:"name,omitempty"`
	Outcome    *Outcome   `json:"outcome,omitempty"`
	// Usage is the token usage the provider reported for the model step
	// that produced an assistant message; nil when it reported none.
	Usage *Usage `json:"usage,omitempty"`
	// DurationMs is how long the message took, in milliseconds: for an
	// assistant message its model step (from the request to the end of
	// the answer), for a tool message its call (from the invocation to
	// the outcome); 0 when unknown.
	DurationMs int64 `json:"durationMs,omitempty"`
}

// Usage is the token usage one model step reported (OpenAI's
// prompt_tokens and completion_tokens; Anthropic's input_tokens, with the
// cache's, and output_tokens).
type Usage struct {
	// InputTokens are the tokens of the request, cached ones included.
	InputTokens int64 `json:"inputTokens"`
	// OutputTokens are the tokens of the answer.
	OutputTokens int64 `json:"outputTokens"`
	// CachedInputTokens are the input tokens read from the provider's
	// prompt cache, when it says.
	CachedInputTokens int64 `json:"cachedInputTokens,omitempty"`
}

// Validate checks the fields a role needs: user text, assistant text or
// tool calls (each with an id, a name and JSON input), a tool result's call
// id, name and outcome.
func (m *ChatMessage) Validate() error {
	switch m.Role {
	case RoleUser:
		if m.Text == "" || len(m.ToolCalls) > 0 || m.ToolCallID != "" || m.Outcome != nil {
			return fmt.Errorf("a user message carries text only")
		}
	case RoleAssistant:
		if m.ToolCallID != "" || m.Outcome != nil {
			return fmt.Errorf("an assistant message carries text and tool calls only")
		}
		for i, c := range m.ToolCalls {
			if c.ID == "" || c.Name == "" || !json.Valid(c.Input) {
				return fmt.Errorf("toolCalls[%d]: needs an id, a name and JSON input", i)
			}
		}
	case RoleTool:
		if m.ToolCallID == "" || m.Name == "" || m.Outcome == nil {
			return fmt.Errorf("a tool message needs toolCallId, name and outcome")
		}
	default:
		return fmt.Errorf("role %q is not user, assistant or tool", m.Role)
	}
	return nil
}

// ConversationMessage (extension, event) adds Message to the conversation
// during turn Turn. Every message of the conversation is one of these, in
// order: replaying them rebuilds the conversation.
type ConversationMessage struct {
	Turn    int         `json:"turn"`
	Message ChatMessage `json:"message"`
}

// AssistantDelta (extension, event) is a piece of assistant text while the
// model streams it; the whole text follows as a conversation_message.
type AssistantDelta struct {
	Turn int    `json:"turn"`
	Text string `json:"text"`
}

func (*TurnStart) MessageType() Type           { return TypeTurnStart }
func (*TurnEnd) MessageType() Type             { return TypeTurnEnd }
func (*TurnCancel) MessageType() Type          { return TypeTurnCancel }
func (*TurnStarted) MessageType() Type         { return TypeTurnStarted }
func (*TurnEnded) MessageType() Type           { return TypeTurnEnded }
func (*ConversationMessage) MessageType() Type { return TypeConversationMessage }
func (*AssistantDelta) MessageType() Type      { return TypeAssistantDelta }
