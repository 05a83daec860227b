// Package host runs tool artifacts — WebAssembly payloads built by package
// build — isolated in github.com/tetratelabs/wazero, with only the host
// functions of the handles their manifest declares.
//
// A payload's identity (sha-256) is verified before anything is compiled;
// compiled code is cached on disk by wazero under a directory the host owns.
// An [Artifact] implements tool.Attachable, so an environment attaches and
// invokes it exactly like a native tool: provisioning (compile, check the
// imports against the declared handles, instantiate, initialise with the
// bindings) happens at attach, and every failure fails the attach receipt.
// Calls run on a bounded pool of instances, one call per instance at a time;
// an instance that trapped, ran out of memory or was stopped at its deadline
// is discarded, never reused.
//
// The ABI is in docs/abi.md.
package host
