package main

import (
	"testing"
	"unicode/utf8"
)

// TestClipKeepsCharacters: brain chat's one-line summaries of inputs and
// outcomes are cut between characters, never inside one (a model's
// non-ASCII text printed a broken character at the cut).
func TestClipKeepsCharacters(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 200, "short"},
		{"two\nlines", 200, "two lines"},
		{"abcdef", 3, "abc…"},
		{"aé", 2, "a…"}, // é is two bytes: cutting at 2 would split it
	} {
		got := clip(c.s, c.n)
		if got != c.want || !utf8.ValidString(got) {
			t.Errorf("clip(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}
