package script

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/dop251/goja"
)

// parseArgs builds the value of the JSON text s in vm, as goja's JSON.parse
// would, in one pass and without running script code. goja's JSON.parse
// reads its text with encoding/json's Decoder.Token, which formats an error
// (and quotes a character) for every string and number it reads, the most
// expensive step of a small call; this reader keeps its results exactly
// (FuzzParseArgs compares the two):
//
//   - the grammar is JSON's (RFC 8259): no comments, no trailing commas,
//     no leading zeros, whitespace only of space, tab, CR and LF;
//   - a number becomes the float64 nearest to it, as strconv.ParseFloat
//     reads it, an integral one an integer value (-0 stays -0); one beyond
//     the float64 range is refused, as encoding/json refuses it;
//   - a string's escapes are JSON's; a \u escape of a lone surrogate, and
//     each byte of invalid UTF-8 inside a string, become U+FFFD, as
//     encoding/json decodes them (an engine would keep a lone surrogate);
//   - objects are ordinary objects and arrays ordinary arrays; a key that
//     repeats keeps its first place and its last value; __proto__ is an
//     own property like any other key.
//
// The reader recurses in Go, so it refuses text nested deeper than
// maxNesting (an *argsError whose deep is set); it checks whether the call
// was stopped every stopEvery values, so that a stop during a long text is
// seen at once.
func (c *call) parseArgs(vm *goja.Runtime, s string) (v goja.Value, err error) {
	p := &argParser{c: c, vm: vm, s: s}
	defer func() {
		if x := recover(); x != nil {
			pe, ok := x.(*argsError)
			if !ok {
				panic(x)
			}
			v, err = nil, pe
		}
	}()
	p.space()
	v = p.value(0)
	p.space()
	if p.i < len(p.s) {
		p.fail("unexpected %s after the value", p.describe())
	}
	return v, nil
}

// argsError is a syntax error in the arguments, at a byte offset, or
// (deep) arguments nested deeper than maxNesting.
type argsError struct {
	offset int
	msg    string
	deep   bool
}

func (e *argsError) Error() string {
	return fmt.Sprintf("%s (at byte %d)", e.msg, e.offset)
}

// stopEvery is how many values parseArgs builds between checks of a stop.
const stopEvery = 1 << 12

type argParser struct {
	c     *call
	vm    *goja.Runtime
	s     string
	i     int
	count int
	items []any // the items of the arrays being read, innermost last
	buf   []byte
}

func (p *argParser) fail(format string, args ...any) {
	panic(&argsError{offset: p.i, msg: fmt.Sprintf(format, args...)})
}

// describe names what is at p.i, for an error.
func (p *argParser) describe() string {
	if p.i >= len(p.s) {
		return "end of the text"
	}
	r, _ := utf8.DecodeRuneInString(p.s[p.i:])
	return "character " + strconv.QuoteRune(r)
}

func (p *argParser) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *argParser) value(depth int) goja.Value {
	if p.count++; p.count%stopEvery == 0 && p.c.stopped.Load() {
		// The caller reports the stop's cause; this only unwinds.
		p.fail("the call was stopped")
	}
	if p.i >= len(p.s) {
		p.fail("unexpected end of the text, where a value should be")
	}
	switch b := p.s[p.i]; {
	case (b == '{' || b == '[') && depth >= maxNesting:
		// A container at depth d is the (d+1)th level, as deeperThan counts.
		panic(&argsError{offset: p.i, msg: fmt.Sprintf("the arguments nest deeper than %d levels", maxNesting), deep: true})
	case b == '{':
		return p.object(depth)
	case b == '[':
		return p.array(depth)
	case b == '"':
		return p.vm.ToValue(p.str())
	case b == '-' || b >= '0' && b <= '9':
		return p.number()
	case b == 't':
		p.literal("true")
		return p.vm.ToValue(true)
	case b == 'f':
		p.literal("false")
		return p.vm.ToValue(false)
	case b == 'n':
		p.literal("null")
		return goja.Null()
	}
	p.fail("unexpected %s, where a value should be", p.describe())
	return nil
}

func (p *argParser) literal(word string) {
	if len(p.s)-p.i < len(word) || p.s[p.i:p.i+len(word)] != word {
		p.fail("unexpected %s, where a value should be", p.describe())
	}
	p.i += len(word)
}

func (p *argParser) object(depth int) goja.Value {
	o := p.vm.NewObject()
	p.i++ // {
	p.space()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return o
	}
	for {
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			p.fail("unexpected %s, where a key (a string) should be", p.describe())
		}
		key := p.str()
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			p.fail("unexpected %s, where a colon should follow a key", p.describe())
		}
		p.i++
		p.space()
		v := p.value(depth + 1)
		if err := o.DefineDataProperty(key, v, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE); err != nil {
			p.fail("cannot set the key %q: %v", key, err)
		}
		p.space()
		if p.i < len(p.s) {
			switch p.s[p.i] {
			case ',':
				p.i++
				p.space()
				continue
			case '}':
				p.i++
				return o
			}
		}
		p.fail("unexpected %s, where a comma or a closing brace should be", p.describe())
	}
}

func (p *argParser) array(depth int) goja.Value {
	p.i++ // [
	p.space()
	start := len(p.items)
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return p.vm.NewArray()
	}
	for {
		v := p.value(depth + 1)
		p.items = append(p.items, v)
		p.space()
		if p.i < len(p.s) {
			switch p.s[p.i] {
			case ',':
				p.i++
				p.space()
				continue
			case ']':
				p.i++
				a := p.vm.NewArray(p.items[start:]...)
				clear(p.items[start:])
				p.items = p.items[:start]
				return a
			}
		}
		p.fail("unexpected %s, where a comma or a closing bracket should be", p.describe())
	}
}

// number reads a number by JSON's grammar and converts it as
// encoding/json does, with strconv.ParseFloat.
func (p *argParser) number() goja.Value {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.s) && p.s[p.i] == '0':
		p.i++
	case p.i < len(p.s) && p.s[p.i] >= '1' && p.s[p.i] <= '9':
		p.digits()
	default:
		p.fail("unexpected %s in a number, where a digit should be", p.describe())
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		if p.i >= len(p.s) || p.s[p.i] < '0' || p.s[p.i] > '9' {
			p.fail("unexpected %s after a decimal point, where a digit should be", p.describe())
		}
		p.digits()
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if p.i >= len(p.s) || p.s[p.i] < '0' || p.s[p.i] > '9' {
			p.fail("unexpected %s in an exponent, where a digit should be", p.describe())
		}
		p.digits()
	}
	f, err := strconv.ParseFloat(p.s[start:p.i], 64)
	if err != nil {
		p.i = start
		p.fail("the number %s is beyond the range of a float64", p.s[start:min(len(p.s), start+40)])
	}
	return p.vm.ToValue(f)
}

func (p *argParser) digits() {
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
}

// str reads a string at p.i (its opening quote) and returns its value,
// decoded as encoding/json's unquote does.
func (p *argParser) str() string {
	p.i++ // "
	start := p.i
	// The common case: no escape, ASCII or valid UTF-8, returned as a
	// substring of the text.
	for p.i < len(p.s) {
		b := p.s[p.i]
		switch {
		case b == '"':
			p.i++
			return p.s[start : p.i-1]
		case b == '\\':
			return p.slowStr(start)
		case b < 0x20:
			p.fail("unexpected control character %q in a string", b)
		case b < utf8.RuneSelf:
			p.i++
		default:
			r, size := utf8.DecodeRuneInString(p.s[p.i:])
			if r == utf8.RuneError && size == 1 {
				return p.slowStr(start)
			}
			p.i += size
		}
	}
	p.fail("unexpected end of the text in a string")
	return ""
}

// slowStr decodes a string with escapes or invalid UTF-8 from start, its
// first byte after the opening quote.
func (p *argParser) slowStr(start int) string {
	b := append(p.buf[:0], p.s[start:p.i]...)
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			p.buf = b
			return string(b)
		case c == '\\':
			p.i++
			if p.i >= len(p.s) {
				p.fail("unexpected end of the text in a string escape")
			}
			e := p.s[p.i]
			switch k := strings.IndexByte(escaped, e); {
			case k >= 0:
				b = append(b, unescaped[k])
				p.i++
			case e == 'u':
				p.i--
				r := p.hex4()
				if utf16.IsSurrogate(r) {
					// A pair is two \u escapes; anything else leaves the
					// first a lone surrogate, which becomes U+FFFD, and
					// the next escape is read on its own.
					if r2, ok := p.peekHex4(); ok {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							p.i += 6
							b = utf8.AppendRune(b, dec)
							break
						}
					}
					r = utf8.RuneError
				}
				b = utf8.AppendRune(b, r)
			default:
				p.fail("invalid escape %q in a string", "\\"+string(rune(e)))
			}
		case c < 0x20:
			p.fail("unexpected control character %q in a string", c)
		case c < utf8.RuneSelf:
			b = append(b, c)
			p.i++
		default:
			r, size := utf8.DecodeRuneInString(p.s[p.i:])
			p.i += size
			b = utf8.AppendRune(b, r) // U+FFFD for each invalid byte
		}
	}
	p.fail("unexpected end of the text in a string")
	return ""
}

// escaped are the characters that follow a backslash in a one-character
// escape, and unescaped what each stands for.
const escaped, unescaped = "\"\\/bfnrt", "\"\\/\b\f\n\r\t"

// hex4 reads a \uXXXX escape at p.i (its backslash) and moves past it.
func (p *argParser) hex4() rune {
	r, ok := p.peekHex4()
	if !ok {
		p.i++ // at the u, for the message
		p.fail("invalid \\u escape in a string: it needs four hexadecimal digits")
	}
	p.i += 6
	return r
}

// peekHex4 reads a \uXXXX escape at p.i without moving.
func (p *argParser) peekHex4() (rune, bool) {
	if len(p.s)-p.i < 6 || p.s[p.i] != '\\' || p.s[p.i+1] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range []byte(p.s[p.i+2 : p.i+6]) {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r*16 + rune(c)
	}
	return r, true
}
