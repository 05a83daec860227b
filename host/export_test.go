package host

// Instrument is instrument, for the tests of package host_test.
var Instrument = instrument

// ErrNotInstrumentable is errNotInstrumentable, for package host_test.
var ErrNotInstrumentable = errNotInstrumentable

// Reservations is how many guest memories are mapped outside the Go heap
// and not yet unmapped; MappedMemory whether this platform maps them.
func Reservations() int64 { return reservations.Load() }

const MappedMemory = mappedMemory
