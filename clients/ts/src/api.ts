import type { Capability, CapabilityAudience, Event, RenderCapability } from "./types.js";

// The shapes of the client's API: its options and what it hands to a host.

/**
 * WebSocketLike is the part of the WHATWG WebSocket the client uses: the
 * browser's native WebSocket and the `ws` package's both fit.
 */
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((ev: any) => void) | null;
  onmessage: ((ev: any) => void) | null;
  onclose: ((ev: any) => void) | null;
  onerror: ((ev: any) => void) | null;
}

/** A WebSocket constructor: `globalThis.WebSocket`, or `WebSocket` from the `ws` package. */
export type WebSocketConstructor = new (url: string, options?: any) => WebSocketLike;

/** Options of a {@link BrainClient}. */
export interface ClientOptions {
  /** The kernel's base URL, e.g. `http://127.0.0.1:7777` (http, https, ws or wss). */
  url: string;
  /** A client token (`tokens.json` of `brain serve`). It travels as `?token=`, since browsers cannot set headers on a WebSocket. */
  token: string;
  /** The session id: 1–128 of `A-Z a-z 0-9 _ -`. */
  session: string;
  /** The WebSocket implementation; default `globalThis.WebSocket` (browsers, Node 22+). On Node 20 pass `ws`. */
  WebSocket?: WebSocketConstructor;
  /**
   * How the token travels: `"query"` (default; `?token=`, the only way a
   * browser's WebSocket can send it) or `"header"` (`Authorization: Bearer`,
   * which keeps it out of URLs that proxies log; needs an implementation
   * taking `new WebSocket(url, { headers })`, as `ws` does).
   */
  auth?: "query" | "header";
  /**
   * Start after this seq (a position the host stored): the kernel replays
   * what came after it. Default: start from a snapshot of the session.
   */
  afterSeq?: number;
  /**
   * Reconnect delays: full jitter over an exponential backoff from
   * `initialDelayMs` (default 100) to `maxDelayMs` (default 2000, well
   * inside the kernel's 5 s grace for calls to a peer that left).
   */
  reconnect?: { initialDelayMs?: number; maxDelayMs?: number };
  /** The `decidedBy` of {@link BrainClient.approve} when it is not given; default `"user"`. */
  decidedBy?: string;
  /** How many values an iterator buffers for a slow consumer before it fails with `too_large`; default 10 000. */
  maxBuffered?: number;
}

/** One event of the session's log, with its seq. */
export interface BrainEvent {
  readonly seq: number;
  readonly msg: Event;
}

/** Options of a decision. */
export interface Decision {
  decision: "approved" | "rejected";
  /** Why; a rejection's feedback reaches the model. */
  feedback?: string;
  /** Who decided; default {@link ClientOptions.decidedBy}. */
  decidedBy?: string;
}

/** A call waiting for a decision: show a confirm UI, then call approve or reject. */
export interface ApprovalRequest {
  readonly callId: string;
  readonly name: string;
  readonly input: unknown;
  /** Who invoked the call: `llm`, `user` or `runtime`. */
  readonly invoker: CapabilityAudience;
  /** The digest an approval echoes (the client does it). */
  readonly inputDigest?: string;
  /** The capability, as the client last saw it registered. */
  readonly capability?: Capability;
  /** The seq of the event (or snapshot) that announced it. */
  readonly seq: number;
  approve(opts?: { feedback?: string; decidedBy?: string }): Promise<void>;
  reject(feedback?: string, opts?: { decidedBy?: string }): Promise<void>;
}

/** A render capability to draw, with the capability (its `render` spec) so a UI can draw it. */
export interface RenderRequest {
  readonly callId: string;
  readonly capabilityName: string;
  readonly props: unknown;
  /**
   * Extension: true while the model is still writing the props (a
   * `render_invoked` with `partial: true`, for a capability with
   * `render.streaming`): best-effort, not validated; draw it, never act on
   * it. The call's final request, with the same `callId`, has no `partial`
   * (docs/protocol.md, "Streamed props").
   */
  readonly partial?: true;
  /** The matching capability; undefined only if its registration was never seen. */
  readonly capability?: RenderCapability;
  readonly seq: number;
}

/** The connection's state. */
export type ConnectionState = "connecting" | "open" | "closed";
