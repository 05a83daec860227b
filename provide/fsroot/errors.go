package fsroot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
)

// Operation names carried by every *handle.CapabilityError this package
// returns.
const (
	opReadFile  = "read_file"
	opWriteFile = "write_file"
	opReadDir   = "read_dir"
	opStat      = "stat"
	opMkdirAll  = "mkdir_all"
	opRemove    = "remove"
	opRename    = "rename"
	opSymlink   = "symlink"
	opLink      = "link"
	opWalk      = "walk"
	opGlob      = "glob"
)

// capErr returns a *handle.CapabilityError for the fs handle with cause err.
func capErr(op string, code protocol.Code, err error, format string, args ...any) *handle.CapabilityError {
	ce := handle.Errorf(handle.KindFS, op, code, format, args...)
	ce.Err = err
	return ce
}

// escapeSentinel returns the error value os.Root wraps when a path leaves
// the root. The os package does not export it ("path escapes from parent"),
// so we ask the root for ".." once and keep what it wraps: errors.Is then
// compares identities instead of matching message text. It returns nil if a
// future Go reports escapes differently; escapes are then still refused by
// os.Root, only reported with code internal, and the tests fail loudly.
func escapeSentinel(r *os.Root) error {
	_, err := r.Lstat("..")
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Err != nil && !errors.Is(pe.Err, fs.ErrNotExist) {
		return pe.Err
	}
	return nil
}

// checkPath rejects, before any system call, the paths whose answer does
// not depend on the disk, and returns p cleaned. os.Root would refuse the
// escaping ones too; refusing them here gives the model a precise message
// and keeps NUL bytes away from the kernel.
//
// Why clean: ".." then means what it says on the page ("a/../b" is "b"
// even when a is a symbolic link), which is what a model expects, and what
// Walk reports back is the path it was given. Cleaning an already clean
// path does not allocate.
func checkPath(op, p string) (string, *handle.CapabilityError) {
	switch {
	case p == "":
		return "", capErr(op, protocol.CodeInvalidArgument, nil, `the path is empty; use "." for the root of the file tree`)
	case strings.IndexByte(p, 0) >= 0:
		return "", capErr(op, protocol.CodeInvalidArgument, nil, "the path %q contains a NUL byte", p)
	case p[0] == '/' || filepath.IsAbs(p):
		// Not quoted: an absolute path may name the host's directories, and
		// messages never do.
		return "", capErr(op, protocol.CodePathEscape, nil, "an absolute path was given; paths are relative to the root of the file tree, like \"notes/a.txt\"")
	}
	clean := path.Clean(p)
	if leavesRoot(clean) {
		return "", capErr(op, protocol.CodePathEscape, nil, "the path %q leads outside the file tree through \"..\"; use a path inside it", p)
	}
	return clean, nil
}

// leavesRoot reports whether a cleaned relative path climbs above its
// starting directory.
func leavesRoot(clean string) bool {
	return clean == ".." || strings.HasPrefix(clean, "../")
}

// mapErr turns an error from os.Root or a file into a CapabilityError.
// subject names the tool's path(s), already quoted; messages never include
// err's text, which may name the host's root.
func (f *FS) mapErr(op, subject string, err error) *handle.CapabilityError {
	var ce *handle.CapabilityError
	if errors.As(err, &ce) {
		return ce
	}
	var errno syscall.Errno
	errors.As(err, &errno)
	switch {
	case f.escape != nil && errors.Is(err, f.escape):
		return capErr(op, protocol.CodePathEscape, err, "%s leads outside the file tree (through \"..\", an absolute path or a symbolic link); use a path inside it", subject)
	case errors.Is(err, fs.ErrNotExist):
		return capErr(op, protocol.CodeNotFound, err, "%s does not exist", subject)
	case errors.Is(err, fs.ErrClosed):
		return capErr(op, protocol.CodeUnavailable, err, "the file tree has been closed")
	case errno == syscall.ENOTEMPTY:
		return capErr(op, protocol.CodeInvalidArgument, err, "%s is a directory that is not empty", subject)
	case errors.Is(err, fs.ErrExist):
		return capErr(op, protocol.CodeInvalidArgument, err, "%s already exists", subject)
	case errno == syscall.EROFS:
		return capErr(op, protocol.CodeDenied, err, "the host file system is read-only")
	case errors.Is(err, fs.ErrPermission):
		return capErr(op, protocol.CodeDenied, err, "the host file system does not allow this on %s", subject)
	case errno == syscall.ENOTDIR:
		return capErr(op, protocol.CodeInvalidArgument, err, "%s: a component is not a directory", subject)
	case errno == syscall.EISDIR:
		return capErr(op, protocol.CodeInvalidArgument, err, "%s is a directory", subject)
	case errno == syscall.ELOOP:
		return capErr(op, protocol.CodeInvalidArgument, err, "%s goes through too many symbolic links", subject)
	case errno == syscall.ENAMETOOLONG:
		return capErr(op, protocol.CodeInvalidArgument, err, "%s is too long", subject)
	case errno == syscall.EXDEV:
		return capErr(op, protocol.CodeInvalidArgument, err, "%s crosses a mount point; copy instead", subject)
	case errno == syscall.ENXIO:
		return capErr(op, protocol.CodeInvalidArgument, err, "%s is not a regular file", subject)
	case errno == syscall.EINVAL:
		return capErr(op, protocol.CodeInvalidArgument, err, "%s cannot be used for this operation", subject)
	case errno == syscall.ENOSPC:
		return capErr(op, protocol.CodeUnavailable, err, "the host file system is full")
	}
	return capErr(op, protocol.CodeInternal, err, "unexpected file system error on %s", subject)
}

// quote formats the tool's path(s) for a message.
func quote(p string) string { return fmt.Sprintf("%q", p) }
