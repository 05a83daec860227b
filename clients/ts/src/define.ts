import { BrainError, isIdentifierCode } from "./errors.js";
import { toJSONSchema, type Infer, type InferInput, type StandardResult, type StandardSchemaV1 } from "./schema.js";
import type { Capability, CapabilityOrigin } from "./types.js";

export type { Infer, InferInput, StandardResult, StandardSchemaV1 };

/** What a handler gets besides its input. */
export interface HandlerContext {
  /** The call's id. */
  readonly callId: string;
  /** The capability's name. */
  readonly name: string;
  /**
   * Fires when the call ends without this handler's answer: it was
   * cancelled (`capability_cancel`, the MCP caller gave up), or its
   * `callTimeoutMs` passed. `signal.reason` is a {@link BrainError} whose
   * code says which (`cancelled`, `timeout`, …).
   */
  readonly signal: AbortSignal;
  /**
   * Reports how far the call has come (`capability_progress`): an MCP
   * caller that asked for progress gets it as `notifications/progress`.
   * `total` is omitted when unknown. It never throws and never waits;
   * reports sent faster than every 50 ms are coalesced by the kernel.
   */
  progress(progress: number, total?: number, message?: string): void;
}

/** A handler: validated, typed input in, a JSON value (or a promise of one) out; a thrown error becomes an error envelope. */
export type Handler<In, Out> = (input: In, ctx: HandlerContext) => Out | Promise<Out>;

/**
 * The argument of {@link defineCapability}: the wire {@link Capability}
 * without its schemas (they come from `input` and `output`), with `side`
 * and `origin` defaulting to the client's, and the handler.
 */
export type CapabilityDefinition<I extends StandardSchemaV1 | undefined, O extends StandardSchemaV1 | undefined> = Omit<
  Capability,
  "inputSchema" | "outputSchema" | "side" | "origin"
> & {
  /** Default `"client"`. */
  side?: Capability["side"];
  /** Default `{ kind: "client" }`. */
  origin?: CapabilityOrigin;
  /** The input's schema (zod 4 or any Standard Schema with JSON Schema); the handler receives its output type. */
  input?: I;
  /** A plain JSON Schema instead of `input`; the handler then receives `unknown` input, unvalidated here (the kernel validates it). */
  inputSchema?: Record<string, unknown>;
  /** The result's schema: the handler's return value is validated with it before it is sent. */
  output?: O;
  /** A plain JSON Schema of the result instead of `output`. */
  outputSchema?: Record<string, unknown>;
  handler: Handler<I extends StandardSchemaV1 ? Infer<I> : unknown, O extends StandardSchemaV1 ? InferInput<O> : unknown>;
};

/**
 * DefinedCapability is what {@link defineCapability} returns, ready for
 * {@link BrainClient.register}: the wire form and the handler around it.
 */
export interface DefinedCapability {
  /** The capability as it is registered (JSON Schemas converted). */
  readonly capability: Capability;
  /**
   * run validates the raw input, calls the handler and validates its
   * result. It resolves to the value to send, or rejects with a
   * {@link BrainError} (`invalid_input`, `invalid_output`, or the handler's
   * own error).
   */
  run(input: unknown, ctx: HandlerContext): Promise<unknown>;
}

/**
 * defineCapability turns a schema-typed definition into a registrable
 * capability. The zod schemas become JSON Schema by zod's own conversion
 * (Standard JSON Schema, draft 2020-12, input side for `input` and output
 * side for `output`), and the handler is typed by them:
 *
 * ```ts
 * const react = defineCapability({
 *   name: "platform.react",
 *   description: "Acknowledge a user message with a Unicode emoji.",
 *   side: "client",
 *   origin: { kind: "client" },
 *   fireAndForget: true,
 *   input: z.object({ emoji: z.string(), targetSeq: z.number().optional() }),
 *   handler: async ({ emoji, targetSeq }, ctx) => { showReaction(emoji, targetSeq); },
 * });
 * ```
 *
 * A definition without `input` or `inputSchema`, or with a schema that
 * cannot be converted, is a programming mistake and throws a TypeError.
 */
export function defineCapability<
  I extends StandardSchemaV1 | undefined = undefined,
  O extends StandardSchemaV1 | undefined = undefined,
>(def: CapabilityDefinition<I, O>): DefinedCapability {
  const { input, output, handler, inputSchema, outputSchema, side, origin, ...rest } = def;
  if (typeof handler !== "function") {
    throw new TypeError(`defineCapability ${String(def.name)}: handler must be a function`);
  }
  if (input === undefined && inputSchema === undefined) {
    throw new TypeError(`defineCapability ${def.name}: give input (a zod schema) or inputSchema (JSON Schema)`);
  }
  const capability: Capability = {
    ...rest,
    inputSchema: inputSchema ?? toJSONSchema(def.name, "input", input as StandardSchemaV1),
    side: side ?? "client",
    origin: origin ?? { kind: "client" },
  };
  const out = outputSchema ?? (output === undefined ? undefined : toJSONSchema(def.name, "output", output as StandardSchemaV1));
  if (out !== undefined) {
    capability.outputSchema = out;
  }
  const h = handler as Handler<unknown, unknown>;
  return {
    capability,
    async run(raw: unknown, ctx: HandlerContext): Promise<unknown> {
      const value = input === undefined ? raw : await validate(input as StandardSchemaV1, raw, "invalid_input", "input");
      const result = await h(value, ctx);
      if (output === undefined) {
        return result;
      }
      return validate(output as StandardSchemaV1, result, "invalid_output", "result");
    },
  };
}

async function validate(schema: StandardSchemaV1, value: unknown, code: string, what: string): Promise<unknown> {
  const r = await schema["~standard"].validate(value);
  if (r.issues === undefined) {
    return r.value;
  }
  const msgs = r.issues.map((i) => {
    const path = (i.path ?? []).map((p) => String(typeof p === "object" && p !== null ? p.key : p)).join(".");
    return path === "" ? i.message : `${path}: ${i.message}`;
  });
  throw new BrainError(code, `${what}: ${msgs.join("; ")}`);
}

/**
 * errorEnvelope turns a handler's thrown value into the error envelope of
 * `capability_result`: the message, and the `code` when the error carries an
 * identifier-shaped one (a {@link BrainError}, or any error with a `code`).
 */
export function errorEnvelope(err: unknown): { error: string; code?: string } {
  const message = err instanceof Error ? err.message : typeof err === "string" ? err : JSON.stringify(err) ?? String(err);
  const code = (err as { code?: unknown } | null)?.code;
  return isIdentifierCode(code) ? { error: message, code } : { error: message };
}
