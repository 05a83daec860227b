package script_test

import (
	"context"
	"encoding/json"
	"errors"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide/script"
)

// newRuntime returns a Runtime under g, failing the test on error.
func newRuntime(t testing.TB, g script.Grants, opts *script.Options) *script.Runtime {
	t.Helper()
	r, err := script.New(g, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

// jsCase is one call and what it must give: a JSON result, or an error
// with a code and a message that contains msg.
type jsCase struct {
	name string
	src  string
	args string
	want string        // the result's JSON when code is ""
	code protocol.Code // the error's code
	msg  string        // a substring of the error's message
	// or is another code accepted in place of code, message unchecked:
	// timeout for work that may not reach its limit in time under the
	// race detector.
	or protocol.Code
	// gradual marks a guard that counts a string as it builds it: near
	// its limit the builder's own growth may cross the memory budget
	// first, and the heap watchdog's too_large is accepted in its place.
	gradual bool
}

// run calls c.src on r and checks the outcome.
func (c jsCase) run(t *testing.T, r *script.Runtime) {
	t.Helper()
	var args json.RawMessage
	if c.args != "" {
		args = json.RawMessage(c.args)
	}
	out, err := r.Call(context.Background(), c.src, args)
	if c.or != "" && handle.CodeOf(err) == c.or {
		return
	}
	if c.gradual && handle.CodeOf(err) == protocol.CodeTooLarge && strings.Contains(err.Error(), "memory budget") {
		return
	}
	check(t, out, err, c.want, c.code, c.msg)
}

// check compares a Call's outcome with a wanted result or error.
func check(t *testing.T, out json.RawMessage, err error, want string, code protocol.Code, msg string) {
	t.Helper()
	if code == "" {
		if err != nil {
			t.Fatalf("error %v, want %s", err, want)
		}
		if string(out) != want {
			t.Fatalf("result %s, want %s", out, want)
		}
		return
	}
	if err == nil {
		t.Fatalf("result %s, want error %s", out, code)
	}
	var ce *handle.CapabilityError
	if !errors.As(err, &ce) {
		t.Fatalf("error %T %v is not a *handle.CapabilityError", err, err)
	}
	if ce.Code != code || ce.Handle != handle.KindJS || ce.Op != "call" {
		t.Fatalf("error %v: want handle js, op call, code %s", err, code)
	}
	if !strings.Contains(ce.Message, msg) {
		t.Fatalf("error message %q does not contain %q", ce.Message, msg)
	}
}

// processMemory is the memory the Go runtime holds from the system: the
// heap, stacks and runtime structures. It shrinks only slowly after a
// peak, so read after a call it shows about how high the call went.
func processMemory() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// raceTimeout lets work that fills a memory budget or walks a deep
// structure end timeout under the race detector, which slows the
// transpiled engine twenty- to fiftyfold (a realm takes 0.3 s to make
// instead of 15 ms): it may outlast any deadline a test can afford there.
// The run without the detector holds the code.
func raceTimeout(tests []jsCase) {
	if !testutil.RaceEnabled {
		return
	}
	for i := range tests {
		if tests[i].code != "" && tests[i].or == "" {
			tests[i].or = protocol.CodeTimeout
		}
	}
}

// raceOr is timeout under the race detector, for one case that raceTimeout
// would cover in a table of its own; "" otherwise.
func raceOr() protocol.Code {
	if testutil.RaceEnabled {
		return protocol.CodeTimeout
	}
	return ""
}

// raceGrant is a call timeout for tests whose cases may fill a budget:
// long without the race detector, where no case reaches it, and short
// with it, where raceTimeout accepts the deadline.
func raceGrant(normal time.Duration) time.Duration {
	if testutil.RaceEnabled {
		return 8 * time.Second
	}
	return normal
}

// warm leaves an idle realm in r, so that the next call's deadline goes
// to its script rather than to making a realm (15 ms; 0.3 s and more
// under the race detector).
func warm(t *testing.T, r *script.Runtime) {
	t.Helper()
	if _, err := r.Call(context.Background(), `() => 0`, nil); err != nil {
		t.Fatal(err)
	}
}

// slow scales a time bound for the race detector, which slows tests down
// by about ten.
func slow(d time.Duration) time.Duration {
	if testutil.RaceEnabled {
		return 4 * d
	}
	return d
}
