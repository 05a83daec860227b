// The client against a real `brain serve` built from this repository, with
// the MCP SDK as the model side.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { z } from "zod";

import { BrainError, defineCapability, type BrainClient, type BrainEvent } from "../src/index.js";
import { Brain, Deferred, listed, text, within } from "./brain.js";

let brain: Brain;
const clients: BrainClient[] = [];
const mcps: { close(): Promise<void> }[] = [];

before(async () => {
  brain = await Brain.start();
});

after(async () => {
  for (const c of clients) c.close();
  for (const m of mcps) await m.close().catch(() => {});
  await brain.stop();
});

async function setup(session: string) {
  const client = brain.client(session);
  clients.push(client);
  await within(client.connect(), 10_000, "the client to connect");
  const mcp = await brain.mcp(session);
  mcps.push(mcp);
  return { client, mcp };
}

describe("client-side capabilities over MCP", { timeout: 30_000 }, () => {
  test("register, list and answer a call made over MCP", async () => {
    const { client, mcp } = await setup("answer");
    const greet = defineCapability({
      name: "ui.greet",
      description: "Greet someone in the host's UI.",
      input: z.object({ name: z.string().min(1), times: z.number().int().optional() }),
      output: z.object({ greeting: z.string() }),
      handler: async ({ name, times }, ctx) => {
        assert.equal(ctx.name, "ui.greet");
        assert.equal(ctx.signal.aborted, false);
        return { greeting: `hello ${name}`.repeat(times ?? 1) };
      },
    });
    assert.deepEqual(greet.capability.side, "client");
    assert.deepEqual(greet.capability.origin, { kind: "client" });
    assert.equal((greet.capability.inputSchema as { type: string }).type, "object");
    await client.register(greet);
    await listed(mcp, "ui.greet");

    const tools = await mcp.listTools();
    const tool = tools.tools.find((t) => t.name === "ui.greet");
    assert.ok(tool, "ui.greet is listed over MCP");
    assert.deepEqual(tool.inputSchema.required, ["name"]);

    const r = await mcp.callTool({ name: "ui.greet", arguments: { name: "ada" } });
    assert.ok(!r.isError, text(r));
    assert.deepEqual(r.structuredContent, { greeting: "hello ada" });
    assert.ok(client.capabilities().some((c) => c.name === "ui.greet"), "the client saw its registration event");
  });

  test("a handler's progress reaches the MCP caller that asked for it", async () => {
    const { client, mcp } = await setup("progress");
    const pages = defineCapability({
      name: "ui.read_pages",
      description: "Read some pages in the host's UI.",
      input: z.object({ pages: z.number().int().min(1).max(10) }),
      handler: async ({ pages }, ctx) => {
        ctx.progress(0, pages, "starting");
        ctx.progress(pages, pages, "all read"); // final: passes however soon after the first
        return { read: pages };
      },
    });
    await client.register(pages);
    await listed(mcp, "ui.read_pages");
    const seen: { progress: number; total: number | undefined; message: string | undefined }[] = [];
    const allRead = new Deferred<void>();
    const r = await mcp.callTool({ name: "ui.read_pages", arguments: { pages: 3 } }, undefined, {
      onprogress: (p) => {
        seen.push({ progress: p.progress, total: p.total, message: p.message });
        if (p.progress === 3) allRead.resolve();
      },
    });
    assert.ok(!r.isError, text(r));
    await within(allRead.promise, 10_000, "the final progress notification");
    assert.deepEqual(seen.at(-1), { progress: 3, total: 3, message: "all read" });
    assert.deepEqual(seen[0], { progress: 0, total: 3, message: "starting" });
  });

  test("a refused registration rejects with the kernel's code", async () => {
    const { client } = await setup("refused");
    await assert.rejects(
      client.register({
        name: "not.mine",
        description: "an agent capability from a client",
        inputSchema: { type: "object" },
        side: "agent",
        origin: { kind: "agent" },
      }),
      (err: unknown) => err instanceof BrainError && err.code === "forbidden" && err.message.length > 0,
    );
    await assert.rejects(
      client.register({ name: "bad schema", description: "", inputSchema: { type: "object" }, side: "client", origin: { kind: "client" } }),
      (err: unknown) => err instanceof BrainError && err.code === "invalid_request",
    );
  });

  test("a wrong token: connect keeps trying and says why, the kernel's words included", async () => {
    const client = brain.client("badtoken", { token: "not-a-token-of-this-kernel" });
    clients.push(client);
    const errors: BrainError[] = [];
    client.on("error", (e) => errors.push(e));
    const ac = new AbortController();
    const connecting = client.connect({ signal: ac.signal });
    const deadline = Date.now() + 10_000;
    while (errors.length < 2) {
      assert.ok(Date.now() < deadline, "no error events");
      await new Promise((r) => setTimeout(r, 5));
    }
    assert.equal(errors[0]!.code, "unavailable");
    assert.match(errors[0]!.message, /could not connect to ws:\/\/127\.0\.0\.1:\d+\/v1\/sessions\/badtoken\/ws/);
    // The third failure in a row asks the kernel why over HTTP, and says it.
    while (!errors.some((e) => e.code === "forbidden")) {
      assert.ok(Date.now() < deadline, `no diagnosis among ${errors.map((e) => e.message).join(" | ")}`);
      await new Promise((r) => setTimeout(r, 5));
    }
    assert.match(errors.find((e) => e.code === "forbidden")!.message, /refuses this client's token: a valid token is required/);
    assert.equal(client.state, "connecting");
    ac.abort(new Error("gave up"));
    await assert.rejects(connecting, /gave up/);
    client.close();
  });

  test("a deleted session ends the client for good, saying so (it reconnected for ever)", async () => {
    const client = brain.client("deleted-under-it");
    clients.push(client);
    await client.connect();
    const errors: BrainError[] = [];
    client.on("error", (e) => errors.push(e));
    const res = await fetch(`${brain.url}/v1/sessions/deleted-under-it`, { method: "DELETE", headers: { Authorization: `Bearer ${brain.token}` } });
    assert.equal(res.status, 200, await res.text());
    const deadline = Date.now() + 10_000;
    while (client.state !== "closed") {
      assert.ok(Date.now() < deadline, `state ${client.state} after the delete`);
      await new Promise((r) => setTimeout(r, 5));
    }
    assert.equal(errors.length, 1);
    assert.equal(errors[0]!.code, "not_found");
    assert.match(errors[0]!.message, /4404/);
    await assert.rejects(
      client.register({ name: "late", description: "", inputSchema: { type: "object" }, side: "client", origin: { kind: "client" } }),
      (err: unknown) => err instanceof BrainError,
    );
  });

  test("4401: a token's grant changed, the client connects again; the token removed, it ends", async () => {
    const own = await Brain.start(); // its own kernel: this test rewrites the tokens
    try {
      const client = own.client("grants");
      await within(client.connect(), 10_000, "the client to connect");
      const errors: BrainError[] = [];
      client.on("error", (e) => errors.push(e));
      const states: string[] = [];
      client.on("state", (st) => states.push(st));
      own.writeTokens("renamed"); // the same token, another name: its sockets close 4401
      const deadline = Date.now() + 20_000;
      const stateNow = (): string => client.state; // read anew each time (no narrowing)
      while (!(states.includes("connecting") && stateNow() === "open")) {
        assert.ok(Date.now() < deadline, `states ${states.join(",")} after a grant changed`);
        await new Promise((r) => setTimeout(r, 10));
      }
      assert.ok(!errors.some((e) => e.code === "forbidden"), errors.map((e) => e.message).join(" | "));
      own.writeTokens(null); // removed
      while (stateNow() !== "closed") {
        assert.ok(Date.now() < deadline, `state ${stateNow()} after the token was removed`);
        await new Promise((r) => setTimeout(r, 10));
      }
      assert.ok(errors.some((e) => e.code === "forbidden" && /4401/.test(e.message)), errors.map((e) => e.message).join(" | "));
    } finally {
      await own.stop();
    }
  });

  test("a handler's error reaches the MCP caller with its code", async () => {
    const { client, mcp } = await setup("errors");
    class QuotaError extends Error {
      readonly code = "rate_limited";
    }
    await client.register(
      defineCapability({
        name: "ui.limited",
        description: "Fails with a code.",
        input: z.object({ kind: z.enum(["coded", "brain", "plain", "zod"]), email: z.string().optional() }),
        handler: async ({ kind }) => {
          if (kind === "coded") throw new QuotaError("quota exhausted, retry in 30 s");
          if (kind === "brain") throw new BrainError("host.busy", "the host is busy");
          throw new Error("something broke");
        },
      }),
      defineCapability({
        name: "ui.email",
        description: "Validated here beyond JSON Schema.",
        input: z.object({ to: z.string().refine((s) => s.endsWith("@example.com"), "must be an example.com address") }),
        handler: async ({ to }) => ({ sent: to }),
      }),
    );
    await listed(mcp, "ui.limited", "ui.email");
    const coded = await mcp.callTool({ name: "ui.limited", arguments: { kind: "coded" } });
    assert.equal(coded.isError, true);
    assert.equal(text(coded), "rate_limited: quota exhausted, retry in 30 s");
    const brainErr = await mcp.callTool({ name: "ui.limited", arguments: { kind: "brain" } });
    assert.equal(text(brainErr), "host.busy: the host is busy");
    const plain = await mcp.callTool({ name: "ui.limited", arguments: { kind: "plain" } });
    assert.equal(text(plain), "tool_error: something broke");
    const invalid = await mcp.callTool({ name: "ui.email", arguments: { to: "ada@elsewhere.org" } });
    assert.equal(invalid.isError, true);
    assert.match(text(invalid), /^invalid_input: input: to: must be an example\.com address$/);
    const ok = await mcp.callTool({ name: "ui.email", arguments: { to: "ada@example.com" } });
    assert.deepEqual(ok.structuredContent, { sent: "ada@example.com" });
  });

  test("approval approved, and rejected with feedback", async () => {
    const { client, mcp } = await setup("approvals");
    let runs = 0;
    await client.register(
      defineCapability({
        name: "fs.delete_folder",
        description: "Delete a folder in the user's workspace.",
        requiresApproval: true,
        input: z.object({ path: z.string() }),
        handler: async ({ path }) => {
          runs++;
          return { deleted: path };
        },
      }),
    );
    await listed(mcp, "fs.delete_folder");
    const approvals = client.approvals();
    const first = mcp.callTool({ name: "fs.delete_folder", arguments: { path: "/tmp/a" } });
    const req = (await within(approvals.next(), 10_000, "an approval request")).value!;
    assert.equal(req.name, "fs.delete_folder");
    assert.deepEqual(req.input, { path: "/tmp/a" });
    assert.equal(req.invoker, "llm");
    assert.equal(req.capability?.requiresApproval, true);
    assert.equal(runs, 0, "nothing runs before approval");
    assert.ok(client.pendingApprovals().some((p) => p.callId === req.callId));
    await client.approve(req.callId, { decision: "approved", decidedBy: "ada" });
    const r1 = await first;
    assert.ok(!r1.isError, text(r1));
    assert.deepEqual(r1.structuredContent, { deleted: "/tmp/a" });
    assert.equal(runs, 1);

    const second = mcp.callTool({ name: "fs.delete_folder", arguments: { path: "/home" } });
    const req2 = (await within(approvals.next(), 10_000, "a second approval request")).value!;
    await req2.reject("not that folder", { decidedBy: "ada" });
    const r2 = await second;
    assert.equal(r2.isError, true);
    assert.match(text(r2), /^rejected: .*ada.*not that folder/);
    assert.equal(runs, 1, "a rejected call never runs");
    assert.ok(!client.pendingApprovals().some((p) => p.callId === req2.callId));

    // Deciding twice is the kernel's conflict, as a rejected promise.
    await assert.rejects(client.approve(req2.callId, { decision: "approved" }), (e: unknown) => e instanceof BrainError);
    await approvals.return!();
  });

  test("an approval withdrawn by a changed registration: the old request's answer is refused", async () => {
    const { client, mcp } = await setup("withdrawn");
    const def = (description: string) =>
      defineCapability({
        name: "mail.send",
        description,
        requiresApproval: true,
        input: z.object({ to: z.string() }),
        handler: async ({ to }) => ({ sentTo: to, description }),
      });
    await client.register(def("Send a mail."));
    await listed(mcp, "mail.send");
    const approvals = client.approvals();
    const call = mcp.callTool({ name: "mail.send", arguments: { to: "bob" } });
    const old = (await within(approvals.next(), 10_000, "the first request")).value!;
    await client.register(def("Send a mail, and forward it to everyone.")); // changed under the dialog
    const fresh = (await within(approvals.next(), 10_000, "the request again")).value!;
    assert.equal(fresh.callId, old.callId);
    assert.notEqual(fresh.inputDigest, old.inputDigest);
    await assert.rejects(old.approve({ decidedBy: "ada" }), (e: unknown) => e instanceof BrainError && e.code === "stale_approval");
    await fresh.approve({ decidedBy: "ada" });
    const r = await call;
    assert.deepEqual(r.structuredContent, { sentTo: "bob", description: "Send a mail, and forward it to everyone." }, text(r));
    await approvals.return!();
  });

  test("fire-and-forget: the spec's own example", async () => {
    const { client, mcp } = await setup("react");
    const reacted = new Deferred<{ emoji: string; targetSeq: number | undefined }>();
    const gate = new Deferred<void>();
    // As written in spec/capabilities.d.ts.
    const reactTool = defineCapability({
      name: "platform.react",
      description: "Acknowledge a user message with a Unicode emoji.",
      side: "client",
      origin: { kind: "client" },
      fireAndForget: true,
      input: z.object({ emoji: z.string(), targetSeq: z.number().optional() }),
      handler: async ({ emoji, targetSeq }, ctx) => {
        await gate.promise; // still running when the caller has its answer
        assert.equal(ctx.signal.aborted, false, "a fire-and-forget handler is not aborted by its {} outcome");
        reacted.resolve({ emoji, targetSeq });
      },
    });
    await client.register(reactTool);
    await listed(mcp, "platform.react");
    const r = await within(mcp.callTool({ name: "platform.react", arguments: { emoji: "👍", targetSeq: 7 } }), 10_000, "the {} result");
    assert.ok(!r.isError, text(r));
    assert.deepEqual(r.structuredContent, {});
    gate.resolve();
    assert.deepEqual(await within(reacted.promise, 10_000, "the handler"), { emoji: "👍", targetSeq: 7 });
  });

  test("render: the request carries its capability", async () => {
    const { client, mcp } = await setup("render");
    const renders = client.renders();
    await client.register(
      defineCapability({
        name: "ui.gif",
        description: "Show a GIF in the chat.",
        kind: "render",
        render: {
          source: { kind: "web-component", url: "https://ui.example.com/gif.js", tagName: "ui-gif" },
          targets: ["chat"],
          fallback: "![{{query}}]({{url}})",
        },
        input: z.object({ query: z.string() }),
        handler: async () => ({ shown: true }),
      }),
    );
    await listed(mcp, "ui.gif");
    const call = mcp.callTool({ name: "ui.gif", arguments: { query: "cats" } });
    const rr = (await within(renders.next(), 10_000, "render_invoked")).value!;
    assert.equal(rr.capabilityName, "ui.gif");
    assert.deepEqual(rr.props, { query: "cats" });
    assert.equal(rr.capability?.render.source.kind, "web-component");
    assert.equal(rr.capability?.render.source.kind === "web-component" && rr.capability.render.source.tagName, "ui-gif");
    const r = await call;
    assert.deepEqual(r.structuredContent, { shown: true });
    await renders.return!();
  });

  test("render as an MCP App: a host with the extension gets a ui:// resource, one without a plain tool", async () => {
    const { client, mcp: plain } = await setup("apps");
    await client.register(
      defineCapability({
        name: "ui.card",
        description: "Show a card in the chat.",
        kind: "render",
        render: { source: { kind: "web-component", url: "https://ui.example.com/card.js", tagName: "ui-card" }, targets: ["chat"], fallback: "**{{title}}**" },
        input: z.object({ title: z.string() }),
        handler: async () => ({ shown: true }),
      }),
    );
    await listed(plain, "ui.card");
    const host = await brain.mcp("apps", { extensions: { "io.modelcontextprotocol/ui": { mimeTypes: ["text/html;profile=mcp-app"] } } });
    mcps.push(host);
    const tool = (await host.listTools()).tools.find((t) => t.name === "ui.card");
    const uri = (tool?._meta as { ui?: { resourceUri?: string } } | undefined)?.ui?.resourceUri;
    assert.equal(uri, "ui://brain/render/ui.card");
    const res = await host.readResource({ uri: uri! });
    const page = res.contents[0] as { mimeType?: string; text?: string };
    assert.equal(page.mimeType, "text/html;profile=mcp-app");
    assert.match(page.text ?? "", /<script/);
    assert.doesNotMatch(page.text ?? "", /<script[^>]+src=/, "the app is self-contained");
    const plainTool = (await plain.listTools()).tools.find((t) => t.name === "ui.card");
    assert.equal((plainTool?._meta as { ui?: unknown } | undefined)?.ui, undefined, "a host without the extension sees today's tool");
    const r = await host.callTool({ name: "ui.card", arguments: { title: "<img src=x onerror=alert(1)>" } });
    assert.ok(!r.isError, text(r));
  });

  test("an MCP caller that gives up (notifications/cancelled) ends the call cancelled", async () => {
    const { client, mcp } = await setup("mcp-cancel");
    const started = new Deferred<void>();
    const aborted = new Deferred<unknown>();
    await client.register(
      defineCapability({
        name: "ui.slow",
        description: "Waits until cancelled.",
        input: z.object({}),
        handler: (_input, ctx) =>
          new Promise((_resolve, reject) => {
            ctx.signal.addEventListener("abort", () => {
              aborted.resolve(ctx.signal.reason);
              reject(ctx.signal.reason);
            });
            started.resolve();
          }),
      }),
    );
    await listed(mcp, "ui.slow");
    const events = client.events();
    const giveUp = new AbortController();
    const call = mcp.callTool({ name: "ui.slow", arguments: {} }, undefined, { signal: giveUp.signal });
    await within(started.promise, 10_000, "the handler to start");
    giveUp.abort("the host's user pressed stop");
    await assert.rejects(call);
    const reason = await within(aborted.promise, 10_000, "the handler's signal");
    assert.ok(reason instanceof BrainError && reason.code === "cancelled", String(reason));
    for (;;) {
      const ev = (await within(events.next(), 10_000, "the call's outcome")).value as BrainEvent;
      if (ev.msg.type === "capability_outcome" && ev.msg.name === "ui.slow") {
        const out = ev.msg.outcome;
        assert.equal(out.ok ? "ok" : out.error.code, "cancelled");
        break;
      }
    }
    await events.return!();
  });

  test("a call cancelled while its handler runs: the signal fires", async () => {
    const { client, mcp } = await setup("cancel");
    const started = new Deferred<string>();
    const aborted = new Deferred<unknown>();
    await client.register(
      defineCapability({
        name: "ui.wait",
        description: "Waits until cancelled.",
        input: z.object({}),
        handler: (_input, ctx) =>
          new Promise((_resolve, reject) => {
            ctx.signal.addEventListener("abort", () => {
              aborted.resolve(ctx.signal.reason);
              reject(ctx.signal.reason);
            });
            started.resolve(ctx.callId);
          }),
      }),
    );
    await listed(mcp, "ui.wait");
    const call = mcp.callTool({ name: "ui.wait", arguments: {} });
    const callId = await within(started.promise, 10_000, "the handler to start");
    await client.cancel(callId, "the user closed the panel");
    const reason = await within(aborted.promise, 10_000, "the signal");
    assert.ok(reason instanceof BrainError && reason.code === "cancelled", String(reason));
    const r = await call;
    assert.equal(r.isError, true);
    assert.match(text(r), /^cancelled: /);
    await assert.rejects(client.cancel(callId), (e: unknown) => e instanceof BrainError && e.code === "conflict");
  });

  test("a timeout fires the signal and reaches the caller", async () => {
    const { client, mcp } = await setup("timeout");
    const aborted = new Deferred<unknown>();
    await client.register(
      defineCapability({
        name: "ui.slow",
        description: "Never answers in time.",
        callTimeoutMs: 300,
        input: z.object({}),
        handler: (_input, ctx) =>
          new Promise((_resolve, reject) => {
            ctx.signal.addEventListener("abort", () => {
              aborted.resolve(ctx.signal.reason);
              reject(ctx.signal.reason);
            });
          }),
      }),
    );
    await listed(mcp, "ui.slow");
    const t0 = Date.now();
    const r = await within(mcp.callTool({ name: "ui.slow", arguments: {} }), 10_000, "the timeout");
    assert.equal(r.isError, true);
    assert.match(text(r), /^timeout: /);
    const reason = await within(aborted.promise, 5_000, "the signal");
    assert.ok(reason instanceof BrainError && reason.code === "timeout", String(reason));
    assert.ok(Date.now() - t0 >= 250, "not before callTimeoutMs");
  });
});

describe("palette and events", { timeout: 30_000 }, () => {
  test("list user-invokable capabilities and invoke one", async () => {
    const { client } = await setup("palette");
    await client.register(
      defineCapability({
        name: "ui.theme",
        displayName: "Switch theme",
        description: "Switch the UI theme.",
        audience: ["llm", "user"],
        input: z.object({ theme: z.enum(["light", "dark"]) }),
        handler: async ({ theme }) => ({ theme }),
      }),
      defineCapability({
        name: "platform.pass",
        description: "LLM only (client origin defaults to hidden).",
        input: z.object({}),
        handler: async () => ({}),
      }),
    );
    const palette = client.userCapabilities().map((c) => c.name);
    assert.ok(palette.includes("ui.theme"), `palette: ${palette}`);
    assert.ok(!palette.includes("platform.pass"), `palette: ${palette}`);
    assert.deepEqual(await client.invoke("ui.theme", { theme: "dark" }), { ok: true, value: { theme: "dark" } });
    const bad = await client.invoke("ui.theme", { theme: "pink" });
    assert.equal(bad.ok, false);
    assert.equal(!bad.ok && bad.error.code, "invalid_input");
    const hidden = await client.invoke("platform.pass", {});
    assert.equal(!hidden.ok && hidden.error.code, "forbidden");
    const missing = await client.invoke("no.such", {});
    assert.equal(!missing.ok && missing.error.code, "not_found");
  });

  test("every event through the async iterator, in seq order", async () => {
    const { client, mcp } = await setup("events");
    const seen: BrainEvent[] = [];
    const ac = new AbortController();
    const done = (async () => {
      for await (const ev of client.events({ signal: ac.signal })) {
        seen.push(ev);
        if (ev.msg.type === "capability_outcome") ac.abort();
      }
    })();
    await client.register(
      defineCapability({ name: "ui.echo", description: "Echo.", input: z.object({ v: z.number() }), handler: async ({ v }) => ({ v }) }),
    );
    await listed(mcp, "ui.echo");
    await mcp.callTool({ name: "ui.echo", arguments: { v: 1 } });
    await within(done, 10_000, "the outcome event");
    const types = seen.map((e) => e.msg.type);
    assert.deepEqual(types, ["capability_register", "capability_invoked", "capability_outcome"]);
    for (let i = 1; i < seen.length; i++) assert.equal(seen[i]!.seq, seen[i - 1]!.seq + 1);
    assert.equal(client.lastSeq, seen.at(-1)!.seq);
  });

  test("turns: a turn-scoped capability is dropped when the turn ends", async () => {
    const { client } = await setup("turns");
    const seen: BrainEvent[] = [];
    client.on("event", (e) => seen.push(e));
    await client.startTurn();
    await client.register(
      defineCapability({
        name: "draft.preview",
        description: "Preview the draft of this turn.",
        scope: "turn",
        input: z.object({}),
        handler: async () => ({}),
      }),
    );
    assert.ok(client.capabilities().some((c) => c.name === "draft.preview"));
    await client.endTurn();
    const deadline = Date.now() + 10_000;
    while (!seen.some((e) => e.msg.type === "turn_ended")) {
      assert.ok(Date.now() < deadline, "no turn_ended event");
      await new Promise((r) => setTimeout(r, 5));
    }
    const types = seen.map((e) => e.msg.type);
    assert.ok(types.includes("turn_started"), types.join(","));
    assert.ok(types.indexOf("capability_deregister") < types.indexOf("turn_ended"), types.join(","));
    const ended = seen.find((e) => e.msg.type === "turn_ended")!.msg;
    assert.equal(ended.type === "turn_ended" && ended.reason, "completed");
    assert.ok(!client.capabilities().some((c) => c.name === "draft.preview"), "dropped from the client's view");
    await assert.rejects(client.cancelTurn(), (e: unknown) => e instanceof BrainError && e.code === "conflict");
  });
});
