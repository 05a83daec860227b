//go:build unix

package fsroot

import (
	"os"
	"syscall"
)

// Open flags os does not name portably.
const (
	// oNonblock keeps open(2) of a FIFO or device from blocking.
	oNonblock = syscall.O_NONBLOCK
	// oDirectory makes open(2) fail with ENOTDIR, without opening, when the
	// file is not a directory (a FIFO swapped in would otherwise block).
	oDirectory = syscall.O_DIRECTORY
)

// linkCount returns the number of hard links of fi, or 0 when it is
// unknown (which callers treat as "not exactly one", hence refused).
func linkCount(fi os.FileInfo) uint64 {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0
	}
	return uint64(st.Nlink)
}
