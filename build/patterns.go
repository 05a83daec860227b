package build

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// pathError says what is wrong with pattern p (dir: p, relative to the
// build's directory) when it names a path that is no Go package pattern
// brain build can take — one that does not exist, a file, a directory of
// TypeScript without its project's package.json — and nil otherwise
// (then go list reads it). A pattern is a path when the go command takes
// it as one (see isPathPattern) or names a script file. Without it go list answered each with "go.mod
// file not found".
func pathError(p, dir string) error {
	if strings.Contains(p, "...") {
		return nil
	}
	fi, err := os.Stat(dir)
	if !(isPathPattern(p) || isScriptFile(p)) && (err != nil || !fi.IsDir()) {
		return nil // an import path (a directory here without ./ is read as one below)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("build: %s does not exist", p)
	}
	if err != nil {
		return fmt.Errorf("build: %w", err)
	}
	const wants = "brain build takes a TypeScript or JavaScript project's directory, the one with its package.json (it builds every *.tool.ts, .tool.mts, .tool.js and .tool.mjs file under it), or Go packages"
	if !fi.IsDir() {
		if filepath.Base(dir) == "package.json" {
			return fmt.Errorf("build: %s is a project's package.json: give its directory, %s", p, filepath.Dir(p))
		}
		if !isScriptFile(p) {
			return nil // a Go file: go list's to read
		}
		if proj := projectOf(filepath.Dir(dir)); proj != "" {
			return fmt.Errorf("build: %s is a file: %s; this file's project is %s", p, wants, proj)
		}
		return fmt.Errorf("build: %s is a file, in no directory with a package.json: %s", p, wants)
	}
	if !hasScripts(dir) {
		if !hasGoFiles(dir) {
			return fmt.Errorf("build: %s holds no Go files, no package.json and no TypeScript or JavaScript files: %s", p, wants)
		}
		return nil
	}
	if proj := projectOf(filepath.Dir(dir)); proj != "" {
		return fmt.Errorf("build: %s has no package.json: %s; the project of its scripts is %s", p, wants, proj)
	}
	return fmt.Errorf("build: %s has TypeScript or JavaScript files but no package.json, nor has any directory above it: %s", p, wants)
}

// isPathPattern reports whether p names a path, as the go command tells
// one from an import path: absolute, ".", "..", or starting ./ or ../.
func isPathPattern(p string) bool {
	return filepath.IsAbs(p) || p == "." || p == ".." ||
		strings.HasPrefix(p, "./") || strings.HasPrefix(p, "../") ||
		strings.HasPrefix(p, "."+string(filepath.Separator)) || strings.HasPrefix(p, ".."+string(filepath.Separator))
}

func isScriptFile(name string) bool {
	for _, ext := range []string{".ts", ".mts", ".cts", ".tsx", ".js", ".mjs", ".cjs", ".jsx"} {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return false
}

// hasScripts reports whether dir holds a TypeScript or JavaScript file
// and no Go file.
func hasScripts(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	scripts := false
	for _, e := range ents {
		switch {
		case e.IsDir():
		case strings.HasSuffix(e.Name(), ".go"):
			return false
		case isScriptFile(e.Name()):
			scripts = true
		}
	}
	return scripts
}

// hasGoFiles reports whether dir holds a .go file.
func hasGoFiles(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".go") {
			return true
		}
	}
	return false
}

// projectOf returns the nearest directory from dir up that has a
// package.json, as the user would name it (relative to the working
// directory when dir is), or "".
func projectOf(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	for d := abs; ; d = filepath.Dir(d) {
		if IsScriptProject(d) {
			if !filepath.IsAbs(dir) {
				if wd, err := os.Getwd(); err == nil {
					if r, err := filepath.Rel(wd, d); err == nil {
						if r == "." || strings.HasPrefix(r, "..") {
							return r
						}
						return "." + string(filepath.Separator) + r
					}
				}
			}
			return d
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}
