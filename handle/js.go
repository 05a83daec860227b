package handle

import (
	"context"
	"encoding/json"
)

// JS runs JavaScript with no access to the host: no file system, network,
// timers or modules, only the language and its built-ins.
type JS interface {
	// Call evaluates source, which must be a function expression such as
	// "(args) => args.a + args.b", calls it with args decoded from JSON and
	// returns its result encoded as JSON. A script that runs past its
	// deadline is interrupted (timeout); scripts and results beyond the
	// grant's sizes fail with too_large; a thrown exception fails with
	// invalid_argument and the exception's message.
	Call(ctx context.Context, source string, args json.RawMessage) (json.RawMessage, error)
}
