// Package script provides the js handle ([handle.JS]): it runs a
// JavaScript function on JSON arguments on brain's JavaScript engine,
// QuickJS through internal/jsvm, with no access to the host.
//
//	js, err := script.New(script.Grants{Timeout: 2 * time.Second}, nil)
//	…
//	out, err := js.Call(ctx, `(args) => args.a + args.b`, json.RawMessage(`{"a": 1, "b": 2}`))
//	// out is 3
//
// # Isolation
//
// Every call runs in a realm (a QuickJS runtime and context) that no other
// call uses at the same time. A realm serves call after call, locked down
// once by realm.js: every intrinsic frozen, with the override mistake
// tamed; WeakRef and FinalizationRegistry removed; eval and the Function
// constructors bounded by Grants.MaxScriptBytes. After each call the global
// object's shape is read from the engine and the globals the call added
// are deleted; a realm is closed rather than reused after a call that was
// stopped, that left a global it cannot delete, or that compiled a private
// name (which can be stamped onto a frozen built-in). The realm holds the
// language and its built-ins only: no require, console, timers, module
// loader or host objects. The arguments are parsed inside the realm by
// its own JSON.parse, and the result encoded by its JSON.stringify.
//
// # Limits
//
// A call ends at Grants.Timeout or at the context's end, whichever comes
// first: the engine's interrupt stops JavaScript code and regular
// expressions within milliseconds. A built-in written in C that does not
// poll the interrupt runs on; [Runtime.Call] returns 5 ms after the
// deadline all the same, the realm is given up and freed when the
// built-in ends, and the script's slot is free as Call returns
// ([Options].MaxConcurrent bounds the slots and the scripts left
// lingering). The call stack is bounded at 5000 frames.
//
// # Memory
//
// Each realm's runtime has a memory limit in the engine's allocator: its
// heap once made plus Grants.MaxMemoryBytes. An allocation that would pass
// it ends the call with too_large whatever the script catches. The Array
// methods that walk a length in C refuse a length only holes could fill
// (more than MaxMemoryBytes/16 elements), so that no built-in loops for
// ever on a fake size. docs/handle-js.md tells the details and the gaps.
package script
