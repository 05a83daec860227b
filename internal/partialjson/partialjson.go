// Package partialjson turns a prefix of a JSON text — the arguments a model
// is still streaming — into the best-effort JSON value that prefix
// describes so far.
//
// [Complete] closes what is open (strings, arrays, objects) and drops what
// cannot be shown yet: a dangling key (with or without its colon), a
// trailing comma, a literal or a number cut short (a number keeps its
// longest valid prefix), an escape, a UTF-16 surrogate pair's escapes or
// a UTF-8 sequence cut in half. The result is always valid JSON, or nil
// when the prefix holds no value yet or is not the start of any JSON text.
//
//	partialjson.Complete([]byte(`{"title":"Q3 rev`))     // {"title":"Q3 rev"}
//	partialjson.Complete([]byte(`{"title":"Q3","pts":[1,`)) // {"title":"Q3","pts":[1]}
//	partialjson.Complete([]byte(`{"title":"Q3","po`))    // {"title":"Q3"}
package partialjson

import (
	"strings"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting Complete follows; a deeper prefix
// completes to nil.
const MaxDepth = 512

type state uint8

const (
	stValue      state = iota // a value (top level, after ':')
	stValueOrEnd              // after '[': a value or ']'
	stKeyOrEnd                // after '{': a key or '}'
	stKey                     // after ',' in an object: a key
	stColon                   // after a key
	stCommaOrEnd              // after a value inside a container
	stDone                    // after the top-level value
)

// Complete returns the best-effort JSON value of prefix (see the package
// documentation): a new slice, valid JSON, or nil. A prefix that is already
// a complete JSON text comes back as it is, without trailing whitespace.
// It runs in one pass, in time linear in len(prefix).
func Complete(prefix []byte) []byte {
	var stack []byte // '{' or '[' of each open container
	commit := -1     // bytes of prefix that end in a complete value or an open bracket
	st := stValue
	// rollback is the prefix up to the last commit, closed.
	rollback := func() []byte {
		if commit < 0 {
			return nil
		}
		return closeAll(prefix[:commit], "", stack)
	}
	// afterValue records a complete value ending at pos.
	afterValue := func(pos int) {
		commit = pos
		if len(stack) == 0 {
			st = stDone
		} else {
			st = stCommaOrEnd
		}
	}
	i, n := 0, len(prefix)
	for i < n {
		c := prefix[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			i++
			continue
		}
		switch st {
		case stValue, stValueOrEnd:
			switch {
			case c == '{' || c == '[':
				if len(stack) >= MaxDepth {
					return nil
				}
				stack = append(stack, c)
				i++
				commit = i
				if c == '{' {
					st = stKeyOrEnd
				} else {
					st = stValueOrEnd
				}
			case c == ']' && st == stValueOrEnd:
				stack = stack[:len(stack)-1]
				i++
				afterValue(i)
			case c == '"':
				end, safe, complete, ok := scanString(prefix, i)
				if !ok {
					return nil
				}
				if !complete { // a string value cut short: close it
					return closeAll(prefix[:safe], `"`, stack)
				}
				i = end
				afterValue(i)
			case c == '-' || (c >= '0' && c <= '9'):
				j := i
				for j < n && isNumberByte(prefix[j]) {
					j++
				}
				if j == n { // maybe cut short: keep its longest valid prefix
					if k := longestNumber(prefix[i:j]); k > 0 {
						commit = i + k
					}
					return rollback()
				}
				if !validNumber(prefix[i:j]) {
					return nil
				}
				i = j
				afterValue(i)
			case c == 't' || c == 'f' || c == 'n':
				lit := literal(c)
				j := i
				for j < n && j-i < len(lit) && prefix[j] == lit[j-i] {
					j++
				}
				switch {
				case j-i == len(lit):
					i = j
					afterValue(i)
				case j == n: // cut short: not shown yet
					return rollback()
				default:
					return nil
				}
			default:
				return nil
			}
		case stKeyOrEnd, stKey:
			switch {
			case c == '}' && st == stKeyOrEnd:
				stack = stack[:len(stack)-1]
				i++
				afterValue(i)
			case c == '"':
				end, _, complete, ok := scanString(prefix, i)
				if !ok {
					return nil
				}
				if !complete { // a dangling key: dropped
					return rollback()
				}
				i = end
				st = stColon
			default:
				return nil
			}
		case stColon:
			if c != ':' {
				return nil
			}
			i++
			st = stValue
		case stCommaOrEnd:
			top := stack[len(stack)-1]
			switch {
			case c == ',':
				i++
				if top == '{' {
					st = stKey
				} else {
					st = stValue
				}
			case (c == '}' && top == '{') || (c == ']' && top == '['):
				stack = stack[:len(stack)-1]
				i++
				afterValue(i)
			default:
				return nil
			}
		case stDone:
			return nil
		}
	}
	// The stack never changes between two commits (every push and pop is
	// one), so the current stack is the committed one.
	return rollback()
}

// closeAll returns head, then mid, then the closers of stack, innermost
// first, in a new slice; nil when head is empty.
func closeAll(head []byte, mid string, stack []byte) []byte {
	if len(head) == 0 {
		return nil
	}
	out := make([]byte, 0, len(head)+len(mid)+len(stack))
	out = append(out, head...)
	out = append(out, mid...)
	for k := len(stack) - 1; k >= 0; k-- {
		if stack[k] == '{' {
			out = append(out, '}')
		} else {
			out = append(out, ']')
		}
	}
	return out
}

func literal(c byte) string {
	switch c {
	case 't':
		return "true"
	case 'f':
		return "false"
	}
	return "null"
}

// scanString scans the string whose opening quote is at b[start]. It
// returns the index just past the closing quote when complete; when the
// input ends first, safe is the length of the prefix that holds only
// whole characters and escapes (the place to close it). ok is false when
// the text is not a JSON string (a control character, a bad escape).
func scanString(b []byte, start int) (end, safe int, complete, ok bool) {
	i := start + 1
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, i, true, true
		case c == '\\':
			if i+1 >= len(b) {
				return 0, i, false, true
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				for k := i + 2; k < i+6; k++ {
					if k >= len(b) {
						return 0, i, false, true
					}
					if !isHex(b[k]) {
						return 0, 0, false, false
					}
				}
				if highSurrogate(b[i+2:i+6]) && pairCut(b[i+6:]) {
					return 0, i, false, true // the first half of a pair: its character is not known yet
				}
				i += 6
			default:
				return 0, 0, false, false
			}
		case c < 0x20:
			return 0, 0, false, false
		case c < utf8.RuneSelf:
			i++
		default:
			if !utf8.FullRune(b[i:]) {
				return 0, i, false, true // a character cut in half
			}
			_, size := utf8.DecodeRune(b[i:])
			i += size
		}
	}
	return 0, i, false, true
}

// highSurrogate reports whether the four hex digits h are U+D800–U+DBFF,
// the first half of a UTF-16 surrogate pair.
func highSurrogate(h []byte) bool {
	return (h[0] == 'd' || h[0] == 'D') && strings.IndexByte("89abAB", h[1]) >= 0
}

// pairCut reports whether rest, the text after a high surrogate's escape,
// ends before the escape of its second half could be complete: it is a
// proper prefix of some \uXXXX.
func pairCut(rest []byte) bool {
	if len(rest) >= 6 {
		return false
	}
	for k, c := range rest {
		switch {
		case k == 0 && c != '\\', k == 1 && c != 'u', k > 1 && !isHex(c):
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func isNumberByte(c byte) bool {
	return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// longestNumber returns the length of the longest prefix of b that is a
// JSON number (0 if none), in one pass: searching for it by trying ever
// shorter prefixes would take time quadratic in len(b).
func longestNumber(b []byte) int {
	i, best := 0, 0
	digits := func() int {
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i - d
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		digits()
	default:
		return 0
	}
	best = i
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return best
		}
		best = i
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() > 0 {
			best = i
		}
	}
	return best
}

// validNumber reports whether b is exactly a JSON number:
// -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
func validNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	return i == len(b)
}
