package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// checkStoreFiles refuses to start the embedded server on a store that
// has a file brain's user cannot open for reading and writing. The server
// logs a stream it cannot recover ("Error recreating stream": a block file
// owned by root after a start as root, say) and starts without it; the
// stream made in its place then took over its directory and emptied the
// block — every session gone, where a chown would have saved them (a
// lifecycle probe). Opening each file first costs a few milliseconds (a
// store of a million sessions has some hundred files) and names the file.
func checkStoreFiles(dataDir string) error {
	root := filepath.Join(dataDir, "jetstream")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path == root {
				return filepath.SkipDir // a new store
			}
			return err
		}
		if d.IsDir() || (d.Type()&fs.ModeSymlink == 0 && !d.Type().IsRegular()) {
			return nil
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		return f.Close()
	})
	if err != nil {
		return fmt.Errorf("store: %w: brain's user must be able to read and write every file of its session store (after a start as another user, give them back: chown -R), and the embedded server would start without the sessions it cannot read and lose them; nothing was changed", err)
	}
	return nil
}
