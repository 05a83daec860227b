// The type-level fixture of issue 22: tsc compiles this file in
// sdk/ts/test.sh. Each @ts-expect-error line must be an error (an
// undeclared handle, an undeclared binding, a wrong input type); if one
// compiled, tsc would fail on the unused directive. The lines around them
// must compile.
import { z } from "zod";
import { tool, utf8Decode, CapabilityError, type FsHandle } from "../src/index.js";

export const read = tool({
  name: "fs.read",
  description: "Read a text file of the workspace.",
  input: z.object({ path: z.string() }),
  output: z.object({ text: z.string(), bytes: z.number() }),
  requires: ["fs"],
  bindings: { token: z.string(), limit: z.number().int() },
  async run(ctx, input) {
    const fs: FsHandle = ctx.handles.fs; // declared: compiles
    const b = await fs.readFile(input.path);
    const token: string = ctx.bindings.token; // declared binding, typed from its schema
    const limit: number = ctx.bindings.limit;
    // @ts-expect-error exec is not declared in requires
    await ctx.handles.exec.run({ program: "true" });
    // @ts-expect-error net is not declared in requires
    void ctx.handles.net;
    // @ts-expect-error secret is not a declared binding
    void ctx.bindings.secret;
    // @ts-expect-error a binding is read-only
    ctx.bindings.token = "x";
    // @ts-expect-error path is a string, not a number
    const n: number = input.path;
    void n;
    try {
      await fs.stat("x");
    } catch (e) {
      if (e instanceof CapabilityError && e.code === "path_escape") return { text: "", bytes: 0 };
    }
    return { text: utf8Decode(b) + token, bytes: b.length + limit };
  },
});

export const none = tool({
  name: "t.none",
  description: "Needs no handle.",
  input: z.object({}),
  requires: [],
  run(ctx) {
    // @ts-expect-error no handle is declared
    void ctx.handles.fs;
    // @ts-expect-error no binding is declared
    void ctx.bindings.token;
    return ctx.callId;
  },
});

export const badOutput = tool({
  name: "t.out",
  description: "Its result must match the output schema's type.",
  input: z.object({}),
  output: z.object({ n: z.number() }),
  requires: ["exec", "js"],
  // @ts-expect-error n must be a number
  async run() {
    return { n: "one" };
  },
});

tool({
  name: "t.unknown",
  description: "An unknown handle name does not compile.",
  input: z.object({}),
  // @ts-expect-error "disk" is not a handle
  requires: ["disk"],
  run() {},
});
