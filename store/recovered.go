package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/brainrt/brain/internal/regularfile"
)

// checkStoreFiles refuses to start the embedded server on a store that
// has a file brain's user cannot open for reading and writing. The server
// logs a stream it cannot recover ("Error recreating stream": a block file
// owned by root after a start as root, say) and starts without it; the
// stream made in its place then took over its directory and emptied the
// block — every session gone, where a chown would have saved them (a
// lifecycle probe). Opening each file first costs a few milliseconds (a
// store of a million sessions has some hundred files) and names the file.
//
// Directories too: each must be one brain's user may list, enter and
// write (a stream directory left root's made the server delete the
// stream's blocks as it gave up recovering it: the re-probe), and a
// stream's msgs and obs must be directories (a file there failed the
// recovery the same way).
func checkStoreFiles(dataDir string) error {
	if err := accessible(dataDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return storeFilesError(err)
	}
	root := filepath.Join(dataDir, "jetstream")
	if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
		return nil // a new store
	}
	if err := checkTree(root, map[string]bool{}); err != nil {
		return storeFilesError(err)
	}
	return nil
}

// checkTree checks the files and directories under dir, following
// symbolic links (a store's directory may be a link to another volume);
// seen holds the directories checked, so that a link to one of them is
// not walked again.
func checkTree(dir string, seen map[string]bool) error {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	if seen[real] {
		return nil
	}
	seen[real] = true
	if err := accessible(dir); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		fi, err := os.Stat(path) // follows a link
		if err != nil {
			return err
		}
		inStream := filepath.Base(filepath.Dir(dir)) == "streams" // dir is a stream's own
		if fi.IsDir() {
			// A directory where the store keeps a file: nats-server gave
			// up the stream's recovery, and brain made it anew (an
			// adversarial probe: a directory for 1.blk, 0 sessions after).
			if filepath.Base(dir) == "msgs" || (inStream && (e.Name() == "meta.inf" || e.Name() == "meta.sum")) {
				return &fs.PathError{Op: "open", Path: path, Err: errors.New("a directory, where the stream keeps a file")}
			}
			if err := checkTree(path, seen); err != nil {
				return err
			}
			continue
		}
		if name := e.Name(); (name == "msgs" || name == "obs") && inStream {
			return &fs.PathError{Op: "open", Path: path, Err: errors.New("not a directory, where the stream keeps one")}
		}
		if !fi.Mode().IsRegular() {
			// A named pipe, a socket, a device: the embedded server's read
			// of a pipe waited for ever, before brain listened or logged
			// anything (an adversarial probe).
			return &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("not a regular file (%s), where the store keeps files", regularfile.Kind(fi.Mode()))}
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}

// accessible reports a directory brain's user may not list, enter or
// write.
func accessible(dir string) error {
	if err := syscall.Access(dir, 0x7); err != nil { // R_OK|W_OK|X_OK
		return &fs.PathError{Op: "access", Path: dir, Err: err}
	}
	return nil
}

func storeFilesError(err error) error {
	return fmt.Errorf("store: %w: brain's user must be able to read and write every file and directory of its session store (after a start as another user, give them back: chown -R), and the embedded server would start without the sessions it cannot read and delete them; nothing in the store was changed", err)
}
