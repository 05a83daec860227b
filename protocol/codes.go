package protocol

// Code is the identifier-shaped error code carried by an error [Outcome], an
// `error` reply frame and a handle's CapabilityError. The codes below are the
// catalogue brain itself produces; a tool may return its own identifier-shaped
// code (see [IsIdentifierCode]) and it is preserved unchanged.
//
// Every code in the catalogue is documented in docs/protocol.md; a test keeps
// the two in step.
type Code string

// The catalogue. Keep it sorted by meaning, and document any new code in
// docs/protocol.md ("Error codes").
const (
	// CodeNotFound: no capability, call, file or resource with that name.
	CodeNotFound Code = "not_found"
	// CodeForbidden: the caller may not do this (audience, trust, ownership).
	CodeForbidden Code = "forbidden"
	// CodeInvalidInput: input failed the capability's input schema.
	CodeInvalidInput Code = "invalid_input"
	// CodeInvalidRequest: a frame or command that is malformed or breaks a
	// registration rule.
	CodeInvalidRequest Code = "invalid_request"
	// CodeInvalidOutput: a handler's result failed the output schema.
	CodeInvalidOutput Code = "invalid_output"
	// CodeRejected: a user rejected the call at approval.
	CodeRejected Code = "rejected"
	// CodeStaleApproval: a decision that does not match the pending approval
	// request (its inputDigest is another request's), or an approval request
	// withdrawn because the capability was re-registered differently.
	CodeStaleApproval Code = "stale_approval"
	// CodeTimeout: the call's deadline passed.
	CodeTimeout Code = "timeout"
	// CodeCancelled: the call was cancelled.
	CodeCancelled Code = "cancelled"
	// CodeConflict: the request contradicts the current state (a second
	// result for a finished call, a name owned by another origin).
	CodeConflict Code = "conflict"
	// CodePathEscape: a path resolved outside the handle's root.
	CodePathEscape Code = "path_escape"
	// CodeDenied: a grant does not allow the operation.
	CodeDenied Code = "denied"
	// CodeTooLarge: a size limit was exceeded.
	CodeTooLarge Code = "too_large"
	// CodeQuotaExceeded: a per-token, per-session or per-connection quota
	// (sessions, capabilities, pending calls, frame rate, journal bytes) is
	// used up; the message names the quota and its limit.
	CodeQuotaExceeded Code = "quota_exceeded"
	// CodeUnavailable: the handle or service cannot be provided here.
	CodeUnavailable Code = "unavailable"
	// CodeInvalidArgument: a handle operation was given an unusable argument.
	CodeInvalidArgument Code = "invalid_argument"
	// CodeToolError: a tool failed with an error that carried no code.
	CodeToolError Code = "tool_error"
	// CodeInternal: a bug or a crash (a panic, a trap); the session survives.
	CodeInternal Code = "internal"
)

// Codes lists the catalogue in a stable order.
func Codes() []Code {
	return []Code{
		CodeNotFound, CodeForbidden, CodeInvalidInput, CodeInvalidOutput, CodeInvalidRequest,
		CodeRejected, CodeStaleApproval, CodeTimeout, CodeCancelled, CodeConflict,
		CodePathEscape, CodeDenied, CodeTooLarge, CodeQuotaExceeded, CodeUnavailable,
		CodeInvalidArgument, CodeToolError, CodeInternal,
	}
}

// IsIdentifierCode reports whether s is shaped like an error code: 1 to 64
// characters, a lower-case ASCII letter first, then lower-case letters,
// digits, '_' or '.'. Codes of this shape returned by tools and peers are
// preserved; anything else is replaced by [CodeToolError].
func IsIdentifierCode(s string) bool {
	if len(s) == 0 || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
