// Package script provides the js handle ([handle.JS]): it runs a
// JavaScript function on JSON arguments with goja, a JavaScript engine
// written in Go, with no access to the host.
//
//	js, err := script.New(script.Grants{Timeout: 2 * time.Second}, nil)
//	…
//	out, err := js.Call(ctx, `(args) => args.a + args.b`, json.RawMessage(`{"a": 1, "b": 2}`))
//	// out is 3
//
// # Isolation
//
// Every call runs in a goja runtime that no other call uses at the same
// time. A runtime serves call after call, its built-ins frozen and its
// global object checked and cleaned after each, and is dropped after a
// call that was stopped: nothing a script does to its globals or built-ins
// is seen by another call. The runtime holds the language and its
// built-ins only: no require, console, timers, modules or host objects;
// goja's one extra global, GoError, is removed. The arguments are read
// from their JSON into the runtime's own plain objects, arrays and
// primitives, exactly as its JSON.parse would build them, rather than
// passed in as Go values, so no reflection-backed object is reachable.
// eval and the Function constructors compile JavaScript into the same
// world and stay.
//
// # Limits
//
// A call ends at Grants.Timeout or at the context's end, whichever comes
// first: the runtime is interrupted, which stops JavaScript code at its
// next instruction. goja cannot interrupt its built-ins, which are written
// in Go, so [Runtime.Call] returns within about 100ms of the deadline even
// when a built-in is still running, and the script finishes in the
// background holding its slot; [Options].MaxConcurrent bounds the slots.
// The call stack is bounded at 10000 frames.
//
// # Memory
//
// goja has no memory limit, so this package bounds memory in two ways,
// both best-effort (docs/handle-js.md tells the details and the gaps):
//
//   - A watchdog samples the process's heap every 2ms while calls run and
//     stops a call, with too_large, when the live heap has grown by more
//     than Grants.MaxMemoryBytes since the call started. The heap is the
//     process's, so under concurrency a call can be charged for memory
//     other code allocated at the same time.
//   - The built-ins that can allocate far more than their input in one
//     step of Go code, where neither the watchdog nor an interrupt can stop
//     them ("x".repeat(1e9), new Array(1e9).fill(0), new Float64Array(1e9),
//     join, JSON.stringify of a shared tree, split, regular expressions
//     that collect every match), are replaced by guarded versions that
//     check the size their result can reach first, with limits derived
//     from the same budget. Guarded built-ins keep their names, lengths
//     and behaviour, with a few documented exceptions (an Array method
//     called on a Proxy or on an object with a length getter throws a
//     TypeError; eval is always indirect; flat ignores Symbol.species).
//
// Limits derived from a 128 MiB budget: strings built by a guarded
// built-in up to 64M code units, arrays walked by a built-in up to 8M
// elements, regular-expression subjects (replace, split, match, matchAll),
// split results, Object.keys and JSON.parse texts up to 1M.
package script
