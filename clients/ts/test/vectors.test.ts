// The shared vectors of protocol/testdata/user_invokable.json, also read by
// the Go test protocol/vectors_test.go: the two implementations agree.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { isRenderCapability, isUserInvokable, type Capability } from "../src/index.js";

const file = fileURLToPath(new URL("../../../../protocol/testdata/user_invokable.json", import.meta.url));
const { vectors } = JSON.parse(readFileSync(file, "utf8")) as {
  vectors: { name: string; capability: Capability; isUserInvokable: boolean; isRenderCapability: boolean }[];
};

test("shared vectors", async (t) => {
  assert.ok(vectors.length >= 40, `only ${vectors.length} vectors`);
  for (const v of vectors) {
    await t.test(v.name, () => {
      assert.equal(isUserInvokable(v.capability), v.isUserInvokable, "isUserInvokable");
      assert.equal(isRenderCapability(v.capability), v.isRenderCapability, "isRenderCapability");
    });
  }
});
