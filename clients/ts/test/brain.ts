// Test helpers: a real `brain serve` built from this repository, started on
// loopback with a temporary data directory; a TCP proxy whose connections
// a test can cut; and bounded waits.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { Client as MCPClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { ClientCapabilities } from "@modelcontextprotocol/sdk/types.js";
import { WebSocket } from "ws";

import { BrainClient, type ClientOptions, type WebSocketConstructor } from "../src/index.js";

const run = promisify(execFile);

/** The repository root (clients/ts/dist/test → four levels up). */
export const repoRoot = fileURLToPath(new URL("../../../../", import.meta.url));

let binary: Promise<string> | undefined;

/** brainBinary returns $BRAIN_BIN, or builds cmd/brain into a temporary directory once per process. */
export function brainBinary(): Promise<string> {
  binary ??= (async () => {
    if (process.env.BRAIN_BIN) {
      return process.env.BRAIN_BIN;
    }
    const out = join(mkdtempSync(join(tmpdir(), "brain-bin-")), "brain");
    await run("go", ["build", "-o", out, "./cmd/brain"], { cwd: repoRoot, timeout: 180_000 });
    return out;
  })();
  return binary;
}

let consoleFlag: Promise<string[]> | undefined;

/** The flags that keep a test kernel to its own port (no console listener on a fixed one). */
function extraFlags(bin: string): Promise<string[]> {
  consoleFlag ??= run(bin, ["serve", "-h"], { timeout: 10_000 }).then(
    (r) => ((r.stdout + r.stderr).includes("console-addr") ? ["--console-addr", "off"] : []),
    (err: { stdout?: string; stderr?: string }) =>
      `${err.stdout ?? ""}${err.stderr ?? ""}`.includes("console-addr") ? ["--console-addr", "off"] : [],
  );
  return consoleFlag;
}

/** Brain is one `brain serve` process on 127.0.0.1 and its data directory. */
export class Brain {
  readonly dir: string;
  /** The client token. */
  readonly token: string;
  /** The model token, of the client's tenant: the MCP endpoint takes it. */
  readonly modelToken: string = randomBytes(24).toString("hex");
  port = 0;
  private proc: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  stderr = "";
  private args: string[] = [];

  private constructor(dir: string, token: string) {
    this.dir = dir;
    this.token = token;
  }

  /** start creates a data directory holding a client token and starts brain serve on a free loopback port. */
  static async start(opts?: { config?: string }): Promise<Brain> {
    const dir = mkdtempSync(join(tmpdir(), "brain-ts-"));
    const b = new Brain(dir, randomBytes(24).toString("hex"));
    b.writeTokens();
    if (opts?.config !== undefined) {
      writeFileSync(join(dir, "brain.yaml"), opts.config);
      b.args = ["--config", "brain.yaml"];
    }
    mkdirSync(join(dir, "workspace"), { recursive: true });
    await b.launch(0);
    return b;
  }

  /** writeTokens writes the kernel's tokens.json (which brain reloads when it changes): the client token named clientName, or none when null. */
  writeTokens(clientName: string | null = "ts-tests"): void {
    mkdirSync(join(this.dir, "data"), { recursive: true, mode: 0o700 });
    const tokens: object[] = [{ token: this.modelToken, side: "model", tenant: "ts" }];
    if (clientName !== null) {
      tokens.unshift({ token: this.token, side: "client", name: clientName, tenant: "ts" });
    }
    writeFileSync(join(this.dir, "data", "tokens.json"), JSON.stringify({ tokens }), { mode: 0o600 });
  }

  /** The HTTP base URL. */
  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  private async launch(port: number): Promise<void> {
    const bin = await brainBinary();
    const args = ["serve", "--addr", `127.0.0.1:${port}`, "--data", "data", ...this.args, ...(await extraFlags(bin))];
    const proc = spawn(bin, args, { cwd: this.dir, stdio: ["ignore", "pipe", "pipe"] });
    this.proc = proc;
    this.exited = new Promise((resolve) => proc.once("exit", () => resolve()));
    proc.stderr!.on("data", (b: Buffer) => {
      this.stderr = (this.stderr + b.toString()).slice(-20_000);
    });
    const lines = createInterface({ input: proc.stdout! });
    const addr = await within(
      new Promise<string>((resolve, reject) => {
        lines.on("line", (l) => {
          const m = /listening on https?:\/\/127\.0\.0\.1:(\d+)/.exec(l);
          if (m) resolve(m[1]!);
        });
        proc.once("exit", (code) => reject(new Error(`brain serve exited with ${code}: ${this.stderr}`)));
      }),
      60_000,
      "brain serve to listen",
    );
    this.port = Number(addr);
  }

  /** kill sends the signal (SIGKILL by default) and waits for the process to end. */
  async kill(signal: NodeJS.Signals = "SIGKILL"): Promise<void> {
    this.proc?.kill(signal);
    await this.exited;
    this.proc = undefined;
  }

  /** restart starts brain again on the same port and data; with fresh, the data is gone first (the tokens stay). */
  async restart(opts?: { fresh?: boolean }): Promise<void> {
    if (this.proc !== undefined) {
      await this.kill();
    }
    if (opts?.fresh) {
      rmSync(join(this.dir, "data"), { recursive: true, force: true });
      this.writeTokens();
    }
    await this.launch(this.port);
  }

  /** stop ends the process and removes its directory. */
  async stop(): Promise<void> {
    await this.kill("SIGKILL");
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** client returns a BrainClient for session id, through `ws` (Node 20 has no global WebSocket), the token in a header unless opts say otherwise. */
  client(session: string, opts?: Partial<ClientOptions> & { url?: string }): BrainClient {
    return new BrainClient({
      url: this.url,
      token: this.token,
      session,
      WebSocket: WebSocket as unknown as WebSocketConstructor,
      reconnect: { initialDelayMs: 20, maxDelayMs: 200 },
      auth: "header",
      ...opts,
    });
  }

  /** mcp connects the MCP SDK's client (the model side) to the session. */
  /** mcp connects the MCP SDK's client to session, announcing capabilities (extensions included) if given. */
  async mcp(session: string, capabilities?: ClientCapabilities): Promise<MCPClient> {
    const c = new MCPClient({ name: "ts-tests", version: "0.0.0" }, capabilities ? { capabilities } : undefined);
    await c.connect(
      new StreamableHTTPClientTransport(new URL(`${this.url}/v1/sessions/${session}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${this.modelToken}` } },
      }),
    );
    return c;
  }
}

/** Proxy forwards loopback TCP connections to a port; cut() drops every open one, as a network failure would. */
export class Proxy {
  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();
  port = 0;
  connections = 0;

  private constructor(target: () => number) {
    this.server = net.createServer((down) => {
      this.connections++;
      const up = net.connect(target(), "127.0.0.1");
      for (const s of [down, up]) {
        this.sockets.add(s);
        s.on("close", () => this.sockets.delete(s));
        s.on("error", () => {});
      }
      down.pipe(up);
      up.pipe(down);
      down.on("close", () => up.destroy());
      up.on("close", () => down.destroy());
    });
  }

  static async start(target: () => number): Promise<Proxy> {
    const p = new Proxy(target);
    await new Promise<void>((resolve) => p.server.listen(0, "127.0.0.1", resolve));
    p.port = (p.server.address() as net.AddressInfo).port;
    return p;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** cut resets every open connection (both directions). */
  cut(): void {
    for (const s of this.sockets) {
      s.resetAndDestroy();
    }
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** within bounds a wait: it rejects naming what did not happen in time. */
export function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout>;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
    }),
  ]);
}

/** Deferred is a promise with its resolve at hand. */
export class Deferred<T> {
  resolve!: (v: T) => void;
  reject!: (e: unknown) => void;
  readonly promise = new Promise<T>((res, rej) => {
    this.resolve = res;
    this.reject = rej;
  });
}

/** text returns the first text content of an MCP tool result. */
export function text(r: unknown): string {
  const c = (r as { content?: { type: string; text?: string }[] }).content ?? [];
  return c.find((x) => x.type === "text")?.text ?? "";
}

/**
 * listed waits until the MCP server lists the tools: the session's MCP
 * server learns of a registration from its event, which may trail the
 * registration's ack.
 */
export async function listed(mcp: MCPClient, ...names: string[]): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const { tools } = await within(mcp.listTools(), 10_000, "tools/list");
    if (names.every((n) => tools.some((t) => t.name === n))) return;
    if (Date.now() > deadline) throw new Error(`timed out after 10000 ms waiting for MCP to list ${names.join(", ")}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
