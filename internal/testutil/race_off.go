//go:build !race

package testutil

// RaceEnabled reports whether the race detector is on; see race_on.go.
const RaceEnabled = false
