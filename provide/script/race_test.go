//go:build race

package script_test

// raceEnabled slows tests down by about ten: timing-dependent tests scale
// their work by it.
const raceEnabled = true
