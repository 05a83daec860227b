// Package regularfile reads a file that must be a regular file of bounded
// size — an artifact's manifest or payload — whatever sits at its path.
//
// Opening a path for reading blocks, in the kernel, until a writer opens
// the other end when the path is a FIFO; a FIFO put where an artifact
// should be made brain inspect, run and serve hang for good (the process
// had turned SIGINT and SIGTERM into a context nobody was looking at). So
// the file is opened without blocking, checked to be regular from the
// descriptor it opened (not the path: the path may be swapped between a
// check and the open), and only then read, no more than the limit.
package regularfile

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// Read reads the regular file at path, of at most limit bytes. A path that
// names anything else (a FIFO, a device, a directory, a socket), or a
// larger file, is an error naming the path and what it is.
func Read(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, Kind(fi.Mode()))
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s has %d bytes, more than the %d allowed", path, fi.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit { // grew since the stat
		return nil, fmt.Errorf("%s has more than the %d bytes allowed", path, limit)
	}
	return b, nil
}

// Kind names what a file that is not regular is, for an error: "a named
// pipe", "a directory".
func Kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "mode " + m.String()
}
