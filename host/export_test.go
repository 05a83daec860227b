package host

// Instrument is instrument, for the tests of package host_test.
var Instrument = instrument

// ErrNotInstrumentable is errNotInstrumentable, for package host_test.
var ErrNotInstrumentable = errNotInstrumentable
