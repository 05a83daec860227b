/**
 * @brainrt/client — a TypeScript client for host platforms of brain: the
 * Protocol v2 capability types (the seed's, exactly, plus brain's
 * extensions), a resuming WebSocket client, and typed client-side
 * capabilities with zod. See README.md.
 *
 * @packageDocumentation
 */
export * from "./types.js";
export { isRenderCapability, isUserInvokable } from "./capability.js";
export { BrainError, isIdentifierCode } from "./errors.js";
export { CapabilityError, HANDLE_NAMES } from "./handles.js";
export type {
  CapabilityHandles,
  ExecCommand,
  ExecHandle,
  ExecResult,
  FetchRequest,
  FetchResponse,
  FileInfo,
  FsHandle,
  HandleName,
  JsHandle,
  NetHandle,
  PageHandle,
} from "./handles.js";
export {
  defineCapability,
  errorEnvelope,
  type CapabilityDefinition,
  type DefinedCapability,
  type Handler,
  type HandlerContext,
  type Infer,
  type InferInput,
  type StandardResult,
  type StandardSchemaV1,
} from "./define.js";
export { BrainClient } from "./client.js";
export {
  type ApprovalRequest,
  type BrainEvent,
  type ClientOptions,
  type ConnectionState,
  type Decision,
  type RenderRequest,
  type WebSocketConstructor,
  type WebSocketLike,
} from "./api.js";
