//go:build !(linux || darwin)

package host

import "errors"

// mappedMemory: on this platform, guest memories are wazero's own Go
// slices.
const mappedMemory = false

var errNoReservation = errors.New("no address space reservations on this platform")

func reserveAddressSpace(uint64) ([]byte, error) { return nil, errNoReservation }

func commitPages([]byte) error { return errNoReservation }

func unmapPages([]byte) {}
