//go:build race

package host_test

// raceEnabled: the race detector slows the Go side of every host call and
// wake-up several fold.
const raceEnabled = true
