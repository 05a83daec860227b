/**
 * @brainrt/sdk — author brain tools in TypeScript (docs/tools-typescript.md).
 *
 * A tool declares the handles it needs (`requires`) and the values it is
 * given at attach (`bindings`); its run context is typed from that
 * declaration, so reaching an undeclared handle or binding does not
 * compile. `brain build` bundles each `*.tool.ts` file's default export
 * into a single ES module and its tool/v1 manifest; brain's JavaScript
 * host runs it with exactly the declared handles.
 *
 * The handle interfaces, {@link CapabilityError} and the error codes are
 * the TypeScript client's (`clients/ts`): one definition for both.
 *
 * @packageDocumentation
 */
import { toJSONSchema, type Infer, type JSONSchemaConverter, type SchemaCaller, type StandardSchemaV1 } from "../../../clients/ts/src/schema.js";
import { BrainError, isIdentifierCode } from "../../../clients/ts/src/errors.js";
import { CapabilityError, HANDLE_NAMES, type CapabilityHandles, type HandleName } from "../../../clients/ts/src/handles.js";
import type { ErrorCode } from "../../../clients/ts/src/types.js";

export { BrainError, CapabilityError, HANDLE_NAMES, isIdentifierCode };
export type { ErrorCode, Infer, JSONSchemaConverter, StandardSchemaV1 };
export type {
  CapabilityHandles,
  ExecCommand,
  ExecHandle,
  ExecResult,
  FetchRequest,
  FetchResponse,
  FileInfo,
  FsHandle,
  HandleName,
  JsHandle,
  NetHandle,
  PageHandle,
} from "../../../clients/ts/src/handles.js";
export { utf8Decode, utf8Encode } from "./utf8.js";

/** Binding schemas by name: the values an environment supplies at attach. */
export type BindingSchemas = Readonly<Record<string, StandardSchemaV1>>;

/** The binding values a tool is given, typed from its binding schemas. */
export type BindingValues<B extends BindingSchemas> = { readonly [K in keyof B]: Infer<B[K]> };

/**
 * ToolSignal is the call's cancellation, shaped as an AbortSignal. brain
 * stops a call's script at its deadline or cancellation itself (with an
 * exception no code can catch), so a tool rarely needs it.
 */
export interface ToolSignal {
  readonly aborted: boolean;
  readonly reason: unknown;
  throwIfAborted(): void;
}

/**
 * ToolContext is what `run` is given besides its input: exactly the
 * declared handles and bindings, and the call's facts. Grants are
 * invisible to it.
 */
export interface ToolContext<R extends readonly HandleName[], B extends BindingSchemas> {
  /** Exactly the handles named in `requires`. */
  readonly handles: Pick<CapabilityHandles, R[number]>;
  /** The binding values supplied at attach, typed from `bindings`. */
  readonly bindings: BindingValues<B>;
  readonly signal: ToolSignal;
  /** The call's deadline, in milliseconds since the epoch (as Date counts), when it has one. */
  readonly deadline: number | undefined;
  /** The call's id. */
  readonly callId: string;
  /** Alias of callId. */
  readonly requestId: string;
  /** The environment's workspace name, for messages: files are reached through the fs handle only. */
  readonly workspace?: string;
  /** The session the call belongs to, when it belongs to one. */
  readonly session?: string;
  /** Call options; brain passes none today. */
  readonly options: Readonly<Record<string, unknown>>;
  /** Reports how far the call has come; total may be 0 when unknown. */
  progress(done: number, total?: number, message?: string): void;
}

/** What a tool's `init` is given: the handles and bindings, at attach (and for each new session). */
export type InitContext<R extends readonly HandleName[], B extends BindingSchemas> = Omit<ToolContext<R, B>, "progress">;

type Out<O> = O extends StandardSchemaV1 ? Infer<O> : unknown;

/** The argument of {@link tool}. */
export interface ToolDefinition<
  I extends StandardSchemaV1,
  O extends StandardSchemaV1 | undefined,
  R extends readonly HandleName[],
  B extends BindingSchemas,
> {
  /** The tool's name; the capability's name when attached. */
  readonly name: string;
  /** Shown to the model. */
  readonly description: string;
  /** The input's schema (zod 4, or any Standard Schema that converts to JSON Schema). */
  readonly input: I;
  /** The output's schema; the host checks every result against it. */
  readonly output?: O;
  /** The handles the tool uses: exec, fs, net, js, page. */
  readonly requires: R;
  /** The values supplied at attach (credentials, endpoints), by name. */
  readonly bindings?: B;
  /** Runs once per realm (at attach, and for each new session) before any call. */
  init?(ctx: InitContext<R, B>): void | Promise<void>;
  /** Runs one call. A thrown error with an identifier-shaped `code` keeps it in the outcome. */
  run(ctx: ToolContext<R, B>, input: Infer<I>): Out<O> | Promise<Out<O>>;
}

/** The manifest fields a tool defines (docs/manifest.md). */
export interface ToolDescription {
  name: string;
  description: string;
  input_schema: Record<string, unknown>;
  output_schema?: Record<string, unknown>;
  requires: HandleName[];
  binding_names: string[];
  binding_schemas?: Record<string, Record<string, unknown>>;
}

/** A tool, as {@link tool} returns it. */
export type Tool<
  I extends StandardSchemaV1 = StandardSchemaV1,
  O extends StandardSchemaV1 | undefined = StandardSchemaV1 | undefined,
  R extends readonly HandleName[] = readonly HandleName[],
  B extends BindingSchemas = BindingSchemas,
> = ToolDefinition<I, O, R, B> & {
  /**
   * The manifest fields: what `brain build` writes into `<name>.tool.json`.
   * convert converts schemas that cannot convert themselves (zod/mini's);
   * brain build passes zod's z.toJSONSchema when the project has zod.
   */
  describe(convert?: JSONSchemaConverter): ToolDescription;
  /** Runs one call as the host does: the input parsed by the input schema (defaults, transforms), then run. */
  invoke(ctx: ToolContext<R, B>, input: unknown): Out<O> | Promise<Out<O>>;
};

// How schema errors name tool() and what they suggest: tool() takes no
// JSON Schema in place of a schema.
const TOOL: SchemaCaller = {
  name: "tool()",
  remedy: (io) =>
    `give ${io} a zod 4 schema (zod/mini too: brain build converts it with zod), or a Standard Schema that implements Standard JSON Schema (~standard.jsonSchema)`,
};

/** The symbol brain's JavaScript host registers a payload's tool through. */
const REGISTER = Symbol.for("brain.register");

/**
 * tool declares a tool. Its run context is typed from `requires` and
 * `bindings`: `ctx.handles` is exactly `Pick<CapabilityHandles,
 * requires[number]>`, so an undeclared handle or binding is a compile
 * error. Export it as the default export of a `*.tool.ts` file.
 *
 * @example
 * export default tool({
 *   name: "fs.read", description: "Read a text file.",
 *   input: z.object({ path: z.string() }), requires: ["fs"],
 *   async run({ handles }, { path }) { return { text: utf8Decode(await handles.fs.readFile(path)) }; },
 * });
 */
export function tool<
  I extends StandardSchemaV1,
  const R extends readonly HandleName[],
  O extends StandardSchemaV1 | undefined = undefined,
  B extends BindingSchemas = {},
>(def: ToolDefinition<I, O, R, B>): Tool<I, O, R, B> {
  if (typeof def?.name !== "string" || def.name === "" || typeof def.run !== "function") {
    throw new TypeError("tool(): a tool needs a name and a run function");
  }
  for (const r of def.requires) {
    if (!(HANDLE_NAMES as readonly string[]).includes(r)) {
      throw new TypeError(`tool ${def.name}: unknown handle ${JSON.stringify(r)} (want one of ${HANDLE_NAMES.join(", ")})`);
    }
  }
  if (new Set(def.requires).size !== def.requires.length) {
    throw new TypeError(`tool ${def.name}: requires lists a handle twice`);
  }
  const t: Tool<I, O, R, B> = {
    ...def,
    invoke(ctx: ToolContext<R, B>, input: unknown): Out<O> | Promise<Out<O>> {
      // Synchronous when the schema and run are: no promise job to run.
      const r = def.input["~standard"].validate(input);
      if (r instanceof Promise) {
        return r.then((v) => def.run(ctx, parsed(def.name, v) as Infer<I>));
      }
      return def.run(ctx, parsed(def.name, r) as Infer<I>);
    },
    describe(convert?: JSONSchemaConverter): ToolDescription {
      const d: ToolDescription = {
        name: def.name,
        description: def.description,
        input_schema: toJSONSchema(def.name, "input", def.input, convert, TOOL),
        requires: [...def.requires].sort(),
        binding_names: Object.keys(def.bindings ?? {}),
      };
      if (def.output !== undefined) {
        d.output_schema = toJSONSchema(def.name, "output", def.output, convert, TOOL);
      }
      if (def.bindings !== undefined && d.binding_names.length > 0) {
        d.binding_schemas = {};
        for (const [k, s] of Object.entries(def.bindings)) {
          d.binding_schemas[k] = toJSONSchema(`${def.name} binding ${k}`, "input", s, convert, TOOL);
        }
      }
      return d;
    },
  };
  const register = (globalThis as Record<symbol, unknown>)[REGISTER];
  if (typeof register === "function") {
    register(t, { CapabilityError });
  }
  return t;
}

type Validated = {
  readonly value?: unknown;
  readonly issues?: ReadonlyArray<{ readonly message: string; readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined }> | undefined;
};

// parsed returns a validation's value, or throws invalid_input naming the
// paths of its issues.
function parsed(name: string, r: Validated): unknown {
  if (r.issues === undefined) return r.value;
  const msgs = r.issues.map((i) => {
    const path = (i.path ?? []).map((p) => String(typeof p === "object" && p !== null ? p.key : p)).join(".");
    return path === "" ? i.message : `${path}: ${i.message}`;
  });
  throw new ToolError("invalid_input", `input for ${JSON.stringify(name)} is invalid: ${msgs.join("; ")}`);
}

/**
 * ToolError is an error with an identifier-shaped code that reaches the
 * call's outcome unchanged, as Go's tool.Errorf: `throw new
 * ToolError("rate_limited", "retry in 30s")`. A code that is not
 * identifier-shaped becomes tool_error.
 */
export class ToolError extends BrainError {
  constructor(code: string, message: string) {
    super(code, message);
    this.name = "ToolError";
  }
}
