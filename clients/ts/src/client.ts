import { isRenderCapability, isUserInvokable } from "./capability.js";
import { errorEnvelope, type DefinedCapability } from "./define.js";
import { BrainError } from "./errors.js";
import type {
  ApprovalRequest,
  BrainEvent,
  ClientOptions,
  ConnectionState,
  Decision,
  RenderRequest,
  WebSocketConstructor,
  WebSocketLike,
} from "./api.js";
import { Feed } from "./feed.js";
import type {
  AckReply,
  ApprovalRequestedEvent,
  Capability,
  CapabilityOutcomeEvent,
  CapabilityProgressCommand,
  Command,
  ErrorCode,
  Event,
  Frame,
  Outcome,
  PendingCall,
  RenderInvokedEvent,
  SnapshotEvent,
} from "./types.js";

interface Listeners {
  event: (ev: BrainEvent) => void;
  approval: (req: ApprovalRequest) => void;
  render: (req: RenderRequest) => void;
  state: (state: ConnectionState) => void;
  error: (err: BrainError) => void;
}

interface PendingCommand {
  readonly msg: Command;
  readonly resend: boolean;
  sent: boolean;
  retries: number;
  resolve(ack: AckReply): void;
  reject(err: unknown): void;
}

interface RunningCall {
  readonly ctrl: AbortController;
  readonly fireAndForget: boolean;
  readonly timer: ReturnType<typeof setTimeout>;
}

const OPEN = 1;
const RECENT = 1024;
/** DIAGNOSE_AFTER is how many connections in a row must close before they open for the client to ask the kernel why over HTTP. */
const DIAGNOSE_AFTER = 3;

/**
 * FINAL_CLOSES are the close codes after which the client may not
 * connect again, with the error code each ends it with: 4401, the token
 * was removed from the kernel's tokens.json or its grant changed (the
 * client asks the kernel, and ends only if it refuses the token); 4404,
 * the session was deleted, and a connection never makes it again.
 */
const FINAL_CLOSES: Record<number, ErrorCode> = { 4401: "forbidden", 4404: "not_found" };

const MAX_QUOTA_RETRIES = 8;

/**
 * BrainClient is a host platform's connection to one session of a
 * `brain serve` kernel. It reconnects by itself (exponential backoff with
 * full jitter), resumes from the last seq it saw — dropping any event it
 * already delivered, and handling a `snapshot` when the kernel cannot
 * replay — and settles every command's promise with its `ack` or `error`.
 *
 * ```ts
 * const client = new BrainClient({ url: "http://127.0.0.1:7777", token, session: "demo" });
 * await client.register(react);           // a defineCapability(...)
 * client.on("approval", (req) => showConfirm(req));
 * await client.connect();
 * ```
 *
 * Commands sent while disconnected wait for the next connection.
 * Idempotent ones (register, deregister, result, approve, cancel) that were
 * sent but unanswered when a connection dropped are sent again; an
 * unanswered `invoke` is rejected with `unavailable`, since sending it twice
 * could start two calls. After a reconnect, capabilities this client
 * registered that the kernel no longer has (its snapshot lacks them) are
 * registered again. An idempotent command refused with `quota_exceeded`
 * (the kernel's frame rate limit; nothing was applied) is sent again after
 * a growing pause, up to 8 times, before its promise rejects.
 *
 * A half-open TCP connection (a peer that vanished without a FIN) is not
 * detected by the client itself: browsers expose no WebSocket ping.
 */
export class BrainClient {
  private readonly opts: Required<Omit<ClientOptions, "afterSeq" | "reconnect">> & {
    initialDelayMs: number;
    maxDelayMs: number;
  };
  private ws: WebSocketLike | undefined;
  private wsState: ConnectionState = "closed";
  private closed = false;
  private started = false;
  private attempt = 0;
  private failedOpens = 0; // connections in a row that closed before they opened
  private timer: ReturnType<typeof setTimeout> | undefined;
  private seq: number | undefined;
  private nextID = 0;
  private readonly pending = new Map<string, PendingCommand>();
  private readonly defined = new Map<string, DefinedCapability>();
  private readonly desired = new Set<string>();
  private readonly registry = new Map<string, Capability>();
  private readonly running = new Map<string, RunningCall>();
  private readonly handled = new Set<string>();
  private readonly approvalsByCall = new Map<string, ApprovalRequest>();
  private readonly outcomes = new Map<string, Outcome>();
  private readonly invokes = new Map<string, (o: Outcome) => void>();
  private readonly listeners: { [K in keyof Listeners]: Set<Listeners[K]> } = {
    event: new Set(),
    approval: new Set(),
    render: new Set(),
    state: new Set(),
    error: new Set(),
  };
  private openWaiters: { resolve: () => void; reject: (e: unknown) => void }[] = [];
  /**
   * synced is true once the current connection has the session's state: at
   * open when it resumes after a seq, at its snapshot when it has none.
   */
  private synced = false;
  private dropped = 0;

  constructor(opts: ClientOptions) {
    if (typeof opts?.url !== "string" || !/^(https?|wss?):\/\//.test(opts.url)) {
      throw new TypeError(`BrainClient: url ${JSON.stringify(opts?.url)} is not an http(s) or ws(s) URL`);
    }
    if (typeof opts.token !== "string" || opts.token === "") {
      throw new TypeError("BrainClient: token is required");
    }
    if (typeof opts.session !== "string" || !/^[A-Za-z0-9_-]{1,128}$/.test(opts.session)) {
      throw new TypeError(`BrainClient: session ${JSON.stringify(opts.session)} is not 1 to 128 of A-Z a-z 0-9 _ -`);
    }
    const WS = opts.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    if (WS === undefined) {
      throw new TypeError("BrainClient: no global WebSocket here; pass one (import { WebSocket } from 'ws')");
    }
    if (opts.auth !== undefined && opts.auth !== "query" && opts.auth !== "header") {
      throw new TypeError(`BrainClient: auth ${JSON.stringify(opts.auth)} is not "query" or "header"`);
    }
    if (opts.afterSeq !== undefined && !(Number.isSafeInteger(opts.afterSeq) && opts.afterSeq >= 0)) {
      throw new TypeError(`BrainClient: afterSeq ${opts.afterSeq} is not a seq`);
    }
    this.opts = {
      url: opts.url.replace(/\/+$/, ""),
      token: opts.token,
      session: opts.session,
      WebSocket: WS,
      auth: opts.auth ?? "query",
      decidedBy: opts.decidedBy ?? "user",
      maxBuffered: opts.maxBuffered ?? 10_000,
      initialDelayMs: opts.reconnect?.initialDelayMs ?? 100,
      maxDelayMs: opts.reconnect?.maxDelayMs ?? 2_000,
    };
    this.seq = opts.afterSeq;
  }

  /** The seq of the last event delivered (undefined before the first). Store it to resume a later client with {@link ClientOptions.afterSeq}. */
  get lastSeq(): number | undefined {
    return this.seq;
  }

  /** The connection's state. */
  get state(): ConnectionState {
    return this.wsState;
  }

  /** How many replayed events were dropped as already delivered (duplicates) so far. */
  get duplicatesDropped(): number {
    return this.dropped;
  }

  /**
   * connect opens the connection (once; later calls wait for the same) and
   * resolves when it is open and, on a connection that starts from the
   * session's snapshot (the first one without `afterSeq`), once that
   * snapshot is applied: {@link capabilities} and {@link pendingApprovals}
   * then show the session, and {@link events} started after it sees only
   * what comes next. It keeps retrying until then, the signal aborts or
   * {@link close} is called, which reject it.
   */
  connect(opts?: { signal?: AbortSignal }): Promise<void> {
    if (this.closed) {
      return Promise.reject(new BrainError("cancelled", "the client is closed"));
    }
    if (!this.started) {
      this.started = true;
      this.open();
    }
    if (this.wsState === "open" && this.synced) {
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const w = { resolve, reject };
      this.openWaiters.push(w);
      opts?.signal?.addEventListener(
        "abort",
        () => {
          this.openWaiters = this.openWaiters.filter((x) => x !== w);
          reject(opts.signal?.reason);
        },
        { once: true },
      );
    });
  }

  /**
   * close ends the connection for good: pending commands and iterators end,
   * running handlers' signals fire with `cancelled`.
   */
  close(): void {
    this.end(new BrainError("cancelled", "the client was closed"));
  }

  /** end closes the client for good, ending what waits with err. */
  private end(err: BrainError): void {
    if (this.closed) {
      return;
    }
    this.closed = true;
    clearTimeout(this.timer);
    for (const [id, p] of this.pending) {
      this.pending.delete(id);
      p.reject(err);
    }
    for (const w of this.openWaiters.splice(0)) {
      w.reject(err);
    }
    for (const r of this.running.values()) {
      clearTimeout(r.timer);
      r.ctrl.abort(err);
    }
    this.running.clear();
    for (const resolve of this.invokes.values()) {
      resolve({ ok: false, error: { code: "cancelled", message: err.message } });
    }
    this.invokes.clear();
    const ws = this.ws;
    this.ws = undefined;
    if (ws !== undefined) {
      detach(ws);
      ws.close(1000, "client closed");
    }
    this.setState("closed");
  }

  /**
   * on adds a listener and returns a function that removes it: `event`
   * (every event with its seq), `approval` (a call waits for a decision),
   * `render` (a render capability to draw), `state`, and `error` (a
   * background failure, such as a result the kernel refused).
   */
  on<K extends keyof Listeners>(type: K, fn: Listeners[K]): () => void {
    this.listeners[type].add(fn);
    return () => this.listeners[type].delete(fn);
  }

  /** events iterates over every event from now on, with its seq (snapshots included). */
  events(opts?: { signal?: AbortSignal }): AsyncIterableIterator<BrainEvent> {
    return this.feed("event", opts?.signal);
  }

  /** approvals iterates over approval requests from now on; {@link pendingApprovals} has those already known. */
  approvals(opts?: { signal?: AbortSignal }): AsyncIterableIterator<ApprovalRequest> {
    return this.feed("approval", opts?.signal);
  }

  /** renders iterates over render requests from now on. */
  renders(opts?: { signal?: AbortSignal }): AsyncIterableIterator<RenderRequest> {
    return this.feed("render", opts?.signal);
  }

  private feed<K extends "event" | "approval" | "render">(
    type: K,
    signal?: AbortSignal,
  ): Feed<Parameters<Listeners[K]>[0]> {
    let off = (): void => {};
    const f = new Feed<Parameters<Listeners[K]>[0]>(this.opts.maxBuffered, () => off(), signal);
    off = this.on(type, ((v: Parameters<Listeners[K]>[0]) => f.push(v)) as Listeners[K]);
    return f;
  }

  /** pendingApprovals lists the calls known to wait for a decision. */
  pendingApprovals(): ApprovalRequest[] {
    return [...this.approvalsByCall.values()];
  }

  /** capabilities lists the session's capabilities as the client last saw them. */
  capabilities(): Capability[] {
    return [...this.registry.values()];
  }

  /** userCapabilities lists those a user may invoke (a command palette), by {@link isUserInvokable}. */
  userCapabilities(): Capability[] {
    return this.capabilities().filter(isUserInvokable);
  }

  /**
   * register registers capabilities made with defineCapability (or plain
   * wire capabilities whose calls this client does not answer) and resolves
   * when the kernel acknowledges them; a refusal rejects with the kernel's
   * code. Their handlers then answer every `capability_invoked` for them.
   */
  async register(...caps: (DefinedCapability | Capability)[]): Promise<void> {
    const wire: Capability[] = [];
    for (const c of caps) {
      if ("capability" in c && typeof (c as DefinedCapability).run === "function") {
        wire.push((c as DefinedCapability).capability);
      } else {
        wire.push(c as Capability);
      }
    }
    // Handlers are in place before the kernel can route a call to them.
    const added: [string, DefinedCapability][] = [];
    caps.forEach((c, i) => {
      if ("capability" in c && typeof (c as DefinedCapability).run === "function") {
        added.push([wire[i]!.name, c as DefinedCapability]);
        this.defined.set(wire[i]!.name, c as DefinedCapability);
      }
    });
    try {
      await this.request({ type: "capability_register", capabilities: wire }, true);
    } catch (err) {
      for (const [name, d] of added) {
        if (this.defined.get(name) === d && !this.desired.has(name)) {
          this.defined.delete(name);
        }
      }
      throw err;
    }
    for (const c of wire) {
      if (!added.some(([n]) => n === c.name)) {
        this.defined.delete(c.name);
      }
      this.desired.add(c.name);
      this.registry.set(c.name, c); // acknowledged: the kernel has it (its event may trail the ack)
    }
  }

  /** deregister removes capabilities by name; unknown names are ignored by the kernel. */
  async deregister(...names: string[]): Promise<void> {
    for (const n of names) {
      this.desired.delete(n);
    }
    await this.request({ type: "capability_deregister", names }, true);
    for (const n of names) {
      this.defined.delete(n);
    }
  }

  /**
   * approve decides a call awaiting approval. It echoes the `inputDigest`
   * of the latest request seen for the call, so the decision binds to
   * exactly that input and registration ({@link ApprovalRequest.approve}
   * echoes its own request's). The
   * promise rejects with the kernel's code (`not_found`, `conflict` when
   * already decided, `stale_approval`, `forbidden`).
   */
  async approve(callId: string, d: Decision): Promise<void> {
    if (d.decision !== "approved" && d.decision !== "rejected") {
      throw new TypeError(`approve: decision must be "approved" or "rejected", not ${JSON.stringify(d.decision)}`);
    }
    await this.decide(callId, d, this.approvalsByCall.get(callId)?.inputDigest);
  }

  private async decide(callId: string, d: Decision, digest: string | undefined): Promise<void> {
    await this.request(
      {
        type: "capability_approve",
        callId,
        decision: d.decision,
        decidedBy: d.decidedBy ?? this.opts.decidedBy,
        ...(d.feedback ? { feedback: d.feedback } : {}),
        ...(digest ? { inputDigest: digest } : {}),
      },
      true,
    );
    // The kernel acknowledged the decision: the call waits no more, even if
    // its approval_decided event is still on the way (the ack and the event
    // travel independently).
    this.approvalsByCall.delete(callId);
  }

  /** startTurn starts the next turn, with the user's message when given (a kernel with a model runs it). A running turn is `conflict`. */
  async startTurn(message?: string): Promise<void> {
    await this.request({ type: "turn_start", ...(message ? { message } : {}) }, false);
  }

  /** endTurn ends the current turn (a platform running its own model loop); `scope: "turn"` capabilities are dropped. */
  async endTurn(reason?: string): Promise<void> {
    await this.request({ type: "turn_end", ...(reason ? { reason } : {}) }, false);
  }

  /** cancelTurn cancels the running turn; no running turn is `conflict`. */
  async cancelTurn(reason?: string): Promise<void> {
    await this.request({ type: "turn_cancel", ...(reason ? { reason } : {}) }, false);
  }

  /** cancel cancels one pending call; it ends `cancelled`. */
  async cancel(callId: string, reason?: string): Promise<void> {
    await this.request({ type: "capability_cancel", callId, ...(reason ? { reason } : {}) }, true);
  }

  /**
   * invoke invokes a capability as the user (a command palette) and
   * resolves to its Outcome: a value, or an error with its code — a refusal
   * of the invocation itself (`not_found`, `forbidden`, `invalid_input`)
   * included. Aborting the signal cancels the call. It rejects only when
   * the connection dropped before the kernel answered (`unavailable`: the
   * call may or may not have started) or the client was closed.
   */
  async invoke(name: string, input: unknown, opts?: { signal?: AbortSignal }): Promise<Outcome> {
    let ack: AckReply;
    try {
      ack = await this.request({ type: "capability_invoke", name, input: input ?? {} }, false);
    } catch (err) {
      if (err instanceof BrainError && err.code !== "unavailable" && err.code !== "cancelled") {
        return { ok: false, error: { code: err.code, message: err.message } };
      }
      throw err;
    }
    const callId = ack.callId;
    if (callId === undefined) {
      throw new BrainError("internal", "the kernel acknowledged capability_invoke without a callId");
    }
    const done = this.outcomes.get(callId);
    if (done !== undefined) {
      return done;
    }
    return new Promise((resolve) => {
      this.invokes.set(callId, resolve);
      const signal = opts?.signal;
      if (signal !== undefined) {
        const onAbort = (): void => {
          this.cancel(callId, String(signal.reason ?? "aborted")).catch(() => {});
        };
        if (signal.aborted) {
          onAbort();
        } else {
          signal.addEventListener("abort", onAbort, { once: true });
        }
      }
    });
  }

  // ------------------------------------------------------------ wire

  private request(msg: Command, resend: boolean): Promise<AckReply> {
    if (this.closed) {
      return Promise.reject(new BrainError("cancelled", "the client is closed"));
    }
    const id = `c${++this.nextID}`;
    return new Promise((resolve, reject) => {
      const p: PendingCommand = { msg, resend, sent: false, retries: 0, resolve, reject };
      this.pending.set(id, p);
      this.trySend(id, p);
    });
  }

  private trySend(id: string, p: PendingCommand): void {
    const ws = this.ws;
    if (ws === undefined || this.wsState !== "open" || ws.readyState !== OPEN) {
      return;
    }
    let text: string;
    try {
      text = JSON.stringify({ v: 2, id, msg: p.msg } satisfies Frame);
    } catch (err) {
      this.pending.delete(id);
      p.reject(new BrainError("invalid_request", `${p.msg.type}: not JSON: ${(err as Error).message}`));
      return;
    }
    p.sent = true;
    ws.send(text);
  }

  private open(): void {
    if (this.closed) {
      return;
    }
    const base = this.opts.url.replace(/^http/, "ws");
    const q = new URLSearchParams(this.opts.auth === "query" ? { token: this.opts.token } : {});
    if (this.seq !== undefined) {
      q.set("after", String(this.seq));
    }
    const query = q.toString();
    const url = `${base}/v1/sessions/${encodeURIComponent(this.opts.session)}/ws${query === "" ? "" : "?" + query}`;
    this.setState("connecting");
    let ws: WebSocketLike;
    try {
      ws =
        this.opts.auth === "header"
          ? new this.opts.WebSocket(url, { headers: { Authorization: `Bearer ${this.opts.token}` } })
          : new this.opts.WebSocket(url);
    } catch (err) {
      this.emitError(new BrainError("unavailable", `connect: ${(err as Error).message}`, { cause: err }));
      this.scheduleReconnect();
      return;
    }
    this.ws = ws;
    this.synced = false;
    const resumes = this.seq !== undefined; // else the kernel sends a snapshot first
    ws.onopen = () => {
      if (this.ws !== ws) {
        return;
      }
      this.failedOpens = 0;
      this.setState("open");
      if (resumes) {
        this.markSynced();
      }
      for (const [id, p] of this.pending) {
        if (!p.sent) {
          this.trySend(id, p);
        }
      }
    };
    ws.onmessage = (ev: { data: unknown }) => {
      if (this.ws !== ws) {
        return;
      }
      this.attempt = 0; // a frame arrived: the connection works
      const data = typeof ev.data === "string" ? ev.data : new TextDecoder().decode(ev.data as ArrayBuffer);
      let f: Frame;
      try {
        f = JSON.parse(data) as Frame;
      } catch {
        this.emitError(new BrainError("invalid_request", "the kernel sent a frame that is not JSON"));
        return;
      }
      if (f === null || typeof f !== "object" || f.msg === null || typeof f.msg !== "object") {
        this.emitError(new BrainError("invalid_request", "the kernel sent a frame without a message"));
        return;
      }
      this.onFrame(f);
    };
    ws.onerror = () => {
      // onclose follows, and carries what there is to know.
    };
    ws.onclose = (ev: { code?: number; reason?: string }) => {
      if (this.ws !== ws) {
        return;
      }
      const final = FINAL_CLOSES[ev?.code ?? 0];
      if (final !== undefined && this.wsState === "open") {
        detach(ws);
        this.ws = undefined;
        const err = new BrainError(final, `the kernel ended the connection for good (${ev.code}: ${ev.reason || "no reason given"}); the client is closed`);
        if (ev.code === 4401) {
          // A token's grant changed (its name, tenant or app) or it was
          // removed: only the kernel knows which. Ask it; connect again
          // unless it refuses the token.
          this.setState("connecting");
          void this.askWhy().then((why) => {
            if (this.closed) {
              return;
            }
            if (why?.code === "forbidden") {
              this.emitError(err);
              this.end(err);
            } else {
              this.onDisconnect();
            }
          });
          return;
        }
        // A deleted session is never made again by a connection: the
        // client ends, saying why.
        this.emitError(err);
        this.end(err);
        return;
      }
      if (this.wsState !== "open") {
        // Never opened: a wrong URL or token, or the kernel is down. Say
        // so (a browser tells no more than this), then retry; the third
        // time in a row, ask the kernel why over HTTP (diagnose).
        this.emitError(
          new BrainError("unavailable", `could not connect to ${base}/v1/sessions/${this.opts.session}/ws (close code ${ev?.code ?? "?"}${ev?.reason ? `: ${ev.reason}` : ""})`),
        );
        if (++this.failedOpens === DIAGNOSE_AFTER) {
          void this.diagnose();
        }
      } else if (ev?.code !== undefined && ev.code !== 1000 && ev.code !== 1001 && ev.code !== 1006 && ev.reason) {
        this.emitError(new BrainError("unavailable", `the kernel closed the connection (${ev.code}: ${ev.reason})`));
      }
      detach(ws);
      this.ws = undefined;
      this.onDisconnect();
    };
  }

  /**
   * diagnose asks the kernel over HTTP why connections do not open — a
   * browser hides a refused WebSocket's status (close code 1006) — and
   * says it in an error event: the kernel's own message for a refused
   * token; that the kernel cannot be reached, or (in a browser) does not
   * list this page's origin, when the request fails outright. The client
   * goes on retrying.
   */
  private async diagnose(): Promise<void> {
    const why = await this.askWhy();
    if (why !== undefined && !this.closed && this.wsState !== "open") {
      this.emitError(why);
    }
  }

  /**
   * askWhy asks the kernel over HTTP whether it takes this client's token
   * for its session (diagnose): a BrainError saying why not, or undefined
   * when it does (or fetch is not there to ask with).
   */
  private async askWhy(): Promise<BrainError | undefined> {
    const fetchFn = (globalThis as { fetch?: typeof fetch }).fetch;
    if (fetchFn === undefined) {
      return undefined;
    }
    const http = this.opts.url.replace(/^ws/, "http"); // a ws:// URL names the same kernel over HTTP
    const url = `${http}/v1/sessions/${encodeURIComponent(this.opts.session)}`;
    let why: BrainError | undefined;
    try {
      const res = await fetchFn(url, { headers: { Authorization: `Bearer ${this.opts.token}` } });
      if (res.status === 401 || res.status === 403) {
        let msg = `HTTP ${res.status}`;
        try {
          const body = (await res.json()) as { message?: unknown };
          if (typeof body.message === "string") {
            msg = body.message;
          }
        } catch {
          // no JSON body: the status says it
        }
        why = new BrainError("forbidden", `the kernel refuses this client's token: ${msg}`);
      }
    } catch (err) {
      const page = typeof (globalThis as { document?: unknown }).document !== "undefined";
      why = new BrainError(
        "unavailable",
        `the kernel at ${http} does not answer from here${page ? ", or does not let this page's origin in (browser_origins in its config: its log names refused origins)" : ""}: ${(err as Error).message}`,
      );
    }
    return why;
  }

  /** markSynced settles connect's waiters: the connection has the session's state. */
  private markSynced(): void {
    this.synced = true;
    for (const w of this.openWaiters.splice(0)) {
      w.resolve();
    }
  }

  private onDisconnect(): void {
    const lost = new BrainError(
      "unavailable",
      "the connection closed before the kernel answered; the command may or may not have been applied",
    );
    for (const [id, p] of this.pending) {
      if (!p.sent) {
        continue;
      }
      if (p.resend) {
        p.sent = false;
      } else {
        this.pending.delete(id);
        p.reject(lost);
      }
    }
    if (this.closed) {
      this.setState("closed");
      return;
    }
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    this.setState("connecting");
    const cap = Math.min(this.opts.maxDelayMs, this.opts.initialDelayMs * 2 ** this.attempt);
    this.attempt = Math.min(this.attempt + 1, 30);
    const delay = Math.random() * cap; // full jitter
    this.timer = setTimeout(() => this.open(), delay);
  }

  private onFrame(f: Frame): void {
    const m = f.msg;
    if (m.type === "ack" || m.type === "error") {
      const p = f.ref === undefined ? undefined : this.pending.get(f.ref);
      if (p === undefined) {
        if (m.type === "error") {
          this.emitError(new BrainError(m.code, m.message));
        }
        return;
      }
      if (m.type === "error" && m.code === "quota_exceeded" && p.resend && p.retries < MAX_QUOTA_RETRIES) {
        // The kernel applied nothing (a frame rate limit): an idempotent
        // command goes again after a pause, so a result is not lost.
        p.sent = false;
        const delay = Math.min(1_000, 50 * 2 ** p.retries++) * (0.5 + Math.random() / 2);
        setTimeout(() => {
          if (this.pending.get(f.ref!) === p && !p.sent) {
            this.trySend(f.ref!, p);
          }
        }, delay);
        return;
      }
      this.pending.delete(f.ref!);
      if (m.type === "ack") {
        p.resolve(m);
      } else {
        p.reject(new BrainError(m.code, m.message));
      }
      return;
    }
    const ev = m as Event;
    if (ev.type === "snapshot") {
      this.seq = ev.seq;
      this.applySnapshot(ev, ev.seq);
      this.emit("event", { seq: ev.seq, msg: ev });
      this.markSynced();
      return;
    }
    const seq = f.seq;
    if (typeof seq !== "number") {
      this.emitError(new BrainError("invalid_request", `the kernel sent a ${ev.type} event without a seq`));
      return;
    }
    if (this.seq !== undefined && seq <= this.seq) {
      this.dropped++;
      return;
    }
    this.seq = seq;
    this.apply(ev, seq);
    this.emit("event", { seq, msg: ev });
  }

  private apply(ev: Event, seq: number): void {
    switch (ev.type) {
      case "capability_register":
        for (const c of ev.capabilities) {
          this.registry.set(c.name, c);
        }
        break;
      case "capability_deregister":
        for (const n of ev.names) {
          this.registry.delete(n);
          this.desired.delete(n); // the kernel dropped it (a turn ended): do not bring it back
        }
        break;
      case "capability_invoked":
        this.runHandler(ev.callId, ev.name, ev.input);
        break;
      case "render_invoked":
        this.emitRender(ev, seq);
        break;
      case "approval_requested":
        this.addApproval(ev, seq);
        break;
      case "approval_decided":
      case "approval_withdrawn":
        this.approvalsByCall.delete(ev.callId);
        break;
      case "capability_outcome":
        this.onOutcome(ev);
        break;
    }
  }

  private applySnapshot(s: SnapshotEvent, seq: number): void {
    this.registry.clear();
    for (const c of s.capabilities) {
      this.registry.set(c.name, c);
    }
    const pendingIDs = new Set(s.pendingCalls.map((c) => c.callId));
    for (const id of this.approvalsByCall.keys()) {
      if (!pendingIDs.has(id)) {
        this.approvalsByCall.delete(id);
      }
    }
    for (const pc of s.pendingCalls) {
      if (pc.state === "awaiting_approval") {
        if (!this.approvalsByCall.has(pc.callId) || this.approvalsByCall.get(pc.callId)!.inputDigest !== pc.inputDigest) {
          this.addApproval(approvalOf(pc), seq);
        }
      } else if (pc.state === "running") {
        this.runHandler(pc.callId, pc.name, pc.input); // missed its capability_invoked
      }
    }
    // Bring back what the kernel lost (a fresh session after a restart
    // without its data): desired here, missing there, not in flight.
    const inFlight = new Set<string>();
    for (const p of this.pending.values()) {
      if (p.msg.type === "capability_register") {
        for (const c of p.msg.capabilities) {
          inFlight.add(c.name);
        }
      }
    }
    const missing: Capability[] = [];
    for (const name of this.desired) {
      const d = this.defined.get(name);
      if (d !== undefined && !this.registry.has(name) && !inFlight.has(name)) {
        missing.push(d.capability);
      }
    }
    if (missing.length > 0) {
      this.request({ type: "capability_register", capabilities: missing }, true).catch((err: unknown) =>
        this.emitError(
          new BrainError((err as BrainError).code ?? "internal", `re-register ${missing.map((c) => c.name).join(", ")}: ${(err as Error).message}`),
        ),
      );
    }
  }

  private addApproval(ev: ApprovalRequestedEvent, seq: number): void {
    const req: ApprovalRequest = {
      callId: ev.callId,
      name: ev.name,
      input: ev.input,
      invoker: ev.invoker,
      ...(ev.inputDigest !== undefined ? { inputDigest: ev.inputDigest } : {}),
      ...(this.registry.has(ev.name) ? { capability: this.registry.get(ev.name)! } : {}),
      seq,
      // A request decides with its own digest: if it was withdrawn and
      // asked again (the capability changed), the old dialog's answer is
      // refused (stale_approval) instead of approving what it never showed.
      approve: (o) =>
        this.decide(
          ev.callId,
          {
            decision: "approved",
            ...(o?.feedback !== undefined ? { feedback: o.feedback } : {}),
            ...(o?.decidedBy !== undefined ? { decidedBy: o.decidedBy } : {}),
          },
          ev.inputDigest,
        ),
      reject: (feedback, o) =>
        this.decide(
          ev.callId,
          {
            decision: "rejected",
            ...(feedback !== undefined ? { feedback } : {}),
            ...(o?.decidedBy !== undefined ? { decidedBy: o.decidedBy } : {}),
          },
          ev.inputDigest,
        ),
    };
    this.approvalsByCall.set(ev.callId, req);
    this.emit("approval", req);
  }

  private emitRender(ev: RenderInvokedEvent, seq: number): void {
    const cap = this.registry.get(ev.capabilityName);
    this.emit("render", {
      callId: ev.callId,
      capabilityName: ev.capabilityName,
      props: ev.props,
      // The seed's RenderInvokedEvent has no `partial`: the extension field is read as such.
      ...((ev as { partial?: unknown }).partial === true ? { partial: true as const } : {}),
      ...(cap !== undefined && isRenderCapability(cap) ? { capability: cap } : {}),
      seq,
    });
  }

  private onOutcome(ev: CapabilityOutcomeEvent): void {
    this.approvalsByCall.delete(ev.callId);
    const r = this.running.get(ev.callId);
    if (r !== undefined && !(r.fireAndForget && ev.outcome.ok)) {
      const e = ev.outcome.ok ? undefined : ev.outcome.error;
      r.ctrl.abort(new BrainError(e?.code ?? "conflict", e?.message ?? "the call finished without this handler's result"));
    }
    const resolve = this.invokes.get(ev.callId);
    if (resolve !== undefined) {
      this.invokes.delete(ev.callId);
      resolve(ev.outcome);
      return;
    }
    this.outcomes.set(ev.callId, ev.outcome);
    if (this.outcomes.size > RECENT) {
      this.outcomes.delete(this.outcomes.keys().next().value!);
    }
  }

  private runHandler(callId: string, name: string, input: unknown): void {
    const def = this.defined.get(name);
    if (def === undefined || this.handled.has(callId)) {
      return;
    }
    this.handled.add(callId);
    if (this.handled.size > 4 * RECENT) {
      this.handled.delete(this.handled.keys().next().value!);
    }
    const ctrl = new AbortController();
    const fireAndForget = def.capability.fireAndForget === true;
    const timeoutMs = def.capability.callTimeoutMs ?? 60_000;
    const timer = setTimeout(
      () => ctrl.abort(new BrainError("timeout", `the call did not finish within its callTimeoutMs (${timeoutMs} ms)`)),
      timeoutMs,
    );
    this.running.set(callId, { ctrl, fireAndForget, timer });
    let result: Promise<unknown>;
    try {
      const progress = (done: number, total?: number, message?: string): void => {
        if (ctrl.signal.aborted || this.closed || !Number.isFinite(done) || done < 0) {
          return;
        }
        const m: CapabilityProgressCommand = { type: "capability_progress", callId, progress: done };
        if (total !== undefined && Number.isFinite(total) && total > 0) {
          m.total = total;
        }
        if (message !== undefined && message !== "") {
          m.message = message;
        }
        this.request(m, true).catch(() => {}); // a hint: a call that ended meanwhile answers conflict
      };
      result = def.run(input, { callId, name, signal: ctrl.signal, progress });
    } catch (err) {
      result = Promise.reject(err);
    }
    result
      .then(
        (v) => (v === undefined ? null : v),
        (err: unknown) => errorEnvelope(err),
      )
      .then((value) => {
        clearTimeout(timer);
        this.running.delete(callId);
        if (fireAndForget || ctrl.signal.aborted || this.closed) {
          return; // nobody waits for it: the kernel resolved {} or ended the call
        }
        this.request({ type: "capability_result", callId, result: value }, true).catch((err: unknown) => {
          if (err instanceof BrainError && err.code === "conflict") {
            return; // the call ended meanwhile (a timeout, a cancel)
          }
          this.emitError(new BrainError((err as BrainError).code ?? "internal", `result of ${name} (${callId}): ${(err as Error).message}`));
        });
      });
  }

  private setState(s: ConnectionState): void {
    if (this.wsState === s) {
      return;
    }
    this.wsState = s;
    this.emit("state", s);
  }

  private emitError(err: BrainError): void {
    this.emit("error", err);
  }

  private emit<K extends keyof Listeners>(type: K, v: Parameters<Listeners[K]>[0]): void {
    for (const fn of this.listeners[type]) {
      try {
        (fn as (x: typeof v) => void)(v);
      } catch {
        // a listener's bug must not break the connection
      }
    }
  }
}

function approvalOf(pc: PendingCall): ApprovalRequestedEvent {
  return {
    type: "approval_requested",
    callId: pc.callId,
    name: pc.name,
    input: pc.input,
    invoker: pc.invoker,
    ...(pc.inputDigest !== undefined ? { inputDigest: pc.inputDigest } : {}),
    ...(pc.revision !== undefined ? { revision: pc.revision } : {}),
  };
}

function detach(ws: WebSocketLike): void {
  ws.onopen = ws.onmessage = ws.onclose = null;
  // Not null: closing a socket that is still connecting makes Node's `ws`
  // emit an error ("closed before the connection was established"), which
  // with no listener becomes an uncaught exception.
  ws.onerror = () => {};
}
