package textcut_test

import (
	"fmt"
	"testing"
	"unicode/utf8"

	"github.com/brainrt/brain/internal/textcut"
)

func ExampleCut() {
	fmt.Println(textcut.Cut("short", 10))
	fmt.Println(textcut.Cut("naïve café", 3)) // "ï" is two bytes: it is not split
	// Output:
	// short
	// na…
}

func TestCut(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"", 0, ""},
		{"abc", 3, "abc"},
		{"abcd", 3, "abc…"},
		{"abc", 0, "…"},
		{"abc", -1, "…"},
		{"€uro", 2, "…"}, // the euro sign is three bytes
		{"€uro", 3, "€…"},
		{"a€", 3, "a…"},
	} {
		if got := textcut.Cut(c.s, c.n); got != c.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

func FuzzCut(f *testing.F) {
	f.Add("naïve café", 3)
	f.Add("€€€", 4)
	f.Fuzz(func(t *testing.T, s string, n int) {
		got := textcut.Cut(s, n)
		if len(s) <= n {
			if got != s {
				t.Fatalf("Cut(%q, %d) = %q: a text within the bound changed", s, n, got)
			}
			return
		}
		prefix := got[:len(got)-len(textcut.Ellipsis)]
		if len(prefix) > max(n, 0) || s[:len(prefix)] != prefix {
			t.Fatalf("Cut(%q, %d) = %q: not a prefix within the bound", s, n, got)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Cut(%q, %d) = %q: split a UTF-8 sequence", s, n, got)
		}
	})
}
