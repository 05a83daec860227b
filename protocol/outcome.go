package protocol

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Outcome is how every call ends: a value, or an error with a code. Its JSON
// is {"ok":true,"value":…} or {"ok":false,"error":{"code":…,"message":…}}.
type Outcome struct {
	// Value is the result when Err is nil; nil encodes as null.
	Value json.RawMessage
	// Err is set when the call failed.
	Err *Error
}

// Error is an error outcome: a code from the catalogue (or a tool's own
// identifier-shaped code) and a message for the model.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
}

// Error returns "<code>: <message>".
func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Errorf returns an *Error with code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// OK returns a value outcome.
func OK(v json.RawMessage) Outcome { return Outcome{Value: v} }

// Fail returns an error outcome.
func Fail(code Code, format string, args ...any) Outcome {
	return Outcome{Err: Errorf(code, format, args...)}
}

// IsOK reports whether the outcome is a value.
func (o Outcome) IsOK() bool { return o.Err == nil }

var null = []byte("null")

// MarshalJSON encodes {"ok":true,"value":…} or {"ok":false,"error":…}.
func (o Outcome) MarshalJSON() ([]byte, error) {
	if o.Err != nil {
		e, err := json.Marshal(o.Err)
		if err != nil {
			return nil, err
		}
		return append(append([]byte(`{"ok":false,"error":`), e...), '}'), nil
	}
	v := o.Value
	if len(v) == 0 {
		v = null
	}
	b := make([]byte, 0, len(v)+22)
	b = append(b, `{"ok":true,"value":`...)
	b = append(b, v...)
	return append(b, '}'), nil
}

// UnmarshalJSON decodes strictly: ok decides which of value and error must
// be present.
func (o *Outcome) UnmarshalJSON(data []byte) error {
	keys, err := objectKeys(data)
	if err != nil {
		return fmt.Errorf("outcome: %w", err)
	}
	var w struct {
		OK    *bool           `json:"ok"`
		Value json.RawMessage `json:"value"`
		Error *Error          `json:"error"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return fmt.Errorf("outcome: %w", err)
	}
	switch {
	case w.OK == nil:
		return fmt.Errorf("outcome.ok: missing")
	case *w.OK && (keys["error"] || !keys["value"] || len(keys) != 2):
		return fmt.Errorf("outcome: ok true wants exactly ok and value")
	case !*w.OK && (keys["value"] || w.Error == nil || len(keys) != 2):
		return fmt.Errorf("outcome: ok false wants exactly ok and error")
	case !*w.OK && w.Error.Code == "":
		return fmt.Errorf("outcome.error.code: missing")
	}
	*o = Outcome{Value: w.Value, Err: w.Error}
	return nil
}

// ResultError reads a capability_result's result: when it is an error
// envelope — an object with a string member "error" — it returns the message
// and the code, if the peer set an identifier-shaped "code" member (an
// extension); ok is false for a plain value.
func ResultError(result json.RawMessage) (message string, code Code, ok bool) {
	r := bytes.TrimSpace(result)
	if len(r) == 0 || r[0] != '{' {
		return "", "", false
	}
	var env struct {
		Error *string `json:"error"`
		Code  string  `json:"code"`
	}
	if json.Unmarshal(r, &env) != nil || env.Error == nil {
		return "", "", false
	}
	if IsIdentifierCode(env.Code) {
		code = Code(env.Code)
	}
	return *env.Error, code, true
}

// ErrorCode returns the error's code, so that an *Error wrapped by a tool
// keeps its code in [OutcomeOf].
func (e *Error) ErrorCode() Code { return e.Code }

// Coder is implemented by errors that carry a code from the catalogue or a
// tool's own identifier-shaped code.
type Coder interface {
	ErrorCode() Code
}

// OutcomeOf maps an error onto an error outcome: a deadline is timeout, a
// cancellation cancelled, an error carrying an identifier-shaped code (see
// [Coder]) keeps it, and anything else is tool_error with the error's
// message, so that the model always reads what went wrong.
func OutcomeOf(err error) Outcome {
	var c Coder
	switch {
	case errors.As(err, &c) && IsIdentifierCode(string(c.ErrorCode())):
		if e, ok := c.(*Error); ok && e == err {
			return Outcome{Err: e}
		}
		return Outcome{Err: &Error{Code: c.ErrorCode(), Message: err.Error()}}
	case errors.Is(err, context.DeadlineExceeded):
		return Fail(CodeTimeout, "the call did not finish before its deadline")
	case errors.Is(err, context.Canceled):
		return Fail(CodeCancelled, "the call was cancelled")
	default:
		return Outcome{Err: &Error{Code: CodeToolError, Message: err.Error()}}
	}
}
