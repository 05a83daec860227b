// Wire types of brain's Protocol v2 capability layer.
//
// The first half is the seed, spec/capabilities.d.ts, with the same names
// and shapes (test/assignable.ts proves that the two are assignable to each
// other). The second half is the frame and every extension of
// docs/protocol.md, whose source of truth is the Go package protocol.

// ---------------------------------------------------------------- seed

/** Who may see and invoke a capability: the LLM, a user surface, or trusted runtime code. */
export type CapabilityAudience = "llm" | "user" | "runtime";

/** Who registered a capability; used for trust enforcement and the `capability:<origin>:<name>` log taxonomy. */
export type CapabilityOrigin =
  | { kind: "framework" }
  | { kind: "client" }
  | { kind: "agent" }
  | { kind: "flow"; flowId: string }
  | { kind: "skill"; skillId: string }
  | { kind: "mcp"; serverId: string }
  | { kind: "connector"; connectorId: string }
  | { kind: "mount"; mountId: string }
  | { kind: "app"; appId: string };

/** Render contract of a capability that draws a UI surface when invoked. */
export type RenderSpec = {
  /** Where the rendered component lives. */
  source: { kind: "web-component"; url: string; tagName: string } | { kind: "iframe"; url: string };
  /** Render placements supported by the component. */
  targets: ("chat" | "preview" | "modal" | "input-extension")[];
  /** Markdown template with `{{prop}}` placeholders for clients without a render layer. */
  fallback?: string;
  /** True when props may be partial during streaming. */
  streaming?: boolean;
  /** Interaction names the rendered component may fire back as state events. */
  interactions?: string[];
};

/** A named, schema-typed entry point that the LLM (or a user, or runtime code) can invoke during a session. */
export type Capability = {
  /** Unique within a session, e.g. `platform.react`. */
  name: string;
  /** Label for user-facing surfaces; falls back to `name`. */
  displayName?: string;
  /** Summary shown to the LLM and to users. */
  description: string;
  /** JSON Schema validating the input. */
  inputSchema: Record<string, unknown>;
  /** Optional JSON Schema of the result. */
  outputSchema?: Record<string, unknown>;
  /** Where the handler runs. */
  side: "client" | "agent" | "app";
  /** Who registered it. */
  origin: CapabilityOrigin;
  /** `turn` capabilities are dropped when the turn ends; default `session`. */
  scope?: "session" | "turn";
  /** The bridge resolves `{}` at once and runs the handler in the background. */
  fireAndForget?: boolean;
  /** A user must approve each call before it is dispatched. */
  requiresApproval?: boolean;
  /** Documentation hint. */
  kind?: "effect" | "render" | "query";
  /** @deprecated Set `audience` instead; honoured by {@link isUserInvokable} when `audience` is absent. */
  userInvokable?: boolean;
  /** Default `["llm", "user"]`. */
  audience?: CapabilityAudience[];
  /** Appended to the system prompt's `<CAPABILITIES>` section. */
  promptFragment?: string;
  /** How long the kernel waits for the result; default 60 000. */
  callTimeoutMs?: number;
  /** Present exactly when this is a render capability. */
  render?: RenderSpec;
};

/** A capability whose `render` is set. */
export type RenderCapability = Capability & {
  render: NonNullable<Capability["render"]>;
};

/** Register capabilities (peer → kernel). */
export type CapabilityRegisterCommand = {
  type: "capability_register";
  capabilities: Capability[];
};

/** Deregister capabilities by name (peer → kernel); unknown names are ignored. */
export type CapabilityDeregisterCommand = {
  type: "capability_deregister";
  names: string[];
};

/** The result of a client-side call (peer → kernel): a value or an error envelope. */
export type CapabilityResultCommand = {
  type: "capability_result";
  /** The `callId` of the {@link CapabilityInvokedEvent}. */
  callId: string;
  /** The value, or an error envelope. */
  result: unknown | { error: string };
};

/** Approve or reject a call that requires approval (peer → kernel). */
export type CapabilityApproveCommand = {
  type: "capability_approve";
  callId: string;
  decision: "approved" | "rejected";
  /** Rationale; on a rejection it reaches the model. */
  feedback?: string;
  /** Who decided (informational; the kernel records the authenticated peer too). */
  decidedBy: string;
  /**
   * Extension: the `inputDigest` of the approval request answered; required
   * to approve. {@link BrainClient.approve} fills it in.
   */
  inputDigest?: string;
};

/** What was registered (kernel → peers). */
export type CapabilityRegisterEvent = {
  type: "capability_register";
  capabilities: Capability[];
};

/** What was deregistered (kernel → peers). */
export type CapabilityDeregisterEvent = {
  type: "capability_deregister";
  names: string[];
};

/** A capability was invoked (kernel → peers); the owning peer answers with {@link CapabilityResultCommand}. */
export type CapabilityInvokedEvent = {
  type: "capability_invoked";
  callId: string;
  name: string;
  /** Already validated against the capability's `inputSchema`. */
  input: unknown;
  invokedBy: "agent";
};

/** A render capability should be drawn (kernel → peers); shares its `callId` with the {@link CapabilityInvokedEvent}. */
export type RenderInvokedEvent = {
  type: "render_invoked";
  capabilityName: string;
  props: unknown;
  callId: string;
};

// ---------------------------------------------------------- extensions

/** The protocol version every frame carries. */
export const PROTOCOL_VERSION = 2;

/** The envelope around exactly one message (docs/protocol.md, "Frames"). */
export type Frame<M extends Message = Message> = {
  /** Always 2. */
  v: 2;
  /** Set by the kernel: an event's place in the session's log, or on a reply the last seq emitted. */
  seq?: number;
  /** A peer's correlation id for a command, echoed as `ref` in the reply. */
  id?: string;
  /** On a reply: the `id` of the command answered. */
  ref?: string;
  msg: M;
};

/** The error codes brain itself produces (docs/protocol.md, "Error codes"; a test keeps the two in step). */
export const ERROR_CODES = [
  "not_found",
  "forbidden",
  "invalid_input",
  "invalid_output",
  "invalid_request",
  "rejected",
  "stale_approval",
  "timeout",
  "cancelled",
  "conflict",
  "path_escape",
  "denied",
  "too_large",
  "quota_exceeded",
  "unavailable",
  "invalid_argument",
  "tool_error",
  "internal",
] as const;

/** An error code: one of {@link ERROR_CODES}, or a tool's own identifier-shaped code (preserved), hence `string`. */
export type ErrorCode = (typeof ERROR_CODES)[number] | (string & {});

/** The error of a failed call or command. */
export type OutcomeError = { code: ErrorCode; message: string };

/** How every call ends: a value, or an error with a code. */
export type Outcome<T = unknown> = { ok: true; value: T } | { ok: false; error: OutcomeError };

/** The error envelope a client-side handler answers with; `code` (extension) must be identifier-shaped to be kept. */
export type ResultErrorEnvelope = { error: string; code?: string };

/** A user invokes a capability, e.g. from a command palette (extension; client → kernel). The ack carries the `callId`. */
export type CapabilityInvokeCommand = {
  type: "capability_invoke";
  name: string;
  input: unknown;
};

/** Cancel one pending call (extension; client → kernel); it ends `cancelled`. */
export type CapabilityCancelCommand = {
  type: "capability_cancel";
  callId: string;
  reason?: string;
};

/**
 * How far a call this peer answers has come (extension; client → kernel).
 * The kernel passes it to the call's invoker if it asked for progress (an
 * MCP caller's `notifications/progress`), journals nothing, and coalesces
 * reports sent faster than every 50 ms. `total` is omitted when unknown.
 */
export type CapabilityProgressCommand = {
  type: "capability_progress";
  callId: string;
  progress: number;
  total?: number;
  message?: string;
};

/** Replay every event after `afterSeq`, then continue live (extension; peer → kernel). */
export type ResumeCommand = {
  type: "resume";
  afterSeq: number;
};

/** A call waits for a {@link CapabilityApproveCommand} (extension; kernel → peers). */
export type ApprovalRequestedEvent = {
  type: "approval_requested";
  callId: string;
  name: string;
  input: unknown;
  invoker: CapabilityAudience;
  /**
   * The digest of the call's input that an approval must echo, when the
   * kernel sends one ("sha256:<hex>"); {@link BrainClient.approve} echoes it by itself.
   */
  inputDigest?: string;
  /** The registration of the capability the request is bound to. */
  revision?: string;
};

/** Who decided an approval, as the kernel authenticated the connection. */
export type Decider = { side: string; name?: string };

/** A decision on an approval request was recorded (extension; kernel → peers). */
export type ApprovalDecidedEvent = {
  type: "approval_decided";
  callId: string;
  name: string;
  decision: "approved" | "rejected";
  /** What the deciding frame claimed. */
  decidedBy: string;
  /** Who the connection authenticated as. */
  decider: Decider;
  feedback?: string;
  inputDigest?: string;
};

/**
 * An approval request can no longer be decided although its call goes on
 * (extension; kernel → peers): a new `approval_requested` for the same call
 * follows.
 */
export type ApprovalWithdrawnEvent = {
  type: "approval_withdrawn";
  callId: string;
  name: string;
  inputDigest?: string;
  code: ErrorCode;
  message: string;
};

/** The terminal outcome of a call (extension; kernel → peers). Every call ends with exactly one. */
export type CapabilityOutcomeEvent = {
  type: "capability_outcome";
  callId: string;
  name: string;
  outcome: Outcome;
};

/** Where a pending call stands, in a {@link SnapshotEvent}. */
export type CallState = "awaiting_approval" | "running";

/** A call that has not finished, in a {@link SnapshotEvent}. */
export type PendingCall = {
  callId: string;
  name: string;
  input: unknown;
  invoker: CapabilityAudience;
  state: CallState;
  /** As in {@link ApprovalRequestedEvent.inputDigest}. */
  inputDigest?: string;
  /** As in {@link ApprovalRequestedEvent.revision}. */
  revision?: string;
};

/** The session's state as of `seq`, sent instead of a replay (extension; kernel → peer). */
export type SnapshotEvent = {
  type: "snapshot";
  seq: number;
  capabilities: Capability[];
  pendingCalls: PendingCall[];
  /** The latest turn and whether it is running; absent before the session's first. */
  turn?: { turn: number; running: boolean };
};

/** A command succeeded (extension; kernel → peer). */
export type AckReply = {
  type: "ack";
  /** Set when the command started a call (`capability_invoke`). */
  callId?: string;
};

/** A command failed and changed nothing (extension; kernel → peer). */
export type ErrorReply = {
  type: "error";
  code: ErrorCode;
  message: string;
};

/** Why a turn ended: the kernel's reasons, or a platform's own identifier-shaped one. */
export type TurnReason = "completed" | "step_limit" | "cancelled" | "error" | "interrupted" | (string & {});

/** Start the next turn, optionally with the user's message (extension; client → kernel). */
export type TurnStartCommand = {
  type: "turn_start";
  message?: string;
};

/** End the current turn, dropping `scope: "turn"` capabilities (extension; client → kernel). */
export type TurnEndCommand = {
  type: "turn_end";
  /** Default `completed`; any identifier-shaped reason but `interrupted`. */
  reason?: TurnReason;
};

/** Cancel the running turn (extension; client → kernel). */
export type TurnCancelCommand = {
  type: "turn_cancel";
  reason?: string;
};

/** A turn began (extension; kernel → peers). */
export type TurnStartedEvent = {
  type: "turn_started";
  turn: number;
  message?: string;
  startedBy?: string;
};

/** A turn ended (extension; kernel → peers). */
export type TurnEndedEvent = {
  type: "turn_ended";
  turn: number;
  reason: TurnReason;
  /** Why, for `error`, `interrupted` and `cancelled`. */
  error?: string;
};

/** One tool call of an assistant message; `name` is the capability's own. */
export type ToolCall = { id: string; name: string; input: unknown };

/** One message of the conversation. */
export type ChatMessage =
  | { role: "user"; text: string }
  | { role: "assistant"; text?: string; toolCalls?: ToolCall[] }
  | { role: "tool"; toolCallId: string; name: string; outcome: Outcome };

/** A message joined the conversation (extension; kernel → peers). */
export type ConversationMessageEvent = {
  type: "conversation_message";
  turn: number;
  message: ChatMessage;
};

/** A piece of assistant text while the model streams (extension; kernel → peers). */
export type AssistantDeltaEvent = {
  type: "assistant_delta";
  turn: number;
  text: string;
};

/** Every message a peer may send. */
export type Command =
  | CapabilityRegisterCommand
  | CapabilityDeregisterCommand
  | CapabilityResultCommand
  | CapabilityApproveCommand
  | CapabilityInvokeCommand
  | CapabilityCancelCommand
  | CapabilityProgressCommand
  | ResumeCommand
  | TurnStartCommand
  | TurnEndCommand
  | TurnCancelCommand;

/** Every event the kernel sends, in the session's log (each with a seq). */
export type Event =
  | CapabilityRegisterEvent
  | CapabilityDeregisterEvent
  | CapabilityInvokedEvent
  | RenderInvokedEvent
  | ApprovalRequestedEvent
  | ApprovalDecidedEvent
  | ApprovalWithdrawnEvent
  | CapabilityOutcomeEvent
  | SnapshotEvent
  | TurnStartedEvent
  | TurnEndedEvent
  | ConversationMessageEvent
  | AssistantDeltaEvent;

/** The kernel's replies to commands. */
export type Reply = AckReply | ErrorReply;

/** Any message a frame can carry. */
export type Message = Command | Event | Reply;

/** The `type` discriminants of {@link Event}. */
export type EventType = Event["type"];

/**
 * Every message type of the protocol, seed and extensions (docs/protocol.md;
 * a test keeps the two in step, and test/assignable.ts keeps this list and
 * {@link Message} in step).
 */
export const MESSAGE_TYPES = [
  "capability_register",
  "capability_deregister",
  "capability_result",
  "capability_approve",
  "capability_invoked",
  "render_invoked",
  "capability_invoke",
  "capability_cancel",
  "capability_progress",
  "approval_requested",
  "approval_decided",
  "approval_withdrawn",
  "capability_outcome",
  "resume",
  "snapshot",
  "ack",
  "error",
  "turn_start",
  "turn_end",
  "turn_cancel",
  "turn_started",
  "turn_ended",
  "conversation_message",
  "assistant_delta",
] as const;
