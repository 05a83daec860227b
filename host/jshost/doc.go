// Package jshost hosts JavaScript payloads — the single-file ES module
// `brain build` makes of a TypeScript or JavaScript tool — under the rules
// WebAssembly payloads follow in package host, on brain's JavaScript
// engine (internal/jsvm: QuickJS with a heap cap, deadlines and a call
// depth limit the engine enforces).
//
// An artifact is <name>.tool.json (runtime "js/1") with its payload
// <name>.mjs beside it. The payload's identity (sha-256 of the bytes) is
// verified before anything is compiled; the module is compiled to
// bytecode once per identity, and the bytecode is cached — in memory, and
// on disk under Options.CacheDir sealed with a MAC, since bytecode is
// trusted by the engine. An [Artifact] implements tool.Attachable:
// provisioning evaluates the module, checks that it defines exactly the
// tool of the manifest (name, requires, binding names) and runs its init
// with the bindings, so a bundle that throws, a missing handle or binding,
// or bytes that do not match their identity fail the attach, never the
// first call.
//
// # State and sessions
//
// Each session gets its own realm (a VM of its own: heap, globals, module
// scope), made on the session's first call and freed at EndSession: what
// a tool keeps in module scope stays in its session. Calls of one session
// run one at a time; calls of different sessions run in parallel. A call
// outside any session (brain run) has a realm of its own too. An instance
// whose call was stopped (deadline, cancel, memory) is dropped, and the
// session's next call starts afresh.
//
// # What a payload can reach
//
// The realm holds the ECMAScript built-ins and nothing of the host. The
// handles a call is given (ctx.handles) are exactly those the manifest
// requires; each operation crosses into Go through one host function the
// payload cannot reach, and the Go side serves only the call's declared
// handles.
package jshost
