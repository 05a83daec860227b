// Package host runs tool artifacts — WebAssembly payloads built by package
// build — isolated in github.com/tetratelabs/wazero, with only the host
// functions of the handles their manifest declares.
//
// A payload's identity (sha-256) is verified before anything is compiled;
// compiled code is cached on disk, sealed, under a directory private to the
// host.
// An [Artifact] implements tool.Attachable, so an environment attaches and
// invokes it exactly like a native tool: provisioning (compile, check the
// imports against the declared handles, instantiate, initialise with the
// bindings) happens at attach, and every failure fails the attach receipt.
// Calls run on a bounded pool of instances, one call per instance at a time;
// an instance that trapped, ran out of memory or was stopped at its deadline
// is discarded, never reused.
//
// Deadlines hold wherever a guest is: each payload is instrumented at load
// (after its identity is verified) so that its work — loop iterations,
// calls, straight-line code, bulk memory operations — spends an inline
// fuel counter, and calls the host when it runs out, within a few
// milliseconds of work; that stops a guest whose call's context is done. A
// guest's sleep and every host function honour the context too, so an
// instance's Invoke returns by its deadline (it is a tool.DeadlineBound,
// which a kernel calls on the caller's goroutine). Instantiation and
// initialisation are bounded the same way. The compilation cache is
// untrusted: each entry is sealed with a MAC and checked before wazero
// reads it.
//
// The ABI is in docs/abi.md.
package host
