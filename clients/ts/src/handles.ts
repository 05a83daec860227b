import { BrainError } from "./errors.js";
import type { ErrorCode } from "./types.js";

/**
 * The environment handles a provisioned tool acts on the world through,
 * as brain's Go package `handle` defines them, method for method. An
 * environment provides them under grants the tool never sees; every
 * failure is a {@link CapabilityError}. The TypeScript tool SDK
 * (`sdk/ts`) types a tool's `ctx.handles` from these; they live here so
 * that the client and the SDK share one definition.
 */
export type HandleName = "exec" | "fs" | "net" | "js" | "page";

/** Every handle name, in the order of brain's `handle.Kinds()`. */
export const HANDLE_NAMES = ["exec", "fs", "net", "js", "page"] as const satisfies readonly HandleName[];

/**
 * CapabilityError is what every handle operation fails with: the handle
 * and operation that failed, a code from the kernel's catalogue
 * (`path_escape`, `denied`, `not_found`, `too_large`, `timeout`,
 * `cancelled`, `unavailable`, `invalid_argument`, `forbidden`, …) and a
 * message written for the model. Thrown out of a tool uncaught, it
 * becomes the call's error outcome with the same code, as in Go.
 */
export class CapabilityError extends BrainError {
  /** The handle, e.g. `fs`. */
  readonly handle: HandleName | undefined;
  /** The operation, e.g. `read_file`. */
  readonly op: string | undefined;

  constructor(code: ErrorCode, message: string, where?: { handle?: HandleName; op?: string; cause?: unknown }) {
    super(code, message, where?.cause === undefined ? undefined : { cause: where.cause });
    this.name = "CapabilityError";
    this.handle = where?.handle;
    this.op = where?.op;
  }
}

/** One program to run: never a shell, a program and its arguments. */
export interface ExecCommand {
  /** A name on the grant's allow-list, or a path. */
  readonly program: string;
  readonly args?: readonly string[];
  /** The working directory, relative to the fs root; "" is the root. */
  readonly dir?: string;
  /** Variables to add; each must be allowed by the grant. */
  readonly env?: Readonly<Record<string, string>>;
  /** Written to the program's standard input (a string as UTF-8). */
  readonly stdin?: Uint8Array | string;
  /** A shorter deadline than the grant's, in milliseconds; 0 is the grant's. */
  readonly timeoutMs?: number;
  /** A smaller output cap than the grant's, in bytes; 0 is the grant's. */
  readonly maxOutput?: number;
}

/** What a finished program did. A non-zero exit is not an error. */
export interface ExecResult {
  /** The exit status; -1 when the program was killed by a signal. */
  readonly exitCode: number;
  readonly stdout: Uint8Array;
  readonly stderr: Uint8Array;
  /** Output beyond the cap was discarded. */
  readonly truncated: boolean;
  readonly durationMs: number;
}

/** Exec runs programs (Go: handle.Exec). */
export interface ExecHandle {
  /** Errors: denied, path_escape, timeout, cancelled. */
  run(cmd: ExecCommand): Promise<ExecResult>;
}

/** One entry of an fs tree (Go: handle.FileInfo). */
export interface FileInfo {
  readonly name: string;
  readonly size: number;
  /** Type and permission bits, as Go's fs.FileMode. */
  readonly mode: number;
  /** RFC 3339. */
  readonly modTime: string;
  readonly isDir: boolean;
}

/**
 * FS is a file tree confined to a root the tool never learns (Go:
 * handle.FS). Paths are slash-separated and relative to it; any path that
 * would leave it fails with `path_escape`.
 */
export interface FsHandle {
  readFile(path: string): Promise<Uint8Array>;
  writeFile(path: string, data: Uint8Array | string): Promise<void>;
  readDir(path: string): Promise<FileInfo[]>;
  stat(path: string): Promise<FileInfo>;
  mkdirAll(path: string): Promise<void>;
  remove(path: string): Promise<void>;
  rename(from: string, to: string): Promise<void>;
  symlink(target: string, link: string): Promise<void>;
  link(target: string, link: string): Promise<void>;
  /**
   * walk visits path and everything under it in lexical order; fn may
   * return {@link FsHandle.SKIP_DIR} to skip a directory, and a thrown
   * error stops the walk.
   */
  walk(path: string, fn: (path: string, info: FileInfo) => unknown): Promise<void>;
  /** path.Match syntax, plus `**` for any number of directories; sorted. */
  glob(pattern: string): Promise<string[]>;
  /** What a walk's fn returns to skip a directory. */
  readonly SKIP_DIR: symbol;
}

/** One HTTP request (Go: handle.Request). */
export interface FetchRequest {
  /** Default GET. */
  readonly method?: string;
  readonly url: string;
  readonly header?: Readonly<Record<string, readonly string[]>>;
  readonly body?: Uint8Array | string;
}

/** A complete HTTP response; a 4xx or 5xx status is not an error. */
export interface FetchResponse {
  readonly status: number;
  readonly header: Readonly<Record<string, readonly string[]>>;
  readonly body: Uint8Array;
  /** The final URL after redirects. */
  readonly url: string;
}

/** Net fetches over HTTP(S) under host grants (Go: handle.Net). */
export interface NetHandle {
  fetch(req: FetchRequest): Promise<FetchResponse>;
}

/** JS runs a JavaScript function on JSON arguments, with no host access (Go: handle.JS). */
export interface JsHandle {
  /** source is a function expression such as `(args) => args.a + args.b`. */
  call(source: string, args?: unknown): Promise<unknown>;
}

/** Page is one headless browser tab for the call (Go: handle.Page). */
export interface PageHandle {
  navigate(url: string): Promise<void>;
  /** The visible text of the first element matching selector; "" is the body. */
  text(selector?: string): Promise<string>;
  evaluate(expression: string): Promise<unknown>;
  /** A PNG of the viewport. */
  screenshot(): Promise<Uint8Array>;
}

/** The handle interfaces by name. */
export interface CapabilityHandles {
  exec: ExecHandle;
  fs: FsHandle;
  net: NetHandle;
  js: JsHandle;
  page: PageHandle;
}
