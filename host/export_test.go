package host

import "sync"

// Instrument is instrument, for the tests of package host_test.
var Instrument = instrument

// ErrNotInstrumentable is errNotInstrumentable, for package host_test.
var ErrNotInstrumentable = errNotInstrumentable

// Reservations is how many guest memories are mapped outside the Go heap
// and not yet unmapped; MappedMemory whether this platform maps them.
func Reservations() int64 { return reservations.Load() }

const MappedMemory = mappedMemory

// RuntimeClosed reports whether the host's wazero runtime has closed.
func (h *Host) RuntimeClosed() bool { return h.runtimeClosed.Load() }

// HoldCompiles makes every compile wait, as it starts, until the returned
// release is called; started receives once per compile that waits.
func HoldCompiles(t interface{ Cleanup(func()) }) (started <-chan struct{}, release func()) {
	st, rel := make(chan struct{}, 16), make(chan struct{})
	hook := func() {
		st <- struct{}{}
		<-rel
	}
	compileStarting.Store(&hook)
	var once sync.Once
	release = func() { once.Do(func() { close(rel) }) }
	t.Cleanup(func() {
		release()
		compileStarting.Store(nil)
	})
	return st, release
}
