// The package's lists of message types and error codes agree with
// docs/protocol.md, so that an extension added to the protocol (and
// documented, as the Go tests require) shows up here as a failing test.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { ERROR_CODES, MESSAGE_TYPES } from "../src/index.js";

const doc = readFileSync(fileURLToPath(new URL("../../../../docs/protocol.md", import.meta.url)), "utf8");

/** names returns the backticked first cells of the tables between two headings. */
function names(from: string, to: string): string[] {
  const start = doc.indexOf(`\n## ${from}\n`);
  const end = doc.indexOf(`\n## ${to}\n`, start);
  assert.ok(start >= 0 && end > start, `docs/protocol.md has no section "${from}" before "${to}"`);
  return [...doc.slice(start, end).matchAll(/^\| `([a-z][a-z0-9_.]*)` \|/gm)].map((m) => m[1]!);
}

test("every message type of docs/protocol.md, and no other", () => {
  const documented = [...names("Seed messages", "The invocation path"), ...names("Turns and the conversation", "Error codes")];
  assert.deepEqual([...MESSAGE_TYPES].sort(), [...new Set(documented)].sort());
});

test("every error code of docs/protocol.md, and no other", () => {
  assert.deepEqual([...ERROR_CODES].sort(), names("Error codes", "Event log and resume").sort());
});
