// Schemas as this package and the tool SDK (sdk/ts) read them: through the
// Standard Schema interface, so that neither imports zod at run time.

/**
 * StandardSchemaV1 is the Standard Schema interface (standardschema.dev),
 * which zod 4 implements: the package reads a schema through it, so that it
 * never imports zod at run time. Copied from the specification, as it asks.
 */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly "~standard": {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (value: unknown) => StandardResult<Output> | Promise<StandardResult<Output>>;
    readonly types?: { readonly input: Input; readonly output: Output } | undefined;
    /** Standard JSON Schema (zod ≥ 4.2): the schema's own conversion. */
    readonly jsonSchema?: {
      readonly input: (options: { readonly target: string }) => Record<string, unknown>;
      readonly output: (options: { readonly target: string }) => Record<string, unknown>;
    };
  };
}

/** The result of a Standard Schema validation. */
export type StandardResult<Output> =
  | { readonly value: Output; readonly issues?: undefined }
  | { readonly issues: ReadonlyArray<{ readonly message: string; readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined }> };

/** The type a schema produces after validation. */
export type Infer<S> = S extends StandardSchemaV1<unknown, infer O> ? O : unknown;
/** The type a schema accepts. */
export type InferInput<S> = S extends StandardSchemaV1<infer I, unknown> ? I : unknown;

/** A JSON Schema converter for schemas that cannot convert themselves, such as zod's z.toJSONSchema. */
export type JSONSchemaConverter = (schema: StandardSchemaV1, options: { io: "input" | "output"; target: string }) => Record<string, unknown>;

/**
 * Who asks {@link toJSONSchema} for a schema's JSON Schema: its name in
 * errors, and what to do about a schema that has no JSON Schema form.
 */
export interface SchemaCaller {
  /** How errors name the caller: "defineCapability", "tool()". */
  readonly name: string;
  /** What to do about a schema with no JSON Schema form, given which one (input or output). */
  readonly remedy: (io: "input" | "output") => string;
}

const DEFINE_CAPABILITY: SchemaCaller = {
  name: "defineCapability",
  remedy: (io) => `give ${io}Schema (a JSON Schema) in its place`,
};

/**
 * toJSONSchema converts a schema to JSON Schema (draft 2020-12) by the
 * schema's own conversion (Standard JSON Schema, or zod 4.0–4.1's method),
 * or by fallback, the converter given (brain build gives zod's
 * z.toJSONSchema); name and io name it in errors, which caller (default
 * defineCapability's) words. The tool SDK derives a manifest's schemas
 * with it too.
 */
export function toJSONSchema(
  name: string,
  io: "input" | "output",
  schema: StandardSchemaV1,
  fallback?: JSONSchemaConverter,
  caller: SchemaCaller = DEFINE_CAPABILITY,
): Record<string, unknown> {
  const std = schema?.["~standard"];
  if (std === undefined) {
    throw new TypeError(`${caller.name} ${name}: ${io} is not a schema (want zod 4 or another Standard Schema)`);
  }
  try {
    if (std.jsonSchema !== undefined) {
      return std.jsonSchema[io]({ target: "draft-2020-12" });
    }
    // zod 4.0 and 4.1: the schema's own method.
    const own = (schema as unknown as { toJSONSchema?: (o: object) => Record<string, unknown> }).toJSONSchema;
    if (typeof own === "function") {
      return own.call(schema, { io, target: "draft-2020-12" });
    }
  } catch (err) {
    throw new TypeError(`${caller.name} ${name}: ${io} schema has no JSON Schema form: ${(err as Error).message}`, {
      cause: err,
    });
  }
  const cannot = `${caller.name} ${name}: the ${std.vendor} ${io} schema cannot convert itself to JSON Schema (it has no ~standard.jsonSchema)`;
  // zod/mini and other schemas that cannot convert themselves: the
  // converter given, such as zod's own z.toJSONSchema.
  if (fallback !== undefined) {
    let r: Record<string, unknown>;
    try {
      r = fallback(schema, { io, target: "draft-2020-12" });
    } catch (err) {
      // zod's converter reads zod's internals: on another vendor's schema
      // its error ("cannot read property 'def' of undefined") says nothing
      // useful.
      const why = std.vendor === "zod" ? `: ${(err as Error).message}` : ", nor can zod's z.toJSONSchema, which converts only zod schemas";
      throw new TypeError(`${cannot}${why}; ${caller.remedy(io)}`, { cause: err });
    }
    return r;
  }
  throw new TypeError(`${cannot}; ${caller.remedy(io)}`);
}
