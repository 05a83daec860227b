package handle

import (
	"context"
	"errors"
	"fmt"

	"github.com/brainrt/brain/protocol"
)

// CapabilityError is the one error type every handle operation fails with.
// It says which handle and operation failed, a Code from the protocol
// catalogue (path_escape, denied, not_found, too_large, timeout, cancelled,
// unavailable, invalid_argument, …) and a Message a model can act on.
//
// Err, when set, is the underlying cause; it is for logs and errors.Is, and
// is not shown to the model (it may name host paths the tool must not see).
type CapabilityError struct {
	Handle  Kind
	Op      string
	Code    protocol.Code
	Message string
	Err     error
}

// Error returns "<handle> <op>: <message>". The code is not repeated in
// the text: it travels as Code (and ErrorCode), and an Outcome or a log line
// shows it once beside the message.
func (e *CapabilityError) Error() string {
	return fmt.Sprintf("%s %s: %s", e.Handle, e.Op, e.Message)
}

// ErrorCode returns the code, so that the error keeps it in an Outcome.
func (e *CapabilityError) ErrorCode() protocol.Code { return e.Code }

// Unwrap returns the cause.
func (e *CapabilityError) Unwrap() error { return e.Err }

// Errorf returns a *CapabilityError for handle h and operation op.
func Errorf(h Kind, op string, code protocol.Code, format string, args ...any) *CapabilityError {
	return &CapabilityError{Handle: h, Op: op, Code: code, Message: fmt.Sprintf(format, args...)}
}

// FromContext returns a timeout or cancelled *CapabilityError when ctx is
// done, and nil otherwise. Providers call it when an operation stops early so
// that the code reflects why.
func FromContext(ctx context.Context, h Kind, op string) *CapabilityError {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &CapabilityError{Handle: h, Op: op, Code: protocol.CodeTimeout, Message: "the operation did not finish before its deadline", Err: err}
	}
	return &CapabilityError{Handle: h, Op: op, Code: protocol.CodeCancelled, Message: "the operation was cancelled", Err: err}
}

// CodeOf returns the code of the first *CapabilityError in err's chain, or
// "" when there is none.
func CodeOf(err error) protocol.Code {
	var ce *CapabilityError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return ""
}
