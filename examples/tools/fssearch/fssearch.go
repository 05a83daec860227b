// Package fssearch is the fs.search example tool: a grep over the
// workspace. It walks a directory with the fs handle, reads each text file
// and returns the lines a regular expression matches.
//
// Binary files (a NUL byte or invalid UTF-8) and files larger than
// [MaxFileBytes] are skipped and listed as skipped, with the reason, so the
// model knows what it did not see. Directories named .git are not searched.
package fssearch

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/tool"
)

// Limits of one search.
const (
	// DefaultMaxMatches is the number of matching lines returned when the
	// input does not say.
	DefaultMaxMatches = 100
	// MaxMaxMatches is the largest max_matches accepted.
	MaxMaxMatches = 1000
	// MaxFileBytes is the size above which a file is skipped.
	MaxFileBytes = 1 << 20
	// MaxLineBytes is how much of a matching line is returned; a longer
	// line is cut on a character boundary and ends with "…".
	MaxLineBytes = 300
	// MaxSkippedListed is how many skipped files are listed by name; the
	// count covers all of them.
	MaxSkippedListed = 20
)

// Input says what to search for, and where.
type Input struct {
	Pattern    string `json:"pattern" jsonschema:"a regular expression in Go (RE2) syntax, matched against each line, e.g. func \\w+\\("`
	Path       string `json:"path,omitempty" jsonschema:"the directory to search, relative to the workspace; default: the whole workspace"`
	Glob       string `json:"glob,omitempty" jsonschema:"search only files whose path, relative to the workspace, matches this pattern (path.Match syntax, plus ** for any number of directories); a pattern without / matches the file name alone, e.g. *.go"`
	IgnoreCase bool   `json:"ignore_case,omitempty" jsonschema:"match letters regardless of case"`
	MaxMatches int    `json:"max_matches,omitempty" jsonschema:"stop after this many matching lines; default 100, at most 1000"`
}

// Match is one matching line.
type Match struct {
	Path string `json:"path" jsonschema:"the file, relative to the workspace"`
	Line int    `json:"line" jsonschema:"the line number, from 1"`
	Text string `json:"text" jsonschema:"the line, without its line ending; long lines are cut and end with …"`
}

// Skipped is a file that was not searched.
type Skipped struct {
	Path   string `json:"path" jsonschema:"the file, relative to the workspace"`
	Reason string `json:"reason" jsonschema:"why it was not searched"`
}

// Output lists the matches in path order, then line order.
type Output struct {
	Matches       []Match   `json:"matches" jsonschema:"the matching lines"`
	FilesSearched int       `json:"files_searched" jsonschema:"how many files were read and searched"`
	Truncated     bool      `json:"truncated" jsonschema:"true when the search stopped at max_matches: there may be more matches"`
	SkippedFiles  int       `json:"skipped_files" jsonschema:"how many files were not searched (binary, too large or unreadable)"`
	Skipped       []Skipped `json:"skipped,omitempty" jsonschema:"the first skipped files, with the reason"`
}

// Handles: the fs handle, and nothing else.
type Handles struct {
	FS handle.FS
}

// Tool searches the workspace's text files for a regular expression.
var Tool = tool.New(tool.Spec{Name: "fs.search",
	Description: "Search the workspace's text files for lines matching a regular expression (like grep -rn). Returns the path, line number and text of each match; binary and large files are skipped and listed."},
	search)

func search(ctx *tool.Context[Handles, tool.None], in Input) (Output, error) {
	expr := in.Pattern
	if in.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return Output{}, tool.Errorf("invalid_pattern", "pattern %q is not a valid regular expression: %v", in.Pattern, unwrapSyntax(err))
	}
	if in.Glob != "" {
		if err := checkGlob(in.Glob); err != nil {
			return Output{}, tool.Errorf("invalid_glob", "glob %q: %v", in.Glob, err)
		}
	}
	limit := in.MaxMatches
	switch {
	case limit == 0:
		limit = DefaultMaxMatches
	case limit < 0 || limit > MaxMaxMatches:
		return Output{}, tool.Errorf(string(protocol.CodeInvalidArgument), "max_matches is %d; give a number from 1 to %d", limit, MaxMaxMatches)
	}
	dir := in.Path
	if dir == "" {
		dir = "."
	}

	out := Output{Matches: []Match{}}
	skip := func(p, reason string) {
		out.SkippedFiles++
		if len(out.Skipped) < MaxSkippedListed {
			out.Skipped = append(out.Skipped, Skipped{Path: p, Reason: reason})
		}
	}
	err = ctx.Handles.FS.Walk(ctx, dir, func(p string, info handle.FileInfo) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if info.IsDir {
			if info.Name == ".git" {
				return fs.SkipDir
			}
			return nil
		}
		if !info.Mode.IsRegular() || (in.Glob != "" && !matchGlob(in.Glob, p)) {
			return nil
		}
		if info.Size > MaxFileBytes {
			skip(p, fmt.Sprintf("larger than %d bytes (%d bytes)", MaxFileBytes, info.Size))
			return nil
		}
		b, err := ctx.Handles.FS.ReadFile(ctx, p)
		if err != nil {
			if c := handle.CodeOf(err); c == protocol.CodeTimeout || c == protocol.CodeCancelled {
				return err
			}
			skip(p, err.Error())
			return nil
		}
		if isBinary(b) {
			skip(p, "binary (not UTF-8 text)")
			return nil
		}
		out.FilesSearched++
		for i, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSuffix(line, "\r")
			if !re.MatchString(line) {
				continue
			}
			if len(out.Matches) == limit {
				out.Truncated = true
				return fs.SkipAll
			}
			out.Matches = append(out.Matches, Match{Path: p, Line: i + 1, Text: cut(line)})
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.SkipAll) {
		return Output{}, err
	}
	return out, nil
}

// unwrapSyntax returns the message of a *syntax.Error without the
// "error parsing regexp: " prefix the model does not need.
func unwrapSyntax(err error) string {
	return strings.TrimPrefix(err.Error(), "error parsing regexp: ")
}

// isBinary reports whether b is not UTF-8 text: it holds a NUL byte, or is
// not valid UTF-8.
func isBinary(b []byte) bool {
	return strings.IndexByte(string(b), 0) >= 0 || !utf8.Valid(b)
}

// cut shortens a line to MaxLineBytes on a character boundary.
func cut(s string) string {
	if len(s) <= MaxLineBytes {
		return s
	}
	n := MaxLineBytes
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// checkGlob reports a malformed glob.
func checkGlob(glob string) error {
	for _, part := range strings.Split(glob, "/") {
		if part == "**" {
			continue
		}
		if _, err := path.Match(part, ""); err != nil {
			return fmt.Errorf("%q is not a valid pattern (path.Match syntax: * ? [a-z] and \\ to escape)", part)
		}
	}
	return nil
}

// matchGlob reports whether the slash-separated path p matches glob. A glob
// without a slash is matched against the last element of p only.
func matchGlob(glob, p string) bool {
	if !strings.Contains(glob, "/") {
		ok, _ := path.Match(glob, path.Base(p))
		return ok
	}
	return matchParts(strings.Split(glob, "/"), strings.Split(p, "/"))
}

// matchParts matches path elements against glob elements, where "**"
// matches any number of elements (none included).
func matchParts(glob, parts []string) bool {
	for len(glob) > 0 {
		if glob[0] == "**" {
			rest := glob[1:]
			for i := 0; i <= len(parts); i++ {
				if matchParts(rest, parts[i:]) {
					return true
				}
			}
			return false
		}
		if len(parts) == 0 {
			return false
		}
		if ok, _ := path.Match(glob[0], parts[0]); !ok {
			return false
		}
		glob, parts = glob[1:], parts[1:]
	}
	return len(parts) == 0
}
