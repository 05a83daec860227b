//go:build race

package script_test

import "time"

// raceEnabled slows tests down by about ten: timing-dependent tests scale
// their work by it.
const raceEnabled = true

// slow scales a time bound for the race detector.
func slow(d time.Duration) time.Duration { return 4 * d }
