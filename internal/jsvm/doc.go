// Package jsvm is brain's one JavaScript engine: QuickJS, through
// modernc.org/quickjs (the C engine transpiled to Go, so no CGO), with
// limits the engine itself enforces.
//
// A [VM] is one QuickJS runtime with one context (realm): its own global
// object, heap and limits. Nothing is shared between two VMs but the
// process-wide allocator. What a VM runs is bounded three ways:
//
//   - memory: the runtime's allocator refuses an allocation that would take
//     its heap past [Limits].MemoryBytes, so a string or array doubling,
//     a join of a long string many times or a huge typed array fails inside
//     the engine with an out-of-memory error, which [VM.Run] reports as
//     [ErrMemory] (code too_large), at once rather than at the deadline;
//   - time: [VM.Run] arms the engine's interrupt for the context's deadline
//     and interrupts on cancellation; QuickJS polls its interrupt handler
//     from the interpreter loop and from its regular-expression engine, so
//     an infinite loop or a catastrophic regular expression stops within a
//     few milliseconds of the deadline with an exception no script can
//     catch;
//   - stack: the call depth is bounded ([Limits].StackSlots), so deep
//     recursion throws a catchable error instead of growing the goroutine
//     stack without end.
//
// The global object holds the ECMAScript built-ins QuickJS implements and
// nothing of the host: no std or os modules, no timers, no require, no
// module loader (an import of anything fails). Host functions exist only
// where a caller registers them (quickjs.VM.RegisterHostFunc, inside
// [VM.Run]).
//
// A VM is not safe for concurrent use; [VM.Interrupt] may be called from
// any goroutine.
package jsvm
