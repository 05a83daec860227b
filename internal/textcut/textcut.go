// Package textcut shortens text to a bound in bytes without splitting a
// UTF-8 sequence, and says that it did with a trailing ellipsis.
package textcut

// Ellipsis ends a shortened text.
const Ellipsis = "…"

// Cut returns s when it is at most n bytes long; otherwise its longest
// prefix of at most n bytes that does not end inside a UTF-8 sequence,
// followed by Ellipsis (so the result may be up to len(Ellipsis) bytes
// longer than n).
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n, 0)
	for cut > 0 && s[cut]&0xC0 == 0x80 { // s[cut] continues a sequence: cut before it begins
		cut--
	}
	return s[:cut] + Ellipsis
}
