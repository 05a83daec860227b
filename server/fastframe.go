package server

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/brainrt/brain/internal/jsonvalid"
	"github.com/brainrt/brain/protocol"
)

// decodePeerFrame is protocol.DecodePeerFrame with a fast path for the
// frame a peer sends most, a capability_result:
//
//	{"v":2,"id":"r1","msg":{"type":"capability_result","callId":"c-1","result":…}}
//
// read in one pass over the bytes instead of the strict decoder's several
// (key scan, envelope, message head, message). The fast path takes only
// frames it can read exactly as the strict decoder would — known keys
// once each, printable-ASCII strings without escapes, "v" written as 2 —
// and gives anything else, valid or not, to protocol.DecodePeerFrame,
// whose errors are the only ones a peer sees. FuzzDecodeResultFrame holds
// the two to the same frame.
func decodePeerFrame(data []byte) (*protocol.Frame, error) {
	if f, ok := decodeResultFrame(data); ok {
		return f, nil
	}
	return protocol.DecodePeerFrame(data)
}

var resultType = []byte(`"` + protocol.TypeCapabilityResult + `"`)

// decodeResultFrame is the fast path of decodePeerFrame; ok is false when
// it does not take the frame.
func decodeResultFrame(data []byte) (f *protocol.Frame, ok bool) {
	// The type's bytes first: any other frame (a registration can be a
	// megabyte) costs the fast path a substring search, not a second
	// validation beside the strict decoder's.
	if len(data) > protocol.MaxFrameBytes || !bytes.Contains(data, resultType) || !jsonvalid.Valid(data) || !utf8.Valid(data) {
		return nil, false
	}
	// From here the document is valid JSON: every scan below can rely on
	// balanced brackets and terminated strings.
	sc := scanner{b: data}
	if !sc.open() {
		return nil, false
	}
	var id, callID []byte
	var result []byte
	var seen, seenMsg uint8
	const (
		keyV = 1 << iota
		keyID
		keyMsg
		keyType
		keyCallID
		keyResult
	)
	for first := true; ; first = false {
		key, more := sc.key(first)
		if !more {
			break
		}
		switch string(key) {
		case "v":
			if seen&keyV != 0 || string(sc.number()) != "2" {
				return nil, false
			}
			seen |= keyV
		case "id":
			s, ok := sc.plainString()
			if seen&keyID != 0 || !ok {
				return nil, false
			}
			id, seen = s, seen|keyID
		case "msg":
			if seen&keyMsg != 0 || !sc.open() {
				return nil, false
			}
			seen |= keyMsg
			for mfirst := true; ; mfirst = false {
				mkey, more := sc.key(mfirst)
				if !more {
					break
				}
				switch string(mkey) {
				case "type":
					s, ok := sc.plainString()
					if seenMsg&keyType != 0 || !ok || string(s) != string(protocol.TypeCapabilityResult) {
						return nil, false
					}
					seenMsg |= keyType
				case "callId":
					s, ok := sc.plainString()
					if seenMsg&keyCallID != 0 || !ok {
						return nil, false
					}
					callID, seenMsg = s, seenMsg|keyCallID
				case "result":
					if seenMsg&keyResult != 0 {
						return nil, false
					}
					result, seenMsg = sc.value(), seenMsg|keyResult
				default:
					return nil, false
				}
			}
		default:
			return nil, false // seq, ref, unknown or wrongly cased keys: the strict decoder's error
		}
		if sc.bad {
			return nil, false
		}
	}
	if sc.bad || seen&(keyV|keyMsg) != keyV|keyMsg || seenMsg != keyType|keyCallID|keyResult {
		return nil, false
	}
	return &protocol.Frame{V: protocol.Version, ID: string(id), Msg: &protocol.CapabilityResult{
		CallID: string(callID),
		Result: append(json.RawMessage(nil), result...), // the frame's buffer is reused for the next one
	}}, true
}

// scanner reads a valid JSON document; bad is set when it meets anything
// the fast path does not take.
type scanner struct {
	b   []byte
	i   int
	bad bool
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// open consumes a '{'.
func (s *scanner) open() bool {
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		s.bad = true
		return false
	}
	s.i++
	return true
}

// key reads the next key of an object and the ':' after it; more is false
// at the object's '}' (consumed). first says whether it is the object's
// first key (no ',' before it).
func (s *scanner) key(first bool) (key []byte, more bool) {
	if s.bad {
		return nil, false
	}
	s.space()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return nil, false
	}
	if !first {
		if s.i >= len(s.b) || s.b[s.i] != ',' {
			s.bad = true
			return nil, false
		}
		s.i++
		s.space()
	}
	k, ok := s.plainString()
	if !ok {
		s.bad = true
		return nil, false
	}
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != ':' {
		s.bad = true
		return nil, false
	}
	s.i++
	return k, true
}

// plainString reads a string of printable ASCII without escapes and
// returns its contents; anything else is not taken (ok false, bad set).
func (s *scanner) plainString() ([]byte, bool) {
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		s.bad = true
		return nil, false
	}
	start := s.i + 1
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			s.i = j + 1
			return s.b[start:j], true
		case c == '\\' || c < 0x20 || c >= 0x7f:
			s.bad = true
			return nil, false
		}
	}
	s.bad = true
	return nil, false
}

// number reads a number's bytes as written.
func (s *scanner) number() []byte {
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

// value skips one value of a valid document and returns its bytes.
func (s *scanner) value() []byte {
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
