// Package grant holds what every provider's grants share: the error that
// names the offending field, so that the YAML loader in package provide can
// point at the line.
package grant

import "fmt"

// FieldError says which grant field is wrong and why. Field is the YAML path
// below the handle's own section, in the loader's path syntax: "allow_hosts[2]",
// "timeout", "env.PATH".
type FieldError struct {
	Field string
	Msg   string
}

// Error returns "<field>: <msg>".
func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Errorf returns a *FieldError for field.
func Errorf(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}
