// defineCapability, error envelopes and option checking, without a kernel.
import assert from "node:assert/strict";
import { test } from "node:test";

import { z } from "zod";

import { BrainClient, BrainError, defineCapability, errorEnvelope, type HandlerContext } from "../src/index.js";

const ctx: HandlerContext = { callId: "c1", name: "t", signal: new AbortController().signal, progress: () => {} };

test("defineCapability converts zod schemas with zod's own conversion", () => {
  const d = defineCapability({
    name: "ui.t",
    description: "t",
    input: z.object({ a: z.string(), b: z.number().optional() }),
    output: z.object({ ok: z.boolean() }),
    handler: async () => ({ ok: true }),
  });
  assert.deepEqual(d.capability.inputSchema, z.object({ a: z.string(), b: z.number().optional() })["~standard"].jsonSchema.input({ target: "draft-2020-12" }));
  assert.equal((d.capability.outputSchema as { additionalProperties?: unknown }).additionalProperties, false);
  assert.equal(d.capability.side, "client");
  assert.deepEqual(d.capability.origin, { kind: "client" });
  assert.ok(!("input" in d.capability) && !("handler" in d.capability), "only wire fields are registered");
});

test("defineCapability refuses definitions it cannot register", async (t) => {
  const cases: [string, () => unknown, RegExp][] = [
    ["no input schema", () => defineCapability({ name: "x", description: "", handler: () => 1 } as never), /give input/],
    ["not a schema", () => defineCapability({ name: "x", description: "", input: { type: "object" } as never, handler: () => 1 }), /not a schema/],
    ["no handler", () => defineCapability({ name: "x", description: "", input: z.object({}) } as never), /handler must be a function/],
    [
      "no JSON Schema form",
      () => defineCapability({ name: "x", description: "", input: z.object({ d: z.date() }), handler: () => 1 }),
      /no JSON Schema form/,
    ],
  ];
  for (const [name, f, want] of cases) {
    await t.test(name, () => assert.throws(f, (e: unknown) => e instanceof TypeError && want.test(e.message)));
  }
});

test("run validates input and output, and keeps a thrown code", async () => {
  const d = defineCapability({
    name: "ui.v",
    description: "v",
    input: z.object({ n: z.number().int().min(0) }),
    output: z.object({ sq: z.number() }),
    handler: async ({ n }) => (n === 7 ? ({ sq: "seven" } as never) : { sq: n * n }),
  });
  assert.deepEqual(await d.run({ n: 3 }, ctx), { sq: 9 });
  await assert.rejects(d.run({ n: -1 }, ctx), (e: unknown) => e instanceof BrainError && e.code === "invalid_input" && /^input: n: /.test(e.message));
  await assert.rejects(d.run({ n: 7 }, ctx), (e: unknown) => e instanceof BrainError && e.code === "invalid_output" && /^result: sq: /.test(e.message));
});

test("errorEnvelope keeps identifier-shaped codes only", () => {
  assert.deepEqual(errorEnvelope(new BrainError("rate_limited", "slow")), { error: "slow", code: "rate_limited" });
  assert.deepEqual(errorEnvelope(Object.assign(new Error("x"), { code: "ENOENT" })), { error: "x" });
  assert.deepEqual(errorEnvelope(Object.assign(new Error("x"), { code: "a".repeat(65) })), { error: "x" });
  assert.deepEqual(errorEnvelope(Object.assign(new Error("x"), { code: 42 })), { error: "x" });
  assert.deepEqual(errorEnvelope("plain string"), { error: "plain string" });
  assert.deepEqual(errorEnvelope({ weird: true }), { error: '{"weird":true}' });
  assert.deepEqual(errorEnvelope(undefined), { error: "undefined" });
});

test("BrainClient refuses bad options, naming them", async (t) => {
  const WS = class {} as never;
  const cases: [string, object, RegExp][] = [
    ["url", { url: "ftp://x", token: "t", session: "s", WebSocket: WS }, /url/],
    ["token", { url: "http://x", token: "", session: "s", WebSocket: WS }, /token/],
    ["session", { url: "http://x", token: "t", session: "a/b", WebSocket: WS }, /session/],
    ["long session", { url: "http://x", token: "t", session: "a".repeat(129), WebSocket: WS }, /session/],
    ["afterSeq", { url: "http://x", token: "t", session: "s", WebSocket: WS, afterSeq: -1 }, /afterSeq/],
    ["auth", { url: "http://x", token: "t", session: "s", WebSocket: WS, auth: "cookie" }, /auth/],
  ];
  for (const [name, opts, want] of cases) {
    await t.test(name, () => assert.throws(() => new BrainClient(opts as never), (e: unknown) => e instanceof TypeError && want.test(e.message)));
  }
  await t.test("approve with an unknown decision", async () => {
    const c = new BrainClient({ url: "http://127.0.0.1:1", token: "t", session: "s", WebSocket: WS });
    await assert.rejects(c.approve("c1", { decision: "maybe" as never }), /decision must be/);
    c.close();
    await assert.rejects(c.connect(), (e: unknown) => e instanceof BrainError && e.code === "cancelled");
  });
});
