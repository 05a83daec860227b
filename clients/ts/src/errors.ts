import type { ErrorCode } from "./types.js";

/**
 * BrainError is every error this package raises: an `error` reply to a
 * command, an error outcome, a handler's failure, a lost connection. `code`
 * is one of the kernel's codes (docs/protocol.md, "Error codes") or a
 * tool's own identifier-shaped code.
 */
export class BrainError extends Error {
  /** The error code, e.g. `not_found`, `rejected`, `timeout`. */
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "BrainError";
    this.code = code;
  }
}

/** isIdentifierCode reports whether s is shaped like an error code the kernel preserves: `[a-z][a-z0-9_.]{0,63}`. */
export function isIdentifierCode(s: unknown): s is string {
  return typeof s === "string" && /^[a-z][a-z0-9_.]{0,63}$/.test(s);
}
