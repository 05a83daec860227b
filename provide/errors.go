package provide

import (
	"fmt"
	"strings"
)

// Error is a problem in a grants file, at a place in it:
//
//	grants.yaml:12:5: net.allow_hosts[1]: "*": "*" would allow every host; list the hosts
//
// Line and Column (both from 1) point at the key of the offending field,
// or at the offending item of a list; at the section's key when the field
// is missing; at the token the YAML parser stopped at for a syntax error.
type Error struct {
	// File is the file's name as given to [Load] or [Parse].
	File   string
	Line   int
	Column int
	// Field is the path of the offending field from the top of the file,
	// in the syntax of [grant.FieldError] ("exec.env.LD_PRELOAD",
	// "net.allow_hosts[1]"); "" for a syntax error.
	Field string
	// Msg says what is wrong.
	Msg string
	// Err is the cause, when there is one: a *grant.FieldError from a
	// section's Validate, or an error of the YAML parser.
	Err error
}

// Error returns "file:line:col: field: msg", without the field when there
// is none.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%d:%d: ", e.File, e.Line, e.Column)
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }
