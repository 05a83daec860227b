package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// fieldSet builds the set of JSON names a type accepts.
func fieldSet(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// checkFields rejects what encoding/json would silently accept: a value that
// is not an object, an unknown field, a field in the wrong case (encoding/json
// matches names case-insensitively), a duplicated field (it keeps the last),
// and a missing required field. Errors name the field.
func checkFields(data []byte, allowed map[string]bool, required ...string) error {
	seen, err := objectKeys(data)
	if err != nil {
		return err
	}
	return checkKeys(seen, allowed, required...)
}

// checkKeys is checkFields on the keys objectKeys returned.
func checkKeys(seen, allowed map[string]bool, required ...string) error {
	// The first unknown field in sorted order, so that a frame with
	// several gets the same error every time (map order is random).
	bad, found := "", false
	for k := range seen {
		if !allowed[k] && (!found || k < bad) {
			bad, found = k, true
		}
	}
	if found {
		return fmt.Errorf("unknown field %q (allowed: %s)", bad, strings.Join(sortedKeys(allowed), ", "))
	}
	for _, r := range required {
		if !seen[r] {
			return fmt.Errorf("missing required field %q", r)
		}
	}
	return nil
}

// objectKeys returns the keys of the JSON object in data, failing on a value
// that is not an object and on duplicated keys.
//
// Valid JSON whose keys are plain (printable ASCII without escapes) — every
// frame a well-behaved peer sends — is scanned in place, without a
// tokenizer; anything else takes objectKeysTokens, whose errors name what
// is wrong. Both give the same keys for the same document.
func objectKeys(data []byte) (map[string]bool, error) {
	if json.Valid(data) {
		if seen, dup, ok := scanKeys(data); ok {
			if dup != nil {
				return nil, fmt.Errorf("duplicate field %q", *dup)
			}
			return seen, nil
		}
	}
	return objectKeysTokens(data)
}

// scanKeys reads the top-level keys of data, which must be valid JSON. It
// reports ok false (the caller falls back to the tokenizer) for anything
// but an object whose keys are printable ASCII without escapes; dup is the
// first key seen twice, if any.
func scanKeys(data []byte) (seen map[string]bool, dup *string, ok bool) {
	seen, dup, _, ok = scanKeysCapture(data, "")
	return seen, dup, ok
}

// scanKeysCapture is scanKeys that also returns the raw value of the last
// top-level key equal to capture (nil if none; "" captures nothing).
func scanKeysCapture(data []byte, capture string) (seen map[string]bool, dup *string, val []byte, ok bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, nil, nil, false
	}
	seen = make(map[string]bool, 8)
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return seen, nil, nil, true
	}
	for i < len(data) {
		if data[i] != '"' {
			return nil, nil, nil, false
		}
		j := i + 1
		for j < len(data) && data[j] != '"' {
			if c := data[j]; c == '\\' || c < 0x20 || c >= 0x7f {
				return nil, nil, nil, false
			}
			j++
		}
		if j >= len(data) {
			return nil, nil, nil, false
		}
		k, ok := keyNames()[string(data[i+1:j])] // a lookup that allocates nothing
		if !ok {
			k = string(data[i+1 : j])
		}
		if seen[k] && dup == nil {
			d := k // its own variable: &k would move every key to the heap
			dup = &d
		}
		seen[k] = true
		i = skipSpace(data, j+1)
		if i >= len(data) || data[i] != ':' {
			return nil, nil, nil, false
		}
		start := skipSpace(data, i+1)
		if i = skipValue(data, start); i < 0 {
			return nil, nil, nil, false
		}
		if capture != "" && k == capture {
			val = data[start:i]
		}
		i = skipSpace(data, i)
		if i >= len(data) {
			return nil, nil, nil, false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return seen, dup, val, true
		default:
			return nil, nil, nil, false
		}
	}
	return nil, nil, nil, false
}

var (
	keyNamesOnce sync.Once
	keyNamesMap  map[string]string
)

// keyNames returns the field names of every message and envelope, each
// mapped to itself: a key found here is stored without a new string.
func keyNames() map[string]string {
	keyNamesOnce.Do(func() {
		keyNamesMap = map[string]string{}
		add := func(m map[string]bool) {
			for k := range m {
				keyNamesMap[k] = k
			}
		}
		add(frameFields)
		add(capabilityFields)
		add(renderSpecFields)
		for _, spec := range messageSpecs {
			add(spec.allowed)
		}
		add(fieldSet("kind", "url", "tagName", "value", "error", "code", "message"))
	})
	return keyNamesMap
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just past the valid JSON value at data[i:],
// or -1.
func skipValue(data []byte, i int) int {
	depth := 0
	for i < len(data) {
		switch c := data[i]; c {
		case '"':
			i++
			for i < len(data) && data[i] != '"' {
				if data[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(data) {
				return -1
			}
			i++
		case '{', '[':
			depth++
			i++
		case '}', ']':
			if depth == 0 {
				return i // the enclosing object's end: a scalar ended here
			}
			depth--
			i++
		case ',':
			if depth == 0 {
				return i
			}
			i++
		default:
			i++
		}
		if depth == 0 && i < len(data) {
			// A string or a container just closed, or a scalar goes on.
			switch data[i-1] {
			case '"', '}', ']':
				return i
			}
		}
	}
	if depth == 0 {
		return i
	}
	return -1
}

// objectKeysTokens is objectKeys through encoding/json's tokenizer.
func objectKeysTokens(data []byte) (map[string]bool, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("want a JSON object, got %s", describeToken(tok))
	}
	seen := make(map[string]bool, 8)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := tok.(string)
		if seen[k] {
			return nil, fmt.Errorf("duplicate field %q", k)
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, fmt.Errorf("field %q: %w", k, err)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	return seen, nil
}

func describeToken(tok any) string {
	switch t := tok.(type) {
	case nil:
		return "null"
	case json.Delim:
		if t == '[' {
			return "an array"
		}
		return string(t)
	case string:
		return "a string"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}

func sortedKeys(m map[string]bool) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
