package handle

import (
	"context"
	"io/fs"
	"time"
)

// FS is a file tree confined to a root the tool never learns. Paths are
// slash-separated and relative to that root ("notes/a.txt"; "." is the root
// itself). Any path that would resolve outside the root — through "..", an
// absolute path or a symbolic link — fails with code path_escape.
type FS interface {
	// ReadFile returns the whole file. Files larger than the grant's size
	// limit fail with too_large.
	ReadFile(ctx context.Context, path string) ([]byte, error)
	// WriteFile creates or truncates the file and writes data. Parent
	// directories must exist. A read-only grant fails with denied.
	WriteFile(ctx context.Context, path string, data []byte) error
	// ReadDir lists a directory, sorted by name. More entries than the
	// grant allows fail with too_large.
	ReadDir(ctx context.Context, path string) ([]FileInfo, error)
	// Stat describes a file without following a final symbolic link.
	Stat(ctx context.Context, path string) (FileInfo, error)
	// MkdirAll creates a directory and any missing parents.
	MkdirAll(ctx context.Context, path string) error
	// Remove deletes a file or an empty directory.
	Remove(ctx context.Context, path string) error
	// Rename moves a file or directory within the root.
	Rename(ctx context.Context, from, to string) error
	// Symlink creates a symbolic link at link pointing to target. A target
	// that is absolute or leaves the root fails with path_escape.
	Symlink(ctx context.Context, target, link string) error
	// Link creates a hard link at link to the existing file at target.
	Link(ctx context.Context, target, link string) error
	// Walk visits every file and directory under path in lexical order,
	// calling fn with paths relative to the root. Symbolic links are
	// reported, never followed. Returning fs.SkipDir skips a directory;
	// any other error stops the walk and is returned.
	Walk(ctx context.Context, path string, fn func(path string, info FileInfo) error) error
	// Glob returns the paths matching pattern (path.Match syntax, plus "**"
	// for any number of directories), sorted.
	Glob(ctx context.Context, pattern string) ([]string, error)
}

// FileInfo describes one entry of an [FS].
type FileInfo struct {
	// Name is the base name.
	Name string `json:"name"`
	// Size is the length in bytes for regular files.
	Size int64 `json:"size"`
	// Mode holds the type and permission bits.
	Mode fs.FileMode `json:"mode"`
	// ModTime is the modification time.
	ModTime time.Time `json:"modTime"`
	// IsDir reports whether the entry is a directory.
	IsDir bool `json:"isDir"`
}
