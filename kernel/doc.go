// Package kernel runs environments: it sets up the providers of handles
// (setup receipt), attaches tools to them (attach receipt), and invokes
// attached tools, answering every call with one protocol.Outcome.
//
// Setup opens each registered provider; the kinds that opened are exactly
// the `provides` list of the setup receipt. Attach checks everything a call
// would need — requires ⊆ provides, a value for every binding that passes
// its schema, a compiled input schema, an init that neither fails nor
// panics — so that no failure waits for the first call. Invoke validates the
// input, hands the tool exactly the handles it requires, and maps the
// result, a returned error (an identifier-shaped code is kept), a panic
// (internal), the deadline (timeout) and cancellation (cancelled) onto the
// Outcome.
//
// An environment bound to a session registers each attached tool in the
// session's registry as a side "agent" capability, so that invoking it
// through the session's bridge runs it in the environment; Detach
// deregisters it.
package kernel
