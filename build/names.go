package build

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"github.com/brainrt/brain/protocol"
)

// A tool's name is both a capability's name, once the tool is attached,
// and the base of its artifact's file names, <name>.tool.json beside
// <name>.wasm or <name>.mjs, in the output directory. So build holds a
// name to the protocol's rule (protocol.ValidateName: non-empty, at most
// 256 bytes of UTF-8, no spaces, control or format characters, ASCII's or
// Unicode's, nor U+FFFD — which also rules out NUL and newlines, and the
// invisible characters that would make a file name, and the name an
// operator reads when approving a call, look like another) and, because
// the protocol allows what a file name must not have, to these as well:
//
//   - No '/' or '\': either makes the name a path ("../../x" leaves the
//     output directory; "a/b" needs a directory that is not there).
//     '\' is a separator on Windows, and an artifact directory should
//     mean the same wherever it is copied.
//   - No leading '.': "." and ".." name directories, and a file whose
//     name starts with a dot is hidden from ls and from shell globs such
//     as `brain run out/*.tool.json`, so the artifact would be invisible
//     to the person who built it.
//   - No leading '-': `brain run -rf.tool.json`, `rm out/*` and most
//     commands read such a file name as a flag.
//   - At most 245 bytes: most file systems allow 255 bytes in one file
//     name, and ".tool.json" takes 10 of them; the protocol's 256 would
//     end in a "file name too long" error instead.
//
// Not refused: the characters Windows reserves in file names (: * ? " < >
// |), which capability names use (github:search) and Linux and macOS file
// systems accept.

// maxNameBytes is the longest tool name whose artifact's file names fit
// in the 255 bytes most file systems allow in one file name.
const maxNameBytes = 255 - len(".tool.json")

// nameRule is the rule checkName applies, stated in every refusal.
const nameRule = "a tool's name is 1 to 245 bytes of UTF-8; no spaces, control or format characters (Unicode's too), '/' or '\\'; not starting with '.' or '-'"

// checkName reports why name cannot be a built tool's name, or nil.
func checkName(name string) error {
	if err := protocol.ValidateName(name); err != nil {
		return err
	}
	switch {
	case len(name) > maxNameBytes:
		return fmt.Errorf("%d bytes, more than the %d that fit in a file name with .tool.json", len(name), maxNameBytes)
	case strings.ContainsAny(name, `/\`):
		return errors.New(`must not contain '/' or '\'`)
	case name[0] == '.':
		return errors.New("must not start with '.'")
	case name[0] == '-':
		return errors.New("must not start with '-'")
	}
	return nil
}

// nameError is checkName's refusal as build reports it: the name, what is
// wrong with it and the whole rule.
func nameError(name string) error {
	if err := checkName(name); err != nil {
		shown := name // a long name is cut, at a character's start
		if len(shown) > 64 {
			i := 64
			for i > 0 && !utf8.RuneStart(shown[i]) {
				i--
			}
			shown = shown[:i] + "…"
		}
		return fmt.Errorf("the tool's name %q is not valid: %v (%s)", shown, err, nameRule)
	}
	return nil
}

// names records which source defines each tool of a build, so that a
// name that cannot name files, or that two tools share, is refused
// before anything is written. Names are compared as case-insensitive file
// systems compare file names (macOS's and Windows' by default: folded
// case, one Unicode normal form): "Read" and "read" are two capabilities,
// but their artifacts would overwrite each other in a directory there. It
// is safe for concurrent use.
type names struct {
	mu sync.Mutex
	by map[string]claimed // fileKey(name) → the tool that has it
}

// claimed is a name as a tool claimed it, and the tool's source.
type claimed struct{ name, source string }

// fileKey is name as a case-insensitive file system compares it.
func fileKey(name string) string {
	return norm.NFC.String(cases.Fold().String(name))
}

// claim records that source (a Go package or a script file) defines the
// tool named name. The error, which the caller prefixes with the source,
// says what is wrong with the name.
func (n *names) claim(name, source string) error {
	if err := nameError(name); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	key := fileKey(name)
	if other, ok := n.by[key]; ok {
		if other.name == name {
			return fmt.Errorf("the tool %q is also defined by %s: tool names must be unique, as each names its artifact's files", name, other.source)
		}
		return fmt.Errorf("the tool %q and the tool %q of %s differ only in case or Unicode form: their artifacts' files would overwrite each other on a case-insensitive file system (macOS, Windows); rename one", name, other.name, other.source)
	}
	if n.by == nil {
		n.by = map[string]claimed{}
	}
	n.by[key] = claimed{name, source}
	return nil
}
