// Connections that fail: a TCP cut mid-session, brain serve SIGKILLed with
// an approval pending, a kernel that lost the session, and a kernel that
// replays what the client already has.
import assert from "node:assert/strict";
import { after, test } from "node:test";

import { WebSocketServer } from "ws";
import { z } from "zod";

import { BrainClient, defineCapability, type BrainEvent, type ConnectionState, type WebSocketConstructor } from "../src/index.js";
import { Brain, Proxy, listed, text, within } from "./brain.js";
import { WebSocket } from "ws";

const cleanup: (() => unknown)[] = [];
after(async () => {
  for (const f of cleanup.reverse()) await f();
});

function waitState(c: BrainClient, want: ConnectionState): Promise<void> {
  if (c.state === want) return Promise.resolve();
  return within(
    new Promise<void>((resolve) => {
      const off = c.on("state", (s) => {
        if (s === want) {
          off();
          resolve();
        }
      });
    }),
    20_000,
    `the client to be ${want}`,
  );
}

/** until polls cond (every 5 ms, at most 20 s): for state with no event to wait on. */
async function until(cond: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out after 20000 ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

function collect(c: BrainClient): BrainEvent[] {
  const out: BrainEvent[] = [];
  c.on("event", (e) => out.push(e));
  return out;
}

/** assertContiguous checks that the events after the first snapshot have seqs n, n+1, n+2, … */
function assertContiguous(evs: BrainEvent[], what: string): number[] {
  const seqs = evs.filter((e) => e.msg.type !== "snapshot").map((e) => e.seq);
  for (let i = 1; i < seqs.length; i++) {
    assert.equal(seqs[i], seqs[i - 1]! + 1, `${what}: seq ${seqs[i]} after ${seqs[i - 1]} (a gap or a duplicate): ${seqs.join(",")}`);
  }
  return seqs;
}

/** standIn starts a stand-in kernel on loopback that answers each connection with onConnection. */
async function standIn(onConnection: (sock: import("ws").WebSocket, url: string) => void): Promise<number> {
  const wss = new WebSocketServer({ host: "127.0.0.1", port: 0 });
  cleanup.push(() => new Promise((r) => wss.close(r)));
  await new Promise((r) => wss.once("listening", r));
  wss.on("connection", (sock, req) => onConnection(sock, req.url ?? ""));
  return (wss.address() as { port: number }).port;
}

/** standInClient is a client of the stand-in kernel on port, closed at the end. */
function standInClient(port: number, session: string, opts?: Partial<ConstructorParameters<typeof BrainClient>[0]>): BrainClient {
  const client = new BrainClient({
    url: `http://127.0.0.1:${port}`,
    token: "t".repeat(20),
    session,
    WebSocket: WebSocket as unknown as WebSocketConstructor,
    ...opts,
  });
  cleanup.push(() => client.close());
  return client;
}

test("the TCP connection cut mid-session: the client resumes without gap or duplicate", { timeout: 60_000 }, async () => {
  const brain = await Brain.start();
  cleanup.push(() => brain.stop());
  const proxy = await Proxy.start(() => brain.port);
  cleanup.push(() => proxy.close());
  const client = brain.client("cut", { url: proxy.url, auth: "query" }); // as a browser sends it
  const observer = brain.client("cut"); // direct, never cut
  cleanup.push(() => client.close(), () => observer.close());
  await observer.connect();
  const seen = collect(client);
  const truth = collect(observer);
  await client.connect();

  let calls = 0;
  await client.register(
    defineCapability({
      name: "ui.count",
      description: "Counts, and cuts the connection on the third call before answering.",
      input: z.object({ i: z.number().int() }),
      handler: async ({ i }) => {
        calls++;
        if (i === 3) proxy.cut(); // the result goes out on the next connection
        return { i, doubled: 2 * i };
      },
    }),
  );
  const mcp = await brain.mcp("cut");
  cleanup.push(() => mcp.close());
  await listed(mcp, "ui.count");
  for (let i = 1; i <= 12; i++) {
    if (i === 6 || i === 9) proxy.cut(); // between calls: the next invocation happens while the client is away
    const r = await within(mcp.callTool({ name: "ui.count", arguments: { i } }), 20_000, `call ${i}`);
    assert.ok(!r.isError, `call ${i}: ${text(r)}`);
    assert.deepEqual(r.structuredContent, { i, doubled: 2 * i });
  }
  assert.equal(calls, 12, "each call ran exactly once");
  assert.ok(proxy.connections >= 4, `the client reconnected (${proxy.connections} connections)`);

  // The cut client saw exactly what the direct observer saw.
  // The MCP result of the last call can arrive before its capability_outcome
  // event: wait for every outcome to reach both, then for both to agree.
  const outcomes = (evs: BrainEvent[]) => evs.filter((e) => e.msg.type === "capability_outcome").length;
  await until(() => outcomes(truth) === 12 && client.lastSeq === observer.lastSeq, "the client to catch up");
  const got = assertContiguous(seen, "cut client");
  const want = assertContiguous(truth, "observer").filter((s) => s >= got[0]!);
  assert.deepEqual(got, want);
  assert.equal(seen.filter((e) => e.msg.type === "snapshot").length, 1, "only the first connection starts from a snapshot");
  assert.equal(seen.filter((e) => e.msg.type === "capability_outcome").length, 12);
});

test("brain serve SIGKILLed with an approval pending: the client reconnects, approves, the call completes", { timeout: 90_000 }, async () => {
  const brain = await Brain.start();
  cleanup.push(() => brain.stop());
  const client = brain.client("durable");
  cleanup.push(() => client.close());
  const seen = collect(client);
  await client.connect();
  let ran = 0;
  await client.register(
    defineCapability({
      name: "ops.deploy",
      description: "Deploy, after a person approves.",
      requiresApproval: true,
      audience: ["llm", "user"],
      input: z.object({ env: z.enum(["staging", "prod"]) }),
      output: z.object({ deployed: z.string() }),
      handler: async ({ env }) => {
        ran++;
        return { deployed: env };
      },
    }),
  );
  const approvals = client.approvals();
  const outcome = client.invoke("ops.deploy", { env: "prod" }); // the palette, as the user
  const req = (await within(approvals.next(), 10_000, "the approval request")).value!;
  assert.equal(req.invoker, "user");
  // Replies come in command order: once this one is back, the invoke's ack
  // (with its callId) is too, so the promise outlives the kill.
  await client.deregister("no.such.capability");
  const before = client.lastSeq!;

  await brain.kill("SIGKILL");
  await waitState(client, "connecting");
  await brain.restart();
  await waitState(client, "open");
  await req.approve({ decidedBy: "ada" });
  assert.deepEqual(await within(outcome, 20_000, "the outcome"), { ok: true, value: { deployed: "prod" } });
  assert.equal(ran, 1);
  const seqs = assertContiguous(seen, "across the restart");
  assert.ok(seqs.includes(before + 1), "events after the restart continue the seq");
  assert.deepEqual(
    seen
      .filter((e) => e.seq > before)
      .map((e) => e.msg.type)
      .filter((t) => t !== "approval_decided"),
    ["capability_invoked", "capability_outcome"],
  );
  await approvals.return!();
});

test("a kernel that lost the session gets the client's capabilities again", { timeout: 90_000 }, async () => {
  const brain = await Brain.start();
  cleanup.push(() => brain.stop());
  const client = brain.client("lost");
  cleanup.push(() => client.close());
  const seen = collect(client);
  await client.connect();
  await client.register(
    defineCapability({ name: "ui.ping", description: "Ping.", input: z.object({}), handler: async () => ({ pong: true }) }),
  );
  // The registration's event can trail its ack: wait for it, so that the
  // seq the client resumes from is past anything the new session reaches
  // (a recreated session at the very same seq is indistinguishable by seq).
  // (The registration shows either as its event or inside the first
  // snapshot, when the kernel took it after applying the registration.)
  const has = (e: BrainEvent) =>
    (e.msg.type === "capability_register" || e.msg.type === "snapshot") && e.msg.capabilities.some((c) => c.name === "ui.ping");
  await until(() => seen.some(has), "the registration to be seen");
  const before = seen.length;
  await brain.restart({ fresh: true }); // same port and tokens, no sessions
  await until(() => seen.slice(before).some((e) => e.msg.type === "capability_register"), "the capability to be registered again");
  const after = seen.slice(before).map((e) => e.msg.type);
  assert.deepEqual(after.slice(0, 2), ["snapshot", "capability_register"], after.join(","));
  const mcp = await brain.mcp("lost");
  cleanup.push(() => mcp.close());
  await listed(mcp, "ui.ping");
  const r = await mcp.callTool({ name: "ui.ping", arguments: {} });
  assert.deepEqual(r.structuredContent, { pong: true }, text(r));
});

test("events a kernel sends twice are delivered once", { timeout: 20_000 }, async () => {
  // A stand-in kernel on loopback that ignores ?after= and replays from the
  // start on every connection, the worst a resume can do.
  const urls: string[] = [];
  const frame = (seq: number, name: string) =>
    JSON.stringify({ v: 2, seq, msg: { type: "capability_deregister", names: [name] } });
  const port = await standIn((sock, url) => {
    urls.push(url);
    const n = urls.length;
    sock.send(frame(1, "a"));
    sock.send(frame(2, "b"));
    if (n === 1) {
      sock.close(); // drop after two events
    } else {
      sock.send(frame(3, "c"));
    }
  });
  const client = standInClient(port, "dup", { reconnect: { initialDelayMs: 5, maxDelayMs: 20 } });
  const seen = collect(client);
  await client.connect();
  await until(() => client.lastSeq === 3, "seq 3");
  assert.deepEqual(seen.map((e) => e.seq), [1, 2, 3]);
  assert.equal(client.duplicatesDropped, 2);
  assert.ok(!urls[0]!.includes("after="), urls[0]);
  assert.match(urls[1]!, /[?&]after=2(&|$)/);
  assert.match(urls[1]!, /[?&]token=t{20}(&|$)/);
});

test("results refused by the frame rate limit are sent again, and every call completes", { timeout: 60_000 }, async () => {
  const brain = await Brain.start({ config: "limits:\n  frames_per_second: 20\n  frame_burst: 4\n" });
  cleanup.push(() => brain.stop());
  const client = brain.client("throttled");
  cleanup.push(() => client.close());
  const refused: string[] = [];
  client.on("error", (e) => refused.push(`${e.code}: ${e.message}`));
  await client.connect();
  await client.register(
    defineCapability({ name: "ui.sq", description: "Square.", input: z.object({ n: z.number() }), handler: async ({ n }) => ({ sq: n * n }) }),
  );
  const mcp = await brain.mcp("throttled");
  cleanup.push(() => mcp.close());
  await listed(mcp, "ui.sq");
  const rs = await within(
    Promise.all(Array.from({ length: 12 }, (_, n) => mcp.callTool({ name: "ui.sq", arguments: { n } }))),
    40_000,
    "12 concurrent calls through a 4-frame burst",
  );
  rs.forEach((r, n) => assert.deepEqual(r.structuredContent, { sq: n * n }, text(r)));
  assert.deepEqual(refused, [], "no result was given up");
});

test("a fresh client picks up from the snapshot: pending approvals, and calls it never saw", { timeout: 60_000 }, async () => {
  const brain = await Brain.start();
  cleanup.push(() => brain.stop());
  const first = brain.client("handover");
  cleanup.push(() => first.close());
  await first.connect();
  const started = new Promise<void>((resolve) =>
    first.register(
      defineCapability({
        name: "ui.job",
        description: "A job the first tab starts and never finishes.",
        input: z.object({ n: z.number() }),
        handler: () => {
          resolve();
          return new Promise(() => {});
        },
      }),
      defineCapability({
        name: "ui.confirm",
        description: "Needs a yes.",
        requiresApproval: true,
        input: z.object({ what: z.string() }),
        handler: async ({ what }) => ({ confirmed: what }),
      }),
    ),
  );
  const mcp = await brain.mcp("handover");
  cleanup.push(() => mcp.close());
  await listed(mcp, "ui.job", "ui.confirm");
  const job = mcp.callTool({ name: "ui.job", arguments: { n: 4 } });
  const confirm = mcp.callTool({ name: "ui.confirm", arguments: { what: "ship" } });
  await within(started, 10_000, "the first handler");
  await until(() => first.pendingApprovals().length === 1, "the approval request");
  first.close(); // the tab goes away

  // A new tab, with the same definitions, starting from a snapshot.
  const second = brain.client("handover");
  cleanup.push(() => second.close());
  const approvals: string[] = [];
  second.on("approval", (r) => approvals.push(r.name));
  const reg = second.register(
    defineCapability({ name: "ui.job", description: "The same job, finished here.", input: z.object({ n: z.number() }), handler: async ({ n }) => ({ done: n }) }),
    defineCapability({
      name: "ui.confirm",
      description: "Needs a yes.",
      requiresApproval: true,
      input: z.object({ what: z.string() }),
      handler: async ({ what }) => ({ confirmed: what }),
    }),
  );
  await second.connect();
  await reg;
  const r1 = await within(job, 20_000, "the job, answered by the second tab");
  assert.deepEqual(r1.structuredContent, { done: 4 }, text(r1));
  await until(() => second.pendingApprovals().length === 1, "the pending approval from the snapshot");
  assert.deepEqual(approvals, ["ui.confirm"]);
  await second.pendingApprovals()[0]!.approve({ decidedBy: "ada" });
  const r2 = await within(confirm, 20_000, "the approved call");
  assert.deepEqual(r2.structuredContent, { confirmed: "ship" }, text(r2));
});


test("connect resolves once the snapshot is applied, not at the socket's open", { timeout: 20_000 }, async () => {
  // A stand-in kernel that holds the snapshot until the test releases it,
  // as a loaded kernel may: connect must not resolve before it, or a host
  // that reads capabilities() right after connect sees an empty session.
  let release: () => void = () => {};
  let connectedNow: () => void = () => {};
  const connected = new Promise<void>((resolve) => (connectedNow = resolve));
  const port = await standIn((sock) => {
    release = () =>
      sock.send(
        JSON.stringify({
          v: 2,
          msg: {
            type: "snapshot",
            seq: 7,
            capabilities: [{ name: "ui.held", description: "Registered before this client came.", side: "client", origin: { kind: "client" } }],
            pendingCalls: [],
          },
        }),
      );
    connectedNow();
  });
  const client = standInClient(port, "held");
  let resolved = false;
  const connecting = client.connect().then(() => {
    resolved = true;
  });
  await within(connected, 10_000, "the connection");
  await waitState(client, "open");
  await new Promise((r) => setImmediate(r)); // let a resolved connect run its continuation
  assert.equal(resolved, false, "connect resolved before the snapshot");
  const seen = collect(client);
  release();
  await within(connecting, 10_000, "connect after the snapshot");
  assert.deepEqual(client.capabilities().map((c) => c.name), ["ui.held"]);
  assert.equal(client.lastSeq, 7);
  assert.deepEqual(seen.map((e) => e.msg.type), ["snapshot"]);
  await client.connect(); // a later call resolves at once
});
