//go:build wasip1

package guest

import (
	"context"
	"errors"
	"io/fs"
	"strings"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/internal/abi"
)

// FS is the fs handle over the host module brain_fs.
type FS struct{}

//go:wasmimport brain_fs read_file
func fsReadFile(ptr, n uint32) uint32

//go:wasmimport brain_fs write_file
func fsWriteFile(ptr, n uint32) uint32

//go:wasmimport brain_fs read_dir
func fsReadDir(ptr, n uint32) uint32

//go:wasmimport brain_fs stat
func fsStat(ptr, n uint32) uint32

//go:wasmimport brain_fs mkdir_all
func fsMkdirAll(ptr, n uint32) uint32

//go:wasmimport brain_fs remove
func fsRemove(ptr, n uint32) uint32

//go:wasmimport brain_fs rename
func fsRename(ptr, n uint32) uint32

//go:wasmimport brain_fs symlink
func fsSymlink(ptr, n uint32) uint32

//go:wasmimport brain_fs link
func fsLink(ptr, n uint32) uint32

//go:wasmimport brain_fs walk
func fsWalk(ptr, n uint32) uint32

//go:wasmimport brain_fs glob
func fsGlob(ptr, n uint32) uint32

func (FS) ReadFile(_ context.Context, path string) ([]byte, error) {
	var b []byte
	err := call(handle.KindFS, "read_file", fsReadFile, abi.PathRequest{Path: path}, &b)
	return b, err
}

func (FS) WriteFile(_ context.Context, path string, data []byte) error {
	return call(handle.KindFS, "write_file", fsWriteFile, abi.WriteRequest{Path: path, Data: data}, nil)
}

func (FS) ReadDir(_ context.Context, path string) ([]handle.FileInfo, error) {
	var out []handle.FileInfo
	err := call(handle.KindFS, "read_dir", fsReadDir, abi.PathRequest{Path: path}, &out)
	return out, err
}

func (FS) Stat(_ context.Context, path string) (handle.FileInfo, error) {
	var out handle.FileInfo
	err := call(handle.KindFS, "stat", fsStat, abi.PathRequest{Path: path}, &out)
	return out, err
}

func (FS) MkdirAll(_ context.Context, path string) error {
	return call(handle.KindFS, "mkdir_all", fsMkdirAll, abi.PathRequest{Path: path}, nil)
}

func (FS) Remove(_ context.Context, path string) error {
	return call(handle.KindFS, "remove", fsRemove, abi.PathRequest{Path: path}, nil)
}

func (FS) Rename(_ context.Context, from, to string) error {
	return call(handle.KindFS, "rename", fsRename, abi.TwoPathRequest{From: from, To: to}, nil)
}

func (FS) Symlink(_ context.Context, target, link string) error {
	return call(handle.KindFS, "symlink", fsSymlink, abi.TwoPathRequest{From: target, To: link}, nil)
}

func (FS) Link(_ context.Context, target, link string) error {
	return call(handle.KindFS, "link", fsLink, abi.TwoPathRequest{From: target, To: link}, nil)
}

// Walk asks the host for the whole listing (bounded by the host's grants),
// then calls fn in order, honouring fs.SkipDir and fs.SkipAll.
func (FS) Walk(_ context.Context, path string, fn func(path string, info handle.FileInfo) error) error {
	var entries []abi.WalkEntry
	if err := call(handle.KindFS, "walk", fsWalk, abi.PathRequest{Path: path}, &entries); err != nil {
		return err
	}
	skip := ""
	for _, e := range entries {
		if skip != "" && strings.HasPrefix(e.Path, skip) {
			continue
		}
		skip = ""
		err := fn(e.Path, e.Info)
		switch {
		case errors.Is(err, fs.SkipAll):
			return nil
		case errors.Is(err, fs.SkipDir):
			if e.Info.IsDir {
				skip = e.Path + "/"
			} else {
				return nil
			}
		case err != nil:
			return err
		}
	}
	return nil
}

func (FS) Glob(_ context.Context, pattern string) ([]string, error) {
	var out []string
	err := call(handle.KindFS, "glob", fsGlob, abi.PathRequest{Path: pattern}, &out)
	return out, err
}
