// Package jsonscan reads valid JSON in place, a token at a time, for the
// one-pass fast paths of frame decoders (server's capability_result,
// protocol's journaled calls): each takes only what it can read exactly
// as its strict decoder would, and gives the rest to it.
package jsonscan

// Scanner reads a document that is valid JSON (the caller has checked,
// e.g. with jsonvalid.Valid) one token at a time, in place. Bad is set
// when it meets anything its caller's fast path does not take: a string
// with escapes or outside printable ASCII where a plain one is wanted, a
// missing ':' or ','. A fast path that sees Bad gives the input to its
// strict decoder.
type Scanner struct {
	b   []byte
	i   int
	Bad bool
}

// New returns a Scanner at the start of b.
func New(b []byte) *Scanner { return &Scanner{b: b} }

func (s *Scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// Open consumes a '{'.
func (s *Scanner) Open() bool {
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		s.Bad = true
		return false
	}
	s.i++
	return true
}

// Key reads the next key of an object and the ':' after it; more is false
// at the object's '}' (consumed). first says whether it is the object's
// first key (no ',' before it).
func (s *Scanner) Key(first bool) (key []byte, more bool) {
	if s.Bad {
		return nil, false
	}
	s.space()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return nil, false
	}
	if !first {
		if s.i >= len(s.b) || s.b[s.i] != ',' {
			s.Bad = true
			return nil, false
		}
		s.i++
		s.space()
	}
	k, ok := s.PlainString()
	if !ok {
		s.Bad = true
		return nil, false
	}
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != ':' {
		s.Bad = true
		return nil, false
	}
	s.i++
	return k, true
}

// PlainString reads a string of printable ASCII without escapes and
// returns its contents; anything else is not taken (ok false, bad set).
func (s *Scanner) PlainString() ([]byte, bool) {
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		s.Bad = true
		return nil, false
	}
	start := s.i + 1
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			s.i = j + 1
			return s.b[start:j], true
		case c == '\\' || c < 0x20 || c >= 0x7f:
			s.Bad = true
			return nil, false
		}
	}
	s.Bad = true
	return nil, false
}

// Number reads a number's bytes as written.
func (s *Scanner) Number() []byte {
	s.space()
	start := s.i
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c >= '0' && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E':
			s.i++
			continue
		}
		break
	}
	return s.b[start:s.i]
}

// Value skips one value of a valid document and returns its bytes.
func (s *Scanner) Value() []byte {
	s.space()
	start, depth := s.i, 0
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch c {
		case '"':
			s.i++
			for s.i < len(s.b) && s.b[s.i] != '"' {
				if s.b[s.i] == '\\' {
					s.i++
				}
				s.i++
			}
			s.i++
		case '{', '[':
			depth++
			s.i++
		case '}', ']':
			if depth == 0 { // the end of the enclosing object
				return s.b[start:s.i]
			}
			depth--
			s.i++
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return s.b[start:s.i]
			}
			s.i++
		default:
			s.i++
		}
		if depth == 0 && (c == '"' || c == '}' || c == ']') {
			return s.b[start:s.i]
		}
	}
	return s.b[start:s.i]
}

// End reports whether only white space is left.
func (s *Scanner) End() bool {
	s.space()
	return !s.Bad && s.i == len(s.b)
}
