// brain's MCP endpoint driven by the npm MCP SDK, as hosts built on it
// (Claude Code, Cursor, VS Code's own is alike) drive it: a real brain
// serve on loopback, a model token, Streamable HTTP.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const within = (p, ms, what) =>
  Promise.race([p, new Promise((_, reject) => setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms).unref())]);

// waitFor polls cond (bounded) until it returns a truthy value.
async function waitFor(cond, what, ms = 10_000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

// Brain is one brain serve with a client and a model token of one tenant.
class Brain {
  constructor(config) {
    this.dir = mkdtempSync(join(tmpdir(), "brain-mcp-npm-"));
    this.client = randomBytes(24).toString("hex");
    this.model = randomBytes(24).toString("hex");
    mkdirSync(join(this.dir, "data"), { recursive: true, mode: 0o700 });
    mkdirSync(join(this.dir, "workspace"), { recursive: true });
    writeFileSync(join(this.dir, "workspace", "hello.txt"), "hello from the workspace\n");
    writeFileSync(join(this.dir, "data", "tokens.json"), JSON.stringify({ tokens: [
      { token: this.client, side: "client", name: "platform", tenant: "npm" },
      { token: this.model, side: "model", name: "ada", tenant: "npm" },
    ] }), { mode: 0o600 });
    writeFileSync(join(this.dir, "grants.yaml"), "workspace: ./workspace\nfs: {}\n");
    writeFileSync(join(this.dir, "brain.yaml"), "grants: ./grants.yaml\ntools: [fs.read]\n" + config);
    this.port = 0;
  }
  async start() {
    const args = ["serve", "--addr", `127.0.0.1:${this.port}`, "--data", "data", "--config", "brain.yaml", "--console-addr", "off"];
    this.proc = spawn(process.env.BRAIN_BIN, args, { cwd: this.dir, stdio: ["ignore", "pipe", "pipe"] });
    this.stderr = "";
    this.proc.stderr.on("data", (b) => { this.stderr = (this.stderr + b).slice(-20000); });
    this.exited = new Promise((r) => this.proc.once("exit", r));
    const lines = createInterface({ input: this.proc.stdout });
    const port = await within(new Promise((resolve, reject) => {
      lines.on("line", (l) => { const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(l); if (m) resolve(m[1]); });
      this.proc.once("exit", (c) => reject(new Error(`brain serve exited ${c}: ${this.stderr}`)));
    }), 60_000, "brain serve to listen");
    this.port = Number(port);
  }
  async kill() { this.proc.kill("SIGKILL"); await this.exited; }
  async stop() { await this.kill(); rmSync(this.dir, { recursive: true, force: true }); }
  get url() { return `http://127.0.0.1:${this.port}`; }
  api(path, init = {}) {
    return fetch(this.url + path, { ...init, headers: { Authorization: `Bearer ${this.client}`, ...(init.headers ?? {}) } });
  }
  // mcp connects the SDK's client to session id; fetchLog records requests.
  async mcp(id, { capabilities = {}, onElicit, fetchLog } = {}) {
    const c = new Client({ name: "npm-tests", version: "0.0.0" }, { capabilities });
    if (onElicit) c.setRequestHandler(ElicitRequestSchema, onElicit);
    const f = async (url, init) => {
      const r = await fetch(url, init);
      fetchLog?.push({ method: init?.method ?? "GET", status: r.status });
      return r;
    };
    const t = new StreamableHTTPClientTransport(new URL(`${this.url}/v1/sessions/${id}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${this.model}` } },
      fetch: f,
      reconnectionOptions: { initialReconnectionDelay: 100, maxReconnectionDelay: 500, reconnectionDelayGrowFactor: 1.5, maxRetries: 20 },
    });
    await c.connect(t);
    return { client: c, transport: t };
  }
  async pending(id) {
    const r = await this.api(`/v1/sessions/${id}`);
    if (r.status !== 200) return [];
    const s = await r.json();
    return (s.snapshot ?? s).pendingCalls ?? [];
  }
}

const config = `policy:
  - match: "fs.*"
    requiresApproval: true
approvals:
  mcp_elicitation: true
`;

const text = (res) => res.content.map((c) => c.text).join("\n");

test("an approval answered through the host's elicitation: approve, reject with feedback", async (t) => {
  const b = new Brain(config);
  await b.start();
  t.after(() => b.stop());
  const asked = [];
  let answer;
  const { client } = await b.mcp("elicit", {
    capabilities: { elicitation: {} },
    onElicit: async (req) => { asked.push(req.params); return answer; },
  });
  answer = { action: "accept", content: { decision: "approve" } };
  let res = await within(client.callTool({ name: "fs.read", arguments: { path: "hello.txt" } }), 20_000, "the approved call");
  assert.equal(res.isError, undefined, text(res));
  assert.match(text(res), /hello from the workspace/);
  assert.equal(asked.length, 1);
  assert.match(asked[0].message, /fs\.read/);
  assert.match(asked[0].message, /hello\.txt/);
  assert.deepEqual(asked[0].requestedSchema.required, ["decision"]);

  answer = { action: "accept", content: { decision: "reject", feedback: "not that file" } };
  res = await within(client.callTool({ name: "fs.read", arguments: { path: "hello.txt" } }), 20_000, "the rejected call");
  assert.equal(res.isError, true);
  assert.equal(text(res), "rejected: the user (ada) rejected the call: not that file");
  await client.close();
});

test("delete with a waiting call: the caller gets cancelled, the session never reappears (the SDK's reconnect included)", async (t) => {
  const b = new Brain(config);
  await b.start();
  t.after(() => b.stop());
  const log = [];
  const { client } = await b.mcp("doomed", { fetchLog: log }); // no elicitation: the call waits
  const call = client.callTool({ name: "fs.read", arguments: { path: "hello.txt" } });
  await waitFor(async () => (await b.pending("doomed")).length === 1, "the call to wait for its approval");
  const del = await b.api("/v1/sessions/doomed", { method: "DELETE" });
  assert.equal(del.status, 200);
  const res = await within(call, 10_000, "the waiting call's answer");
  assert.equal(res.isError, true);
  assert.match(text(res), /^cancelled: .*deleted/);
  // The SDK reconnects its GET stream with the old Mcp-Session-Id: 404,
  // and the session stays deleted.
  const gets = () => log.filter((r) => r.method === "GET" && r.status === 404).length;
  await waitFor(() => gets() >= 1, "the SDK's GET to be refused", 15_000);
  await assert.rejects(client.listTools(), /404|not found|Session/i);
  const list = await (await b.api("/v1/sessions")).json();
  const ids = (list.sessions ?? list).map((s) => s.id);
  assert.ok(!ids.includes("doomed"), `the deleted session is listed again: ${JSON.stringify(list)}`);
  assert.equal((await b.api("/v1/sessions/doomed")).status, 404);
  await client.close().catch(() => {});
});

test("an MCP session goes on across a restart of brain (its id is restored, not forgotten)", async (t) => {
  const b = new Brain("limits:\n  frames_per_second: -1\n");
  await b.start();
  t.after(() => b.stop());
  const { client, transport } = await b.mcp("kept");
  const before = transport.sessionId;
  assert.ok((await client.listTools()).tools.some((x) => x.name === "fs.read"));
  await b.kill();
  await b.start(); // the same port and data
  const res = await within(client.callTool({ name: "fs.read", arguments: { path: "hello.txt" } }), 20_000, "a call after the restart");
  assert.equal(res.isError, undefined, text(res));
  assert.equal(transport.sessionId, before);
  await client.close();
});
