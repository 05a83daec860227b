package driver

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
)

// maxToolName is the longest tool name the providers accept.
const maxToolName = 64

// validToolName reports whether n fits the providers' pattern
// ^[a-zA-Z0-9_-]{1,64}$.
func validToolName(n string) bool {
	if len(n) == 0 || len(n) > maxToolName {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// nameMap maps capability names to the names a provider accepts and back.
// It is built from every name one request mentions (its tools and the
// conversation's tool calls), so that within a request the mapping is a
// bijection:
//
//   - a name that is valid already is kept (fs_read stays fs_read);
//   - any other name has each invalid byte replaced by '_' (fs.read →
//     fs_read), unless that is taken by another name or the name is longer
//     than 64 bytes: then it is its first 55 sanitised bytes, '_', and 8 hex
//     digits of its SHA-256 (fs.read → fs_read_1c0ab3f2 when fs_read exists);
//   - names are assigned in sorted order, valid names first, so the result
//     depends only on the set of names.
type nameMap struct {
	toWire   map[string]string
	fromWire map[string]string
}

func newNameMap(names []string) *nameMap {
	m := &nameMap{toWire: make(map[string]string, len(names)), fromWire: make(map[string]string, len(names))}
	names = slices.Clone(names)
	slices.Sort(names)
	names = slices.Compact(names)
	for _, n := range names {
		if validToolName(n) {
			m.toWire[n], m.fromWire[n] = n, n
		}
	}
	for _, n := range names {
		if _, ok := m.toWire[n]; ok {
			continue
		}
		w := sanitize(n)
		if len(n) > maxToolName || m.fromWire[w] != "" {
			sum := sha256.Sum256([]byte(n))
			w = w[:min(len(w), maxToolName-9)] + "_" + hex.EncodeToString(sum[:4])
		}
		for i := 2; m.fromWire[w] != ""; i++ { // a hash collision: practically never
			sfx := "_" + strconv.Itoa(i)
			w = w[:min(len(w), maxToolName-len(sfx))] + sfx
		}
		m.toWire[n], m.fromWire[w] = w, n
	}
	return m
}

func sanitize(n string) string {
	b := []byte(n)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "_"
	}
	if len(b) > maxToolName {
		b = b[:maxToolName]
	}
	return string(b)
}

// wire returns the provider name of capability n (n itself if unknown).
func (m *nameMap) wire(n string) string {
	if w, ok := m.toWire[n]; ok {
		return w
	}
	return n
}

// capability returns the capability a provider name stands for.
func (m *nameMap) capability(w string) (string, bool) {
	n, ok := m.fromWire[w]
	return n, ok
}
