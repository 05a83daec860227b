package host

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
)

// A guest's linear memory lives outside the Go heap, where the platform
// allows (memory_mmap.go): the instance's whole memory limit is reserved
// as address space when it is instantiated (no pages, no commit charge),
// and memory.grow makes the next pages accessible in place. wazero's own
// memory is a Go slice that every memory.grow reallocates and copies,
// touching every page of the new buffer inside one host call, where no
// tick can stop the guest: on a VM whose page faults are slow, growing a
// fresh Go guest from 3 to 4 MiB took 40 to 330 ms, and so a guest that
// allocated right after its deadline returned that late
// (TestDeadlinePrecision; docs/RATIONALE.md, "Why a guest's memory is
// mapped outside the Go heap").
//
// The mapping is released when wazero closes the module, except while the
// instance is in use: Host.Close closes every module, including one whose
// call is still running or whose result is still being read, so its
// mapping is released when the pool takes the instance back.

// withLinearMemory returns ctx with in as the memory allocator of the
// instantiation it is given to.
func withLinearMemory(ctx context.Context, in *instance) context.Context {
	if !mappedMemory {
		return ctx
	}
	return experimental.WithMemoryAllocator(ctx, in)
}

// Allocate implements experimental.MemoryAllocator for the instantiation
// of in (a module has one memory: the payloads the host accepts use no
// multi-memory). The memory starts in use, by the instantiation.
func (in *instance) Allocate(_, max uint64) experimental.LinearMemory {
	lm := &linearMemory{inUse: true}
	lm.reserve(max)
	in.lin = lm
	return lm
}

// linearMemory is one guest's linear memory in a reservation of its
// maximum size, or, if the reservation could not be made (an address
// space limit), a Go slice grown as wazero grows its own.
type linearMemory struct {
	mu     sync.Mutex
	buf    []byte // the reservation, len(buf) = the maximum; or the Go slice
	mapped bool   // buf is a reservation
	size   uint64 // bytes accessible, a prefix of buf
	inUse  bool   // a call, the instantiation or a result read is using it
	closed bool   // wazero closed the module, or the instantiation failed
	gone   bool   // buf is unmapped
}

// reservations counts the reservations not yet unmapped, for the tests.
var reservations atomic.Int64

func (m *linearMemory) reserve(max uint64) {
	if b, err := reserveAddressSpace(max); err == nil {
		m.buf, m.mapped = b, true
		reservations.Add(1)
	}
}

// Reallocate implements experimental.LinearMemory: it makes the first size
// bytes accessible, in place. It returns nil, which the guest sees as a
// failed memory.grow, if the platform refuses the pages.
func (m *linearMemory) Reallocate(size uint64) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone {
		return nil
	}
	if !m.mapped {
		if size > uint64(len(m.buf)) {
			m.buf = append(m.buf, make([]byte, size-uint64(len(m.buf)))...)
		}
		m.size = size
		return m.buf[:size]
	}
	if size > uint64(len(m.buf)) {
		return nil
	}
	if size > m.size {
		if commitPages(m.buf[m.size:size]) != nil {
			return nil
		}
		m.size = size
	}
	return m.buf[:size:size]
}

// Free implements experimental.LinearMemory: wazero closed the module.
func (m *linearMemory) Free() {
	m.mu.Lock()
	m.closed = true
	unmap := !m.inUse
	m.mu.Unlock()
	if unmap {
		m.unmap()
	}
}

// acquire marks the memory in use by a call taking its instance from the
// pool. It reports false if the module was closed meanwhile (by
// Host.Close): the instance must not run.
func (m *linearMemory) acquire() bool {
	if m == nil {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.inUse = true
	return true
}

// release ends a use: the instance goes back to the pool or is closed. A
// memory whose module was closed while in use is unmapped now.
func (m *linearMemory) release() {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.inUse = false
	unmap := m.closed
	m.mu.Unlock()
	if unmap {
		m.unmap()
	}
}

// drop releases the memory of an instantiation that failed, whether or not
// wazero closed the module: nothing else will.
func (m *linearMemory) drop() {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.closed, m.inUse = true, false
	m.mu.Unlock()
	m.unmap()
}

func (m *linearMemory) unmap() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone {
		return
	}
	m.gone = true
	if m.mapped {
		unmapPages(m.buf)
		reservations.Add(-1)
	}
	m.buf, m.size = nil, 0
}
