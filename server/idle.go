package server

import (
	"sync"
	"sync/atomic"
	"time"
)

// idleTick is how long a connection's writer waits with nothing to write
// before it ends (between one and two ticks): the next reply or event
// starts a new one (ws.go, kick). A round trip every few hundred
// milliseconds keeps its writer; ten thousand idle clients keep none.
var idleTick = newTunable(time.Second)

// idleTicks is the clock every parked writer waits on: a channel closed
// at the next tick. It runs only while some writer waits (a timer per
// tick, none per connection).
var idleTicks idleClock

type idleClock struct {
	ch atomic.Pointer[chan struct{}] // closed at the next tick; nil when no tick is scheduled
	mu sync.Mutex                    // schedules ticks
}

// next returns a channel closed at the next tick.
func (k *idleClock) next() <-chan struct{} {
	if ch := k.ch.Load(); ch != nil {
		return *ch
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if ch := k.ch.Load(); ch != nil {
		return *ch
	}
	ch := make(chan struct{})
	k.ch.Store(&ch)
	time.AfterFunc(idleTick.get(), func() {
		k.ch.CompareAndSwap(&ch, nil)
		close(ch)
	})
	return ch
}
