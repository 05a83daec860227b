package build

import (
	"strings"
	"testing"
)

// TestCheckName: a tool's name must be a capability name that can also
// be the base of file names in the output directory.
func TestCheckName(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // "" means valid
	}{
		{"dotted", "fs.read", ""},
		{"colon", "github:search", ""},
		{"unicode", "héllo", ""},
		{"inner dots", "a..b", ""},
		{"longest", strings.Repeat("x", 245), ""},
		{"empty", "", "must not be empty"},
		{"space", "x y", "must not contain spaces or control characters"},
		{"newline", "fs.read\n", "must not contain spaces or control characters"},
		{"NUL", "nul\x00x", "must not contain spaces or control characters"},
		{"DEL", "a\x7f", "must not contain spaces or control characters"},
		{"over the protocol's 256", strings.Repeat("x", 300), "more than 256"},
		{"over a file name's 245", strings.Repeat("x", 246), "more than the 245"},
		{"parent", "../../escaped", "must not contain '/'"},
		{"slash", "a/b", "must not contain '/'"},
		{"absolute", "/tmp/x", "must not contain '/'"},
		{"backslash", `a\b`, `must not contain '/' or '\'`},
		{"dot", ".", "must not start with '.'"},
		{"dot dot", "..", "must not start with '.'"},
		{"hidden", ".hidden", "must not start with '.'"},
		{"flag", "-rf", "must not start with '-'"},
		{"not UTF-8", "a\xffb", "must be UTF-8"},
		{"CJK", "読む", ""},
		{"no-break space", "a\u00a0b", "U+00A0"},
		{"next line (C1)", "a\u0085b", "U+0085"},
		{"CSI (C1)", "a\u009bb", "U+009B"},
		{"right-to-left override", "evil\u202etxt.exe", "U+202E"},
		{"zero-width space", "fs\u200b.read", "U+200B"},
		{"line separator", "a\u2028b", "U+2028"},
		{"ideographic space", "a\u3000b", "U+3000"},
		{"byte order mark", "\ufeffread", "U+FEFF"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkName(tc.in)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("checkName(%q) = %v, want nil", tc.in, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("checkName(%q) = %v, want an error containing %q", tc.in, err, tc.want)
			}
		})
	}
}

// TestClaimFoldsCase: names that a case-insensitive file system takes for
// one file name ("Read" and "read"; "é" composed and decomposed) are
// refused as clashing, saying why; distinct names are not.
func TestClaimFoldsCase(t *testing.T) {
	var n names
	for _, c := range []struct{ name, want string }{
		{"read", ""},
		{"write", ""},
		{"read", `also defined by a.go`},
		{"Read", `"Read" and the tool "read" of a.go differ only in case`},
		{"WRITE", `"WRITE" and the tool "write" of a.go differ only in case`},
		{"caf\u00e9", ""},
		{"cafe\u0301", "differ only in case or Unicode form"},
		{"Straße", ""},
		{"STRASSE", "differ only in case"},
	} {
		err := n.claim(c.name, "a.go")
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("claim(%q): %v, want %q", c.name, err, c.want)
		}
	}
}
