package server

import (
	"sync/atomic"
	"time"
)

// tunable is one of the durations that pace every connection (idleTick,
// handOffFor, frameReadTimeout), held atomically: a test sets it while
// the connections an earlier test left may still read it, which a plain
// variable makes a data race.
type tunable struct{ ns atomic.Int64 }

func newTunable(d time.Duration) *tunable {
	t := &tunable{}
	t.ns.Store(int64(d))
	return t
}

// get returns the duration.
func (t *tunable) get() time.Duration { return time.Duration(t.ns.Load()) }
