package server

import (
	"os"
	"syscall"
	"time"
)

// stampOf returns the tokens file's stamp, with its inode (a file
// renamed into place) and change time (any write or chmod, which no tool
// sets back, as cp -p and rsync -a set the modification time); the zero
// stamp when it cannot be read.
func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{size: -1}
	}
	st := fileStamp{mod: fi.ModTime(), size: fi.Size(), mode: fi.Mode()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = int64(sys.Ino)
		st.ctime = time.Unix(sys.Ctim.Unix()).UnixNano()
	}
	return st
}
