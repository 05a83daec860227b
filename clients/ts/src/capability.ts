import type { Capability, RenderCapability } from "./types.js";

/**
 * isRenderCapability reports whether the capability draws UI: its `render`
 * block is set. It narrows the type to {@link RenderCapability}.
 */
export function isRenderCapability(cap: Capability): cap is RenderCapability {
  return cap.render !== undefined && cap.render !== null;
}

/**
 * isUserInvokable decides whether a capability belongs on user-facing
 * surfaces (a command palette), in the spec's resolution order:
 *
 * 1. `audience` is set: whether it includes `"user"` (an empty audience is
 *    set, and hides the capability);
 * 2. `userInvokable` is set (the deprecated v2.x shim): its value;
 * 3. the per-origin default: `true` only for an `mcp` capability of kind
 *    `effect` and a `skill` capability of kind `effect` or `render`.
 *
 * The Go implementation (protocol.IsUserInvokable) reads the same test
 * vectors, protocol/testdata/user_invokable.json.
 */
export function isUserInvokable(cap: Capability): boolean {
  if (cap.audience !== undefined) {
    return cap.audience.includes("user");
  }
  if (cap.userInvokable !== undefined) {
    return cap.userInvokable;
  }
  switch (cap.origin.kind) {
    case "mcp":
      return cap.kind === "effect";
    case "skill":
      return cap.kind === "effect" || cap.kind === "render";
    default:
      return false;
  }
}
