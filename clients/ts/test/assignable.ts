// Compile-time proof that the package's seed types are the seed's: each pair
// is assignable both ways, checked by `tsc --strict` (test.sh runs it; a
// mismatch fails the build, not a test at run time). The seed is
// test/spec/capabilities.d.ts, a verbatim copy of spec/capabilities.d.ts.
import type * as Seed from "./spec/capabilities.js";
import type * as Pkg from "../src/index.js";
import { isRenderCapability, isUserInvokable } from "../src/index.js";

/** true exactly when A and B are assignable to each other. */
type Mutual<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;

function same<A, B>(ok: Mutual<A, B>): Mutual<A, B> {
  return ok;
}

export const seedAgrees = [
  same<Seed.CapabilityAudience, Pkg.CapabilityAudience>(true),
  same<Seed.CapabilityOrigin, Pkg.CapabilityOrigin>(true),
  same<Seed.RenderSpec, Pkg.RenderSpec>(true),
  same<Seed.Capability, Pkg.Capability>(true),
  same<Seed.RenderCapability, Pkg.RenderCapability>(true),
  same<Seed.CapabilityRegisterCommand, Pkg.CapabilityRegisterCommand>(true),
  same<Seed.CapabilityDeregisterCommand, Pkg.CapabilityDeregisterCommand>(true),
  same<Seed.CapabilityResultCommand, Pkg.CapabilityResultCommand>(true),
  same<Seed.CapabilityApproveCommand, Pkg.CapabilityApproveCommand>(true),
  same<Seed.CapabilityRegisterEvent, Pkg.CapabilityRegisterEvent>(true),
  same<Seed.CapabilityDeregisterEvent, Pkg.CapabilityDeregisterEvent>(true),
  same<Seed.CapabilityInvokedEvent, Pkg.CapabilityInvokedEvent>(true),
  same<Seed.RenderInvokedEvent, Pkg.RenderInvokedEvent>(true),
  same<typeof Seed.isRenderCapability, typeof isRenderCapability>(true),
  same<typeof Seed.isUserInvokable, typeof isUserInvokable>(true),
] as const;

// MESSAGE_TYPES lists exactly the types of the Message union.
export const messageTypesAgree = same<(typeof Pkg.MESSAGE_TYPES)[number], Pkg.Message["type"]>(true);

// The check can fail: pairs that differ are refused (if these stopped being
// errors, `// @ts-expect-error` itself would fail the build).
export const checkCanFail = [
  // @ts-expect-error a Capability is not always a RenderCapability
  same<Seed.Capability, Pkg.RenderCapability>(true),
  // @ts-expect-error the register command and the deregister event differ
  same<Seed.CapabilityRegisterCommand, Pkg.CapabilityDeregisterEvent>(true),
  // @ts-expect-error an origin without its id is not the seed's
  same<Seed.CapabilityOrigin, { kind: "flow" } | { kind: "client" }>(true),
] as const;

// Seed messages are package messages: a client can send and read them as such.
export function seedMessagesAreMessages(
  cmd: Seed.CapabilityRegisterCommand | Seed.CapabilityResultCommand | Seed.CapabilityApproveCommand,
  ev: Seed.CapabilityInvokedEvent | Seed.RenderInvokedEvent,
): [Pkg.Command, Pkg.Event] {
  return [cmd, ev];
}
