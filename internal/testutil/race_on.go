//go:build race

package testutil

// RaceEnabled reports whether the race detector is on. It slows the code it
// watches about tenfold and allocates beside it, so timing-dependent tests
// scale their work by it and allocation bounds are not checked under it.
const RaceEnabled = true
