package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
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
	for k := range seen {
		if !allowed[k] {
			return fmt.Errorf("unknown field %q (allowed: %s)", k, strings.Join(sortedKeys(allowed), ", "))
		}
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
func objectKeys(data []byte) (map[string]bool, error) {
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
