package session

import (
	"encoding/json"
	"errors"
	"unicode/utf8"
	"unsafe"

	"github.com/brainrt/brain/internal/jsonvalid"
)

// maxDepth bounds the nesting of a decoded value.
const maxDepth = 512

// decodeJSON decodes one JSON value into the form the schema validator
// takes (map[string]any, []any, string, json.Number, bool, nil), with
// numbers kept exact.
//
// Why not encoding/json: it makes about three times the allocations on the
// hot path of every invocation. This decoder runs only on input that
// json.Valid accepted, so its parser need not report syntax errors; strings
// without escapes alias raw (no copy), which is safe because the decoded
// value lives only for the validation of raw, during which raw is not
// modified. A fuzz test holds it to encoding/json's results.
func decodeJSON(raw []byte) (any, error) {
	if !jsonvalid.Valid(raw) {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, err
		}
		return nil, errors.New("invalid JSON")
	}
	d := decoder{data: raw}
	d.skipSpace()
	return d.value(0)
}

type decoder struct {
	data []byte
	pos  int
}

var errTooDeep = errors.New("nested more than 512 levels deep")

func (d *decoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// value parses the value at pos; the input is known to be valid JSON.
func (d *decoder) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, errTooDeep
	}
	switch c := d.data[d.pos]; c {
	case '{':
		d.pos++
		m := make(map[string]any, 4)
		d.skipSpace()
		if d.data[d.pos] == '}' {
			d.pos++
			return m, nil
		}
		for {
			d.skipSpace()
			k, err := d.string()
			if err != nil {
				return nil, err
			}
			d.skipSpace()
			d.pos++ // ':'
			d.skipSpace()
			v, err := d.value(depth + 1)
			if err != nil {
				return nil, err
			}
			m[k] = v // a duplicated key keeps the last value, as encoding/json does
			d.skipSpace()
			c := d.data[d.pos]
			d.pos++
			if c == '}' {
				return m, nil
			}
		}
	case '[':
		d.pos++
		a := []any{}
		d.skipSpace()
		if d.data[d.pos] == ']' {
			d.pos++
			return a, nil
		}
		for {
			d.skipSpace()
			v, err := d.value(depth + 1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
			d.skipSpace()
			c := d.data[d.pos]
			d.pos++
			if c == ']' {
				return a, nil
			}
		}
	case '"':
		return d.string()
	case 't':
		d.pos += 4
		return true, nil
	case 'f':
		d.pos += 5
		return false, nil
	case 'n':
		d.pos += 4
		return nil, nil
	default:
		start := d.pos
		for d.pos < len(d.data) {
			switch d.data[d.pos] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return json.Number(alias(d.data[start:d.pos])), nil
			}
			d.pos++
		}
		return json.Number(alias(d.data[start:d.pos])), nil
	}
}

// string parses the string at pos. Strings with escapes or invalid UTF-8
// go through encoding/json, which knows every escape and surrogate rule and
// replaces invalid bytes with U+FFFD.
func (d *decoder) string() (string, error) {
	start := d.pos
	d.pos++
	escaped, nonASCII := false, false
	for {
		c := d.data[d.pos]
		if c == '\\' {
			escaped = true
			d.pos += 2
			continue
		}
		nonASCII = nonASCII || c >= utf8.RuneSelf
		d.pos++
		if c == '"' {
			break
		}
	}
	body := d.data[start+1 : d.pos-1]
	if !escaped && (!nonASCII || utf8.Valid(body)) {
		return alias(body), nil
	}
	var s string
	err := json.Unmarshal(d.data[start:d.pos], &s)
	return s, err
}

func alias(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
