//go:build unix

package server

import (
	"errors"
	"syscall"
)

// socketReadable reports whether a read of the socket fd would not block:
// data waits in it, or it has ended or failed. It peeks, so nothing is
// consumed.
func socketReadable(fd uintptr) bool {
	var b [1]byte
	_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return !errors.Is(err, syscall.EAGAIN)
}
