// Round trip of a client-side capability, measured from the TypeScript
// client, beside the same through a bare `ws` client:
//
//   invoke (capability_invoke) → kernel → capability_invoked → the handler
//   → capability_result → kernel → capability_outcome → resolved
//
// Both invoke a capability they answer themselves, over their own
// WebSocket to the same brain serve, N sequential calls after a warm-up.
// Run: npm run build && BRAIN_BIN=... node dist/test/bench.js  (N=1000 by default)
import { WebSocket } from "ws";
import { z } from "zod";

import { defineCapability } from "../src/index.js";
import { Brain } from "./brain.js";

const N = Number(process.env.N ?? 1000);
const WARMUP = 100;

function stats(ms: number[]): string {
  const s = [...ms].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
  return `median ${(q(0.5) * 1000).toFixed(0)} µs, p99 ${(q(0.99) * 1000).toFixed(0)} µs, max ${(s.at(-1)! * 1000).toFixed(0)} µs (n=${s.length})`;
}

async function viaClient(brain: Brain): Promise<number[]> {
  const client = brain.client("bench-ts");
  await client.connect();
  await client.register(
    defineCapability({
      name: "bench.echo",
      description: "Echo.",
      audience: ["llm", "user"],
      input: z.object({ i: z.number() }),
      output: z.object({ i: z.number() }),
      handler: async ({ i }) => ({ i }),
    }),
  );
  const out: number[] = [];
  for (let i = 0; i < WARMUP + N; i++) {
    const t0 = performance.now();
    const o = await client.invoke("bench.echo", { i });
    const dt = performance.now() - t0;
    if (!o.ok || (o.value as { i: number }).i !== i) throw new Error(`call ${i}: ${JSON.stringify(o)}`);
    if (i >= WARMUP) out.push(dt);
  }
  client.close();
  return out;
}

async function viaBareWS(brain: Brain): Promise<number[]> {
  const ws = new WebSocket(`ws://127.0.0.1:${brain.port}/v1/sessions/bench-ws/ws?token=${brain.token}`);
  await new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("error", reject);
  });
  let id = 0;
  let waiting: ((callId: string) => void) | undefined;
  let registered: (() => void) | undefined;
  ws.on("message", (data) => {
    const f = JSON.parse(data.toString());
    if (process.env.DEBUG) console.error(data.toString().slice(0, 200));
    const m = f.msg;
    if (m.type === "capability_invoked") {
      ws.send(JSON.stringify({ v: 2, id: `r${++id}`, msg: { type: "capability_result", callId: m.callId, result: m.input } }));
    } else if (m.type === "capability_outcome") {
      waiting?.(m.callId);
    } else if (f.ref === "reg") {
      registered?.();
    }
  });
  await new Promise<void>((resolve) => {
    registered = resolve;
    ws.send(
      JSON.stringify({
        v: 2,
        id: "reg",
        msg: {
          type: "capability_register",
          capabilities: [
            {
              name: "bench.echo",
              description: "Echo.",
              inputSchema: { type: "object", properties: { i: { type: "number" } }, required: ["i"] },
              side: "client",
              origin: { kind: "client" },
              audience: ["llm", "user"],
            },
          ],
        },
      }),
    );
  });
  const out: number[] = [];
  for (let i = 0; i < WARMUP + N; i++) {
    const t0 = performance.now();
    await new Promise<string>((resolve) => {
      waiting = resolve;
      ws.send(JSON.stringify({ v: 2, id: `i${++id}`, msg: { type: "capability_invoke", name: "bench.echo", input: { i } } }));
    });
    const dt = performance.now() - t0;
    if (i >= WARMUP) out.push(dt);
  }
  ws.close();
  return out;
}

console.error("bench: starting brain");
// The default frame rate limit (docs/serve.md, "Limits") would throttle
// this loop; the kernel serves no tools of its own here.
const brain = await Brain.start({ config: "limits:\n  frames_per_second: -1\n" });
console.error("bench: brain on", brain.port);
try {
  // Alternate, so neither side gets the warmer machine.
  const bare1 = await viaBareWS(brain);
  console.error("bench: bare done");
  const ts1 = await viaClient(brain);
  console.log(`bare ws client:   ${stats(bare1)}`);
  console.log(`TypeScript client: ${stats(ts1)}`);
} finally {
  await brain.stop();
}
