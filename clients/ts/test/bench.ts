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

type Runner = { run(n: number, out: number[] | undefined): Promise<void>; close(): void };

async function tsClient(brain: Brain): Promise<Runner> {
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
  return {
    async run(n, out) {
      for (let i = 0; i < n; i++) {
        const t0 = performance.now();
        const o = await client.invoke("bench.echo", { i });
        const dt = performance.now() - t0;
        if (!o.ok || (o.value as { i: number }).i !== i) throw new Error(`call ${i}: ${JSON.stringify(o)}`);
        out?.push(dt);
      }
    },
    close: () => client.close(),
  };
}

async function bareWS(brain: Brain): Promise<Runner> {
  const ws = new WebSocket(`ws://127.0.0.1:${brain.port}/v1/sessions/bench-ws/ws`, {
    headers: { Authorization: `Bearer ${brain.token}` },
  });
  await new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("error", reject);
  });
  let id = 0;
  let waiting: ((callId: string) => void) | undefined;
  let registered: (() => void) | undefined;
  ws.on("message", (data) => {
    const f = JSON.parse(data.toString());
    const m = f.msg;
    if (m.type === "capability_invoked") {
      ws.send(JSON.stringify({ v: 2, id: `r${++id}`, msg: { type: "capability_result", callId: m.callId, result: m.input } }));
    } else if (m.type === "capability_outcome") {
      waiting?.(m.callId);
    } else if (m.type === "error") {
      throw new Error(`bare ws: ${m.code}: ${m.message}`);
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
  return {
    async run(n, out) {
      for (let i = 0; i < n; i++) {
        const t0 = performance.now();
        await new Promise<string>((resolve) => {
          waiting = resolve;
          ws.send(JSON.stringify({ v: 2, id: `i${++id}`, msg: { type: "capability_invoke", name: "bench.echo", input: { i } } }));
        });
        out?.push(performance.now() - t0);
      }
    },
    close: () => ws.close(),
  };
}

// The default frame rate limit (docs/serve.md, "Limits") would throttle
// this loop; the kernel serves no tools of its own here.
const brain = await Brain.start({ config: "limits:\n  frames_per_second: -1\n" });
try {
  const bare = await bareWS(brain);
  const ts = await tsClient(brain);
  await bare.run(WARMUP, undefined);
  await ts.run(WARMUP, undefined);
  // Interleaved rounds, so that both see the same machine (its load varies).
  const b: number[] = [];
  const t: number[] = [];
  for (let done = 0; done < N; done += 100) {
    const n = Math.min(100, N - done);
    await bare.run(n, b);
    await ts.run(n, t);
  }
  bare.close();
  ts.close();
  console.log(`bare ws client:    ${stats(b)}`);
  console.log(`TypeScript client: ${stats(t)}`);
} finally {
  await brain.stop();
}
