package fsroot

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide/grant"
)

// FS is a [handle.FS] confined to the directory named by [Grants.Root].
// Create it with [New]; the zero value is not usable. Its methods are safe
// for concurrent use.
type FS struct {
	root       *os.Root
	escape     error // what os.Root wraps when a path leaves the root; see escapeSentinel
	readOnly   bool
	maxFile    int64
	maxEntries int
}

var _ handle.FS = (*FS)(nil)

// New validates g and opens its root. A root that does not exist or is not
// a directory fails here, as a *[grant.FieldError] for "root" wrapping the
// cause, never on the first call. Close the FS when the environment shuts
// down.
func New(g Grants) (*FS, error) {
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("fs grants: %w", err)
	}
	root, err := os.OpenRoot(g.Root)
	if err != nil {
		return nil, fmt.Errorf("fs grants: %w: %w", grant.Errorf("root", "cannot open directory %q", g.Root), err)
	}
	f := &FS{
		root:       root,
		escape:     escapeSentinel(root),
		readOnly:   g.ReadOnly,
		maxFile:    g.MaxFileBytes,
		maxEntries: g.MaxEntries,
	}
	if f.maxFile == 0 {
		f.maxFile = DefaultMaxFileBytes
	}
	// The read buffer is sized from the limit; keep limit+1 an int.
	f.maxFile = min(f.maxFile, int64(math.MaxInt-1))
	if f.maxEntries == 0 {
		f.maxEntries = DefaultMaxEntries
	}
	return f, nil
}

// Close releases the root directory. Calls after Close fail with code
// unavailable.
func (f *FS) Close() error {
	if err := f.root.Close(); err != nil {
		return fmt.Errorf("close fs root: %w", err)
	}
	return nil
}

// ReadFile returns the content of the regular file at p, following
// symbolic links that stay inside the root. It fails with too_large when the
// file is larger than [Grants.MaxFileBytes] (checked before reading, and
// again while reading in case the file grows), with invalid_argument for
// directories, FIFOs and devices, and with denied for a file with more than
// one hard link.
func (f *FS) ReadFile(ctx context.Context, p string) ([]byte, error) {
	if ce := handle.FromContext(ctx, handle.KindFS, opReadFile); ce != nil {
		return nil, ce
	}
	clean, ce := checkPath(opReadFile, p)
	if ce != nil {
		return nil, ce
	}
	// O_NONBLOCK: opening a FIFO or a terminal must not hang the call; such
	// files are refused right after the open.
	file, err := f.root.OpenFile(clean, os.O_RDONLY|oNonblock, 0)
	if err != nil {
		return nil, f.mapErr(opReadFile, quote(p), err)
	}
	defer file.Close()
	size, ce := f.checkRegular(opReadFile, p, file)
	if ce != nil {
		return nil, ce
	}
	if size > f.maxFile {
		return nil, capErr(opReadFile, protocol.CodeTooLarge, nil, "%q is %d bytes, more than the limit of %d bytes", p, size, f.maxFile)
	}
	return f.readBounded(ctx, p, file, size)
}

// readBounded reads file to EOF, never more than maxFile+1 bytes.
func (f *FS) readBounded(ctx context.Context, p string, file *os.File, size int64) ([]byte, error) {
	limit := f.maxFile + 1
	// One byte beyond the size: the read that reports EOF (or shows that the
	// file grew) needs no second allocation.
	buf := make([]byte, 0, size+1)
	for {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(2*int64(cap(buf))+512, limit))
			copy(grown, buf)
			buf = grown
		}
		n, err := file.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > f.maxFile {
			return nil, capErr(opReadFile, protocol.CodeTooLarge, nil, "%q grew past the limit of %d bytes while it was read", p, f.maxFile)
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, f.mapErr(opReadFile, quote(p), err)
		}
		if ce := handle.FromContext(ctx, handle.KindFS, opReadFile); ce != nil {
			return nil, ce
		}
	}
}

// checkRegular returns the size of the opened file, or an error when it is
// not a regular file with exactly one link. It looks at the descriptor, not
// the name, so the answer is about the file actually opened.
func (f *FS) checkRegular(op, p string, file *os.File) (int64, *handle.CapabilityError) {
	fi, err := file.Stat()
	if err != nil {
		return 0, f.mapErr(op, quote(p), err)
	}
	if fi.IsDir() {
		return 0, capErr(op, protocol.CodeInvalidArgument, nil, "%q is a directory; use read_dir or walk to list it", p)
	}
	if !fi.Mode().IsRegular() {
		return 0, capErr(op, protocol.CodeInvalidArgument, nil, "%q is not a regular file (a FIFO, socket or device); only regular files can be read or written", p)
	}
	// os.Root cannot tell a hard link to a file outside the root from an
	// ordinary file: both are just names inside the root. A second link is
	// the only trace, so such files are refused (see docs/handle-fs.md).
	if n := linkCount(fi); n != 1 {
		return 0, capErr(op, protocol.CodeDenied, nil, "%q has %d hard links; the fs handle refuses files with more than one link because another link may lie outside the file tree. Ask for a copy of the file instead", p, n)
	}
	return fi.Size(), nil
}

// WriteFile creates or truncates the regular file at p and writes data.
// Data larger than [Grants.MaxFileBytes] fails with too_large and nothing is
// written; so does a read-only grant (denied) and an existing file with
// more than one hard link (denied).
func (f *FS) WriteFile(ctx context.Context, p string, data []byte) error {
	clean, ce := f.checkWrite(ctx, opWriteFile, p)
	if ce != nil {
		return ce
	}
	if int64(len(data)) > f.maxFile {
		return capErr(opWriteFile, protocol.CodeTooLarge, nil, "%d bytes is more than the limit of %d bytes; nothing was written to %q", len(data), f.maxFile, p)
	}
	// No O_TRUNC: the file is truncated only after checkRegular accepted the
	// opened descriptor, so a refused file keeps its content.
	file, err := f.root.OpenFile(clean, os.O_WRONLY|os.O_CREATE|oNonblock, 0o666)
	if err != nil {
		return f.mapErr(opWriteFile, quote(p), err)
	}
	if _, ce := f.checkRegular(opWriteFile, p, file); ce != nil {
		file.Close()
		return ce
	}
	err = file.Truncate(0)
	if err == nil {
		_, err = file.Write(data)
	}
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return f.mapErr(opWriteFile, quote(p), err)
	}
	return nil
}

// checkWrite is the common prologue of operations that change the tree:
// it returns p cleaned.
func (f *FS) checkWrite(ctx context.Context, op, p string) (string, *handle.CapabilityError) {
	if ce := handle.FromContext(ctx, handle.KindFS, op); ce != nil {
		return "", ce
	}
	clean, ce := checkPath(op, p)
	if ce != nil {
		return "", ce
	}
	if f.readOnly {
		return "", capErr(op, protocol.CodeDenied, nil, "the file tree is read-only; %s is not allowed", op)
	}
	return clean, nil
}

// checkWrite2 is checkWrite for operations on two paths.
func (f *FS) checkWrite2(ctx context.Context, op, p1, p2 string) (string, string, *handle.CapabilityError) {
	if ce := handle.FromContext(ctx, handle.KindFS, op); ce != nil {
		return "", "", ce
	}
	clean1, ce := checkPath(op, p1)
	if ce != nil {
		return "", "", ce
	}
	clean2, ce := checkPath(op, p2)
	if ce != nil {
		return "", "", ce
	}
	if f.readOnly {
		return "", "", capErr(op, protocol.CodeDenied, nil, "the file tree is read-only; %s is not allowed", op)
	}
	return clean1, clean2, nil
}

// Stat describes the entry at p without following a final symbolic link.
func (f *FS) Stat(ctx context.Context, p string) (handle.FileInfo, error) {
	if ce := handle.FromContext(ctx, handle.KindFS, opStat); ce != nil {
		return handle.FileInfo{}, ce
	}
	clean, ce := checkPath(opStat, p)
	if ce != nil {
		return handle.FileInfo{}, ce
	}
	fi, err := f.root.Lstat(clean)
	if err != nil {
		return handle.FileInfo{}, f.mapErr(opStat, quote(p), err)
	}
	return toInfo(fi), nil
}

// MkdirAll creates the directory p and any missing parents.
func (f *FS) MkdirAll(ctx context.Context, p string) error {
	clean, ce := f.checkWrite(ctx, opMkdirAll, p)
	if ce != nil {
		return ce
	}
	if err := f.root.MkdirAll(clean, 0o777); err != nil {
		return f.mapErr(opMkdirAll, quote(p), err)
	}
	return nil
}

// Remove deletes the file, symbolic link or empty directory at p. The root
// itself cannot be removed.
func (f *FS) Remove(ctx context.Context, p string) error {
	clean, ce := f.checkWrite(ctx, opRemove, p)
	if ce != nil {
		return ce
	}
	if clean == "." {
		return capErr(opRemove, protocol.CodeInvalidArgument, nil, "the root of the file tree cannot be removed")
	}
	if err := f.root.Remove(clean); err != nil {
		return f.mapErr(opRemove, quote(p), err)
	}
	return nil
}

// Rename moves from to to; both stay inside the root. Neither may be the
// root itself.
func (f *FS) Rename(ctx context.Context, from, to string) error {
	cleanFrom, cleanTo, ce := f.checkWrite2(ctx, opRename, from, to)
	if ce != nil {
		return ce
	}
	if cleanFrom == "." || cleanTo == "." {
		return capErr(opRename, protocol.CodeInvalidArgument, nil, "the root of the file tree cannot be renamed or replaced")
	}
	if err := f.root.Rename(cleanFrom, cleanTo); err != nil {
		return f.mapErr(opRename, fmt.Sprintf("%q or %q", from, to), err)
	}
	return nil
}

// Symlink creates a symbolic link at link pointing to target. target must be
// relative and, read from link's directory, stay inside the root ("../x"
// from "a/l" is fine, "../../x" is path_escape). The check is lexical: it
// keeps the tool from planting links that lead out, for programs that do
// not use os.Root. Whatever a link really points at, every handle operation
// that follows it out fails with path_escape.
func (f *FS) Symlink(ctx context.Context, target, link string) error {
	clean, ce := f.checkWrite(ctx, opSymlink, link)
	if ce != nil {
		return ce
	}
	switch {
	case target == "":
		return capErr(opSymlink, protocol.CodeInvalidArgument, nil, "the link target is empty")
	case strings.IndexByte(target, 0) >= 0:
		return capErr(opSymlink, protocol.CodeInvalidArgument, nil, "the link target %q contains a NUL byte", target)
	case target[0] == '/' || filepath.IsAbs(target):
		return capErr(opSymlink, protocol.CodePathEscape, nil, "the link target is absolute; use a target relative to the link's directory")
	case leavesRoot(path.Join(path.Dir(clean), target)):
		return capErr(opSymlink, protocol.CodePathEscape, nil, "the link target %q, read from the directory of %q, leads outside the file tree", target, link)
	}
	if err := f.root.Symlink(target, clean); err != nil {
		return f.mapErr(opSymlink, quote(link), err)
	}
	return nil
}

// Link always fails: with path_escape when either path leaves the root
// lexically, otherwise with denied.
//
// Why refuse: ReadFile and WriteFile refuse files with more than one hard
// link (a link to an outside file is indistinguishable from any other), so a
// link made here would make both names unusable. Refusing Link keeps the
// rule simple and leaves no half-usable files behind; tools can copy or use
// Symlink.
func (f *FS) Link(ctx context.Context, target, link string) error {
	if _, _, ce := f.checkWrite2(ctx, opLink, target, link); ce != nil {
		return ce
	}
	return capErr(opLink, protocol.CodeDenied, nil, "hard links are not supported by the fs handle (files with several links cannot be read or written); copy the file or use symlink")
}

// toInfo converts a FileInfo from os to the handle's shape.
func toInfo(fi os.FileInfo) handle.FileInfo {
	info := handle.FileInfo{
		Name:    fi.Name(),
		Mode:    fi.Mode(),
		ModTime: fi.ModTime(),
		IsDir:   fi.IsDir(),
	}
	if fi.Mode().IsRegular() {
		info.Size = fi.Size()
	}
	return info
}
