//go:build !race

package script_test

import "time"

// raceEnabled reports whether the race detector is on; see race_test.go.
const raceEnabled = false

// slow scales a time bound for the race detector; see race_test.go.
func slow(d time.Duration) time.Duration { return d }
