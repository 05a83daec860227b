package host

import (
	"testing"
	"unsafe"
)

// TestLinearMemoryGrowsInPlace: a reservation grows without moving or
// copying, its new pages read as zeros, and it refuses to grow past its
// maximum.
func TestLinearMemoryGrowsInPlace(t *testing.T) {
	if !mappedMemory {
		t.Skip("guest memories are Go slices on this platform")
	}
	const page = 64 << 10
	in := &instance{}
	m := in.Allocate(page, 64*page).(*linearMemory)
	defer m.drop()
	if in.lin != m || !m.mapped {
		t.Fatalf("Allocate did not reserve the instance's memory: %+v", m)
	}
	b := m.Reallocate(page)
	if len(b) != page {
		t.Fatalf("first Reallocate = %d bytes, want %d", len(b), page)
	}
	b[0], b[page-1] = 1, 2
	base := unsafe.SliceData(b)
	grown := m.Reallocate(40 * page)
	if len(grown) != 40*page || unsafe.SliceData(grown) != base {
		t.Fatalf("grown to %d bytes at %p, want %d bytes at %p", len(grown), unsafe.SliceData(grown), 40*page, base)
	}
	if grown[0] != 1 || grown[page-1] != 2 {
		t.Fatal("growing lost the memory's contents")
	}
	for i := page; i < len(grown); i += 4096 {
		if grown[i] != 0 {
			t.Fatalf("byte %d of the new pages is %d, want 0", i, grown[i])
		}
	}
	grown[len(grown)-1] = 3 // writable up to the end
	if got := m.Reallocate(65 * page); got != nil {
		t.Fatalf("Reallocate past the maximum = %d bytes, want nil", len(got))
	}
}

// TestLinearMemoryFreedInUse: wazero frees a memory when its module is
// closed, which Host.Close does while a call may be running on it: the
// pages stay mapped until the pool takes the instance back, and an idle
// instance so closed is refused to the next call.
func TestLinearMemoryFreedInUse(t *testing.T) {
	if !mappedMemory {
		t.Skip("guest memories are Go slices on this platform")
	}
	const page = 64 << 10
	before := reservations.Load()
	in := &instance{}
	m := in.Allocate(page, 4*page).(*linearMemory)
	b := m.Reallocate(2 * page)
	m.Free() // in use by its instantiation
	b[len(b)-1] = 1
	if reservations.Load() != before+1 {
		t.Fatal("a memory in use was unmapped")
	}
	m.release()
	if reservations.Load() != before {
		t.Fatal("a closed memory was not unmapped when its use ended")
	}
	if m.acquire() {
		t.Fatal("a closed memory was acquired")
	}
	m.release() // a second release, and a Free after, are no-ops
	m.Free()

	idle := (&instance{}).Allocate(page, 4*page).(*linearMemory)
	idle.release() // into the pool
	idle.Free()
	if reservations.Load() != before {
		t.Fatal("an idle memory was not unmapped when its module closed")
	}
	if idle.acquire() {
		t.Fatal("a closed idle memory was acquired")
	}
}
