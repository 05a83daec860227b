// Package jsonbody holds what the example tools that read JSON over the net
// handle share: header lookup, media types and a body preview for error
// messages. It avoids net/http on purpose: importing it makes a tool's
// WebAssembly payload a third larger, for one header lookup.
package jsonbody

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Header returns the first value of the header name, whatever its case.
func Header(h map[string][]string, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) && len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// MediaType returns the media type of a Content-Type value, in lower case
// and without parameters: "application/json" for
// "Application/JSON; charset=utf-8".
func MediaType(contentType string) string {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// previewBytes is how much of a body Preview quotes.
const previewBytes = 120

// Preview quotes the start of a body for an error message.
func Preview(b []byte) string {
	if len(b) == 0 {
		return "(empty)"
	}
	n := min(len(b), previewBytes)
	for n < len(b) && n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	s := strings.ToValidUTF8(string(b[:n]), "\uFFFD")
	if n < len(b) {
		return fmt.Sprintf("%q…", s)
	}
	return fmt.Sprintf("%q", s)
}
