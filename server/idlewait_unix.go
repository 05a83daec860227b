//go:build unix

package server

import (
	"syscall"
	"unsafe"
)

// socketReadable reports whether a read of the socket fd would not block:
// data waits in it, or it has ended or failed. It peeks, so nothing is
// consumed. (A raw recvfrom: syscall.Recvfrom would allocate the sender's
// address, which a stream socket does not have.)
func socketReadable(fd uintptr) bool {
	var b [1]byte
	_, _, errno := syscall.Syscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1,
		syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	return errno != syscall.EAGAIN
}
