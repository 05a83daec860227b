//go:build linux || darwin

package host

import "syscall"

// mappedMemory: guest memories are reservations outside the Go heap.
const mappedMemory = true

// reserveAddressSpace maps n bytes of inaccessible address space: no pages,
// and no commit charge, until commitPages.
func reserveAddressSpace(n uint64) ([]byte, error) {
	if n == 0 {
		return []byte{}, nil
	}
	return syscall.Mmap(-1, 0, int(n), syscall.PROT_NONE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
}

// commitPages makes b, a page-aligned part of a reservation, readable and
// writable. Its pages read as zeros until written.
func commitPages(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return syscall.Mprotect(b, syscall.PROT_READ|syscall.PROT_WRITE)
}

// unmapPages releases a whole reservation.
func unmapPages(b []byte) {
	if len(b) > 0 {
		_ = syscall.Munmap(b)
	}
}
