// Connected clients measured from outside (issue 21, scale.sh's "outside"
// step): the brain serve binary in a process of its own, N npm `ws`
// clients connecting to it the way a platform's do — each to a session of
// its own, snapshot first, then a client capability registered — and the
// node's resident memory read from /proc, per client over a baseline of
// one client, as the node settles without help.
//
//   node scale/outside.mjs --brain PATH [--sizes 1000,3000,10000] [--json FILE]
//
// Each size gets a fresh node and data directory, removed afterwards.
import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir, loadavg } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import WebSocket from "ws";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, a, i, all) => (a.startsWith("--") ? [...pairs, [a.slice(2), all[i + 1]]] : pairs), []),
);
if (!args.brain) {
  console.error("usage: node scale/outside.mjs --brain PATH [--sizes 1000,3000,10000] [--json FILE]");
  process.exit(2);
}
const sizes = (args.sizes ?? "1000,3000,10000").split(",").map(Number);
const dialers = 64; // connects in flight at once, as scale.sh's in-process clients
const baselineWait = 20_000; // the node steady with one client
const samplesAt = [30_000, 60_000]; // after the clients connected: the node gives memory back 15-25 s after a busy spell (internal/settle)
const connectTimeout = 30_000;

const capability = {
  name: "ui.toast",
  description: "Show a toast.",
  inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
  side: "client",
  origin: { kind: "client" },
};

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function rssKiB(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  if (!m) throw new Error(`no VmRSS for process ${pid}`);
  return Number(m[1]);
}

async function startNode(dir) {
  mkdirSync(join(dir, "workspace"));
  writeFileSync(join(dir, "grants.yaml"), `workspace: ${join(dir, "workspace")}\nfs: {}\njs: {}\n`);
  writeFileSync(join(dir, "brain.yaml"), "grants: grants.yaml\ntools: [fs.read, fs.search, js.eval]\nlimits:\n  sessions_per_token: -1\n");
  const port = await freePort();
  const addr = `127.0.0.1:${port}`;
  const node = spawn(args.brain, ["serve", "--addr", addr, "--data", join(dir, "data"), "--config", join(dir, "brain.yaml"), "--console-addr", "off"], {
    cwd: dir,
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  node.stderr.on("data", (d) => (log = (log + d).slice(-8192)));
  const exited = new Promise((resolve) => node.once("exit", resolve));
  for (const deadline = Date.now() + 60_000; ; ) {
    if (node.exitCode !== null) throw new Error(`brain serve exited: ${log}`);
    try {
      if ((await fetch(`http://${addr}/readyz`)).ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`brain serve not ready within a minute: ${log}`);
    await sleep(100);
  }
  const tokens = JSON.parse(readFileSync(join(dir, "data", "tokens.json"), "utf8")).tokens;
  const token = tokens.find((t) => t.side === "client").token;
  return { node, addr, token, exited, log: () => log };
}

// connect opens one client's connection to session id and registers its
// capability; it resolves with the socket once the registration's ack
// is in.
function connect(addr, token, id) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://${addr}/v1/sessions/${id}/ws`, { headers: { Authorization: `Bearer ${token}` } });
    const timer = setTimeout(() => fail(new Error(`${id}: no ack within ${connectTimeout} ms`)), connectTimeout);
    const fail = (err) => {
      clearTimeout(timer);
      ws.terminate();
      reject(err);
    };
    ws.on("open", () => ws.send(JSON.stringify({ v: 2, id: "reg", msg: { type: "capability_register", capabilities: [capability] } })));
    ws.on("message", (data) => {
      const f = JSON.parse(data.toString());
      if (f.ref !== "reg") return;
      if (f.msg.type !== "ack") return fail(new Error(`${id}: ${JSON.stringify(f.msg)}`));
      clearTimeout(timer);
      resolve(ws);
    });
    ws.on("error", fail);
  });
}

async function connectAll(addr, token, prefix, n, into) {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(dialers, n) }, async () => {
      while (next < n) into.push(await connect(addr, token, `${prefix}-${next++}`));
    }),
  );
}

async function measure(n) {
  const dir = mkdtempSync(join(tmpdir(), "brain-outside-"));
  const sockets = [];
  const { node, addr, token, exited, log } = await startNode(dir);
  try {
    await connectAll(addr, token, "base", 1, sockets);
    await sleep(baselineWait);
    const baseline = rssKiB(node.pid);
    const start = Date.now();
    await connectAll(addr, token, "c", n, sockets);
    const connectedMs = Date.now() - start;
    const atOnce = rssKiB(node.pid);
    const after = [];
    for (const at of samplesAt) {
      await sleep(at - (Date.now() - start - connectedMs));
      after.push({ afterSeconds: at / 1000, rssKiB: rssKiB(node.pid) });
    }
    const per = (kib) => ((kib - baseline) * 1024) / n;
    const fig = {
      clients: n,
      connectedMs,
      baselineRssKiB: baseline,
      rssBytesPerClientAtOnce: per(atOnce),
      settled: after.map((a) => ({ ...a, rssBytesPerClient: per(a.rssKiB) })),
      loadAverage: loadavg().map((l) => l.toFixed(2)).join(" "),
    };
    console.error(
      `outside: ${n} clients connected in ${connectedMs} ms: RSS ${(fig.rssBytesPerClientAtOnce / 1024).toFixed(1)} KiB a client at once, ` +
        fig.settled.map((s) => `${(s.rssBytesPerClient / 1024).toFixed(1)} KiB ${s.afterSeconds} s after`).join(", ") +
        ` (baseline ${baseline} KiB, load ${fig.loadAverage})`,
    );
    return fig;
  } catch (err) {
    throw new Error(`${err.message}\nbrain serve's log ends:\n${log()}`);
  } finally {
    for (const ws of sockets) ws.terminate();
    node.kill("SIGTERM");
    await Promise.race([exited, sleep(30_000).then(() => node.kill("SIGKILL"))]);
    rmSync(dir, { recursive: true, force: true });
  }
}

const figs = [];
for (const n of sizes) figs.push(await measure(n));
if (args.json) writeFileSync(args.json, JSON.stringify({ sizes: figs }, null, 2));
