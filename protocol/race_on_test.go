//go:build race

package protocol

// raceEnabled: the race detector allocates beside the code it watches, so
// allocation bounds are not checked under it.
const raceEnabled = true
