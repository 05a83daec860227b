// Package yamlcheck refuses the YAML features brain's configuration files
// never need, before goccy/go-yaml decodes them, and turns a panic inside
// the decoder into an error.
//
// Why: fuzzing found that goccy/go-yaml v1.19.2 dereferences nil on a
// tagged empty value decoded into a slice (`tools: !x`), which took the
// whole process down on a hostile grants file or serve config; and aliases
// let a small file expand into billions of values.
package yamlcheck

import (
	"fmt"

	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/token"
)

// Options say which features a file may use; the zero value allows none.
type Options struct {
	// Anchors allows anchors and aliases (the grants loader bounds their
	// expansion itself).
	Anchors bool
}

// Error is a refused feature, with its place in the file.
type Error struct {
	Line, Column int
	Msg          string
}

func (e *Error) Error() string { return fmt.Sprintf("%d:%d: %s", e.Line, e.Column, e.Msg) }

// Check returns the first refused feature in data: tags always, anchors and
// aliases unless opts allows them.
func Check(data []byte, opts Options) *Error {
	for _, tk := range lexer.Tokenize(string(data)) {
		switch {
		case tk.Type == token.TagType:
			return at(tk, fmt.Sprintf("YAML tags (%s) are not allowed here", tk.Value))
		case !opts.Anchors && tk.Type == token.AliasType:
			// A value people write beginning with * (a wildcard origin,
			// a glob) is an alias to YAML unless quoted.
			return at(tk, `YAML anchors and aliases are not allowed here (a value beginning with * is an alias to YAML: quote it, "*…")`)
		case !opts.Anchors && tk.Type == token.AnchorType:
			return at(tk, `YAML anchors and aliases are not allowed here (a value beginning with & is an anchor to YAML: quote it, "&…")`)
		}
	}
	return nil
}

// Documents returns an error at a second document in data (after
// "---"), which goccy/go-yaml's decoder does not read at all: a file of
// brain's holds one. A leading "---" is no second document.
func Documents(data []byte) *Error {
	content := false
	for _, tk := range lexer.Tokenize(string(data)) {
		switch tk.Type {
		case token.CommentType:
			continue
		case token.DocumentHeaderType:
			if content {
				return at(tk, "a second YAML document (after ---): the file holds one, and the decoder reads only the first")
			}
			continue
		}
		content = true
	}
	return nil
}

func at(tk *token.Token, msg string) *Error {
	e := &Error{Msg: msg, Line: 1, Column: 1}
	if tk.Position != nil {
		e.Line, e.Column = tk.Position.Line, tk.Position.Column
	}
	return e
}

// Decode runs decode and turns a panic inside it into an error: the
// decoder is a backstop, and a hostile file must not take the process down.
func Decode(decode func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the YAML decoder failed on this input: %v", r)
		}
	}()
	return decode()
}
