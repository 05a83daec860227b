//go:build !linux

package server

import "os"

// stampOf returns the tokens file's stamp: its size, modification time
// and mode (WatchTokens reads the file whatever its stamp every
// backstopLooks looks); the zero stamp when it cannot be read.
func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{size: -1}
	}
	return fileStamp{mod: fi.ModTime(), size: fi.Size(), mode: fi.Mode()}
}
