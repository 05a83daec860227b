// Package handle defines what a tool is given to act on the world: the
// handles [Exec], [FS], [Net], [JS] and [Page], and the [CapabilityError]
// every one of them fails with.
//
// Handles are the whole API a tool author writes against. An environment
// provides them under grants (package provide and its sub-packages); grants
// are policy the tool never sees. A handle never returns a bare error from
// the layer below it: every failure is a *CapabilityError whose Code comes
// from the catalogue in package protocol, and whose Message is written for
// the model that will read it.
//
// Every method takes a context.Context: cancelling it ends the operation and
// returns a CapabilityError with code "cancelled" (or "timeout" when its
// deadline passed).
package handle
