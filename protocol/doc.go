// Package protocol holds the wire types of Protocol v2's capability layer,
// field for field as spec/capabilities.d.ts defines them, and the frame that
// carries them (ours: the spec names MessageV2 without defining it).
//
// Encoding follows the spec exactly: the same field names and
// discriminants, and optional fields absent (never null) when unset.
// Decoding is strict, because every frame may be hostile: unknown fields,
// an unknown `kind` and a union variant missing its id are errors that name
// the field. A misspelt "requiresApproval" must never be silently ignored.
//
// The package depends only on the standard library. Validation that needs a
// JSON Schema compiler (inputSchema, outputSchema) lives in package session.
//
// See docs/protocol.md for the frame format and every extension to the seed.
package protocol
