package fsroot

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
)

// readdirBatch is how many entries are read from a directory at a time,
// between checks of the context and of the entry limit.
const readdirBatch = 256

// ReadDir lists the directory at p, sorted by name, following symbolic links
// in p that stay inside the root. Entries are described without following
// them. A directory with more than [Grants.MaxEntries] entries fails with
// too_large.
func (f *FS) ReadDir(ctx context.Context, p string) ([]handle.FileInfo, error) {
	if ce := handle.FromContext(ctx, handle.KindFS, opReadDir); ce != nil {
		return nil, ce
	}
	clean, ce := checkPath(opReadDir, p)
	if ce != nil {
		return nil, ce
	}
	// O_DIRECTORY: a FIFO is refused with ENOTDIR instead of blocking the
	// open.
	dir, err := f.root.OpenFile(clean, os.O_RDONLY|oDirectory, 0)
	if err != nil {
		return nil, f.mapErr(opReadDir, quote(p), err)
	}
	defer dir.Close()
	entries, tooMany, ce := f.readEntries(ctx, opReadDir, p, dir, f.maxEntries)
	if ce != nil {
		return nil, ce
	}
	if tooMany {
		return nil, capErr(opReadDir, protocol.CodeTooLarge, nil, "the directory %q has more than %d entries, the most the fs handle lists at once; list a subdirectory or stat a known name instead", p, f.maxEntries)
	}
	infos := make([]handle.FileInfo, len(entries))
	for i, fi := range entries {
		infos[i] = toInfo(fi)
	}
	return infos, nil
}

// readEntries reads the entries of dir sorted by name, reading at most
// budget+1 of them; tooMany reports that there were more than budget.
//
// The FileInfos come from fstatat on dir's descriptor (os does so for files
// opened through a Root), never from a host path joined with the name, so
// they describe the entry in the directory actually opened.
func (f *FS) readEntries(ctx context.Context, op, p string, dir *os.File, budget int) (entries []os.FileInfo, tooMany bool, ce *handle.CapabilityError) {
	for {
		batch, err := dir.Readdir(min(readdirBatch, budget+1-len(entries)))
		entries = append(entries, batch...)
		if len(entries) > budget {
			return nil, true, nil
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, false, f.mapErr(op, quote(p), err)
		}
		if ce := handle.FromContext(ctx, handle.KindFS, op); ce != nil {
			return nil, false, ce
		}
	}
	slices.SortFunc(entries, func(a, b os.FileInfo) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, false, nil
}

// Walk calls fn for p and, when p is a directory, for everything below it,
// in lexical order, with slash-separated paths relative to the root (p
// cleaned: "a/./b/" is reported as "a/b"). Symbolic links are reported,
// never followed, p included. fn returning [fs.SkipDir] skips the directory
// (or, for a file, the rest of its directory); [fs.SkipAll] ends the walk
// with nil; any other error ends it and is returned as is.
//
// Each directory is opened through the root and checked to be the one that
// was listed: a directory swapped for a symbolic link during the walk fails
// with path_escape when the link leads out of the root and with conflict
// otherwise, and nothing is listed through it. Entries that vanish during
// the walk are skipped. More than [Grants.MaxEntries] entries listed in
// total fail with too_large. The context is checked before every entry.
func (f *FS) Walk(ctx context.Context, p string, fn func(path string, info handle.FileInfo) error) error {
	if ce := handle.FromContext(ctx, handle.KindFS, opWalk); ce != nil {
		return ce
	}
	clean, ce := checkPath(opWalk, p)
	if ce != nil {
		return ce
	}
	return f.walk(ctx, opWalk, clean, func(rel string, fi os.FileInfo) error {
		return fn(rel, toInfo(fi))
	})
}

// walker holds the state of one walk.
type walker struct {
	f      *FS
	ctx    context.Context // per call, never stored beyond it
	op     string
	listed int // entries read from directories so far
	fn     func(rel string, fi os.FileInfo) error
}

// walk implements Walk for op (walk or glob) from the cleaned path start.
func (f *FS) walk(ctx context.Context, op, start string, fn func(rel string, fi os.FileInfo) error) error {
	fi, err := f.root.Lstat(start)
	if err != nil {
		return f.mapErr(op, quote(start), err)
	}
	w := &walker{f: f, ctx: ctx, op: op, fn: fn}
	err = w.visit(start, fi)
	if err == fs.SkipDir || err == fs.SkipAll {
		return nil
	}
	return err
}

// visit reports rel and, for a directory, walks its entries. It follows the
// contract of fs.WalkDir for SkipDir and SkipAll.
func (w *walker) visit(rel string, fi os.FileInfo) error {
	if ce := handle.FromContext(w.ctx, handle.KindFS, w.op); ce != nil {
		return ce
	}
	if err := w.fn(rel, fi); err != nil || !fi.IsDir() {
		if err == fs.SkipDir && fi.IsDir() {
			err = nil
		}
		return err
	}
	entries, err := w.list(rel, fi)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := w.visit(path.Join(rel, e.Name()), e); err != nil {
			if err == fs.SkipDir {
				break
			}
			return err
		}
	}
	return nil
}

// list opens the directory rel, which was described as want, and returns
// its entries.
//
// Why open by the full path through the root rather than relative to the
// parent's descriptor: os.Root opens every component relative to the one
// before and refuses to leave the root, so whatever was swapped in along the
// way the result is inside it; the SameFile check then makes sure it is the
// directory that was listed, not one reached through a symbolic link put in
// its place. One descriptor is open at a time, whatever the depth.
func (w *walker) list(rel string, want os.FileInfo) ([]os.FileInfo, error) {
	dir, err := w.f.root.OpenFile(rel, os.O_RDONLY|oDirectory, 0)
	if err != nil {
		var errno syscall.Errno
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, nil // removed since it was listed: nothing left to walk
		case errors.As(err, &errno) && errno == syscall.ENOTDIR:
			return nil, w.replaced(rel, err)
		}
		return nil, w.f.mapErr(w.op, quote(rel), err)
	}
	defer dir.Close()
	got, err := dir.Stat()
	if err != nil {
		return nil, w.f.mapErr(w.op, quote(rel), err)
	}
	if !os.SameFile(want, got) {
		return nil, w.replaced(rel, nil)
	}
	entries, tooMany, ce := w.f.readEntries(w.ctx, w.op, rel, dir, w.f.maxEntries-w.listed)
	if ce != nil {
		return nil, ce
	}
	if tooMany {
		return nil, capErr(w.op, protocol.CodeTooLarge, nil, "the %s listed more than %d entries; start from a smaller directory or use a narrower pattern", w.op, w.f.maxEntries)
	}
	w.listed += len(entries)
	return entries, nil
}

// replaced reports a directory that changed between being listed and being
// opened.
func (w *walker) replaced(rel string, err error) *handle.CapabilityError {
	return capErr(w.op, protocol.CodeConflict, err, "the directory %q was replaced while the %s ran, so nothing under it was listed; run it again", rel, w.op)
}

// Glob returns the paths matching pattern, sorted. The pattern is relative
// to the root and uses path.Match syntax in each element, plus "**" as a
// whole element for any number of directories (none included): "**/*.go",
// "docs/**". Symbolic links are matched by name and never followed. A
// pattern that does not match, or whose leading directory does not exist,
// returns no paths and no error. Glob lists only the directories that can
// still match; more than [Grants.MaxEntries] entries listed fail with
// too_large.
func (f *FS) Glob(ctx context.Context, pattern string) ([]string, error) {
	if ce := handle.FromContext(ctx, handle.KindFS, opGlob); ce != nil {
		return nil, ce
	}
	clean, ce := checkPath(opGlob, pattern)
	if ce != nil {
		return nil, ce
	}
	pat := globPattern(strings.Split(clean, "/"))
	for _, elem := range pat {
		if _, err := path.Match(elem, ""); err != nil {
			return nil, capErr(opGlob, protocol.CodeInvalidArgument, err, "the pattern %q is malformed (path.Match syntax: *, ?, [a-z], \\ to escape; ** for any number of directories)", pattern)
		}
	}
	// Start below the elements without wildcards: nothing outside that
	// directory can match.
	n := 0
	for n < len(pat) && !hasMeta(pat[n]) {
		n++
	}
	start := "."
	if n > 0 {
		start = path.Join(pat[:n]...)
	}
	var matches []string
	err := f.walk(ctx, opGlob, start, func(rel string, fi os.FileInfo) error {
		if rel == "." {
			return nil // the root is never a match, but may hold them
		}
		match, deeper := pat.match(strings.Split(rel, "/"))
		if match {
			matches = append(matches, rel)
		}
		if fi.IsDir() && !deeper {
			return fs.SkipDir
		}
		return nil
	})
	if handle.CodeOf(err) == protocol.CodeNotFound {
		return nil, nil // like filepath.Glob: a missing directory has no matches
	}
	if err != nil {
		return nil, err
	}
	// Walk order puts "a/b" before "a.b"; the contract is sorted strings.
	slices.Sort(matches)
	return matches, nil
}

// hasMeta reports whether a pattern element needs path.Match.
func hasMeta(elem string) bool { return strings.ContainsAny(elem, `*?[\`) }

// globPattern is a cleaned pattern split into elements.
type globPattern []string

// match reports whether the path elements names match the whole pattern,
// and whether a path below them still could (so a directory is worth
// listing). It runs the pattern as a small automaton, one state per pattern
// element, so "**" costs O(len(pattern)·len(names)), never backtracking.
func (pat globPattern) match(names []string) (match, deeper bool) {
	cur := make([]bool, len(pat)+1)
	next := make([]bool, len(pat)+1)
	cur[0] = true
	pat.skipStars(cur)
	for _, name := range names {
		clear(next)
		alive := false
		for i, on := range cur[:len(pat)] {
			if !on {
				continue
			}
			if pat[i] == "**" {
				next[i], alive = true, true
			} else if ok, _ := path.Match(pat[i], name); ok {
				next[i+1], alive = true, true
			}
		}
		if !alive {
			return false, false
		}
		pat.skipStars(next)
		cur, next = next, cur
	}
	return cur[len(pat)], slices.Contains(cur[:len(pat)], true)
}

// skipStars adds the states reached by letting each "**" match nothing.
func (pat globPattern) skipStars(states []bool) {
	for i, elem := range pat {
		if states[i] && elem == "**" {
			states[i+1] = true
		}
	}
}
