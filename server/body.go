package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode"
)

// bodyWithin bounds how long a request's body may take to arrive, from
// the handler's start: the bound a WebSocket message has (docs/protocol.md,
// "Connecting"). Without it a body that trickles — a byte a minute — held
// its request, the session it named and a stop's wait for as long as its
// sender liked (a probe kept POST /v1/sessions and /frames open for over
// two minutes; the server's own timeouts bound headers only, since a
// request's answer may stream for long).
var bodyWithin = newTunable(time.Minute)

// readBody reads r's body whole, at most max bytes, within bodyWithin. A
// body that is late, too large or broken is answered here — 408, 413 with
// code and tooLarge, 400 — its connection closed after the answer, and
// false returned.
func readBody(w http.ResponseWriter, r *http.Request, max int, code, tooLarge string) ([]byte, bool) {
	rc := http.NewResponseController(w)
	within := bodyWithin.get()
	_ = rc.SetReadDeadline(time.Now().Add(within))
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(max)+1))
	if err == nil && len(body) <= max {
		// The deadline is the body's only: a response that streams for
		// long (an MCP call awaiting approval) must not end with it.
		_ = rc.SetReadDeadline(time.Time{})
		return body, true
	}
	// Refused: the connection closes after the answer, and the deadline
	// stays, so that the server does not wait for the rest of the body
	// before it answers (it reads what a handler left unread, to keep the
	// connection).
	w.Header().Set("Connection", "close")
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		httpError(w, http.StatusRequestTimeout, "invalid_request", fmt.Sprintf("the request's body did not arrive whole within %s", within))
	case err != nil:
		httpError(w, http.StatusBadRequest, "invalid_request", "cannot read the request's body: "+err.Error())
	default:
		httpError(w, http.StatusRequestEntityTooLarge, code, tooLarge)
	}
	return nil, false
}

// decodeStrict decodes the one JSON value data holds into v, refusing a
// key v has no field for and anything but white space after the value: a
// body of two objects was taken for its first (a probe's POST
// /v1/sessions of {"id":"a"}{"id":"b"} made session a), and a tokens.json
// ending in a stray brace was read as if it did not.
func decodeStrict(data []byte, v any) error {
	if len(bytes.Trim(data, " \t\r\n")) == 0 {
		return errors.New("empty: want a JSON object") // the decoder says only "EOF"
	}
	if err := noDuplicateKeys(data); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if rest := bytes.Trim(data[dec.InputOffset():], " \t\r\n"); len(rest) > 0 { // JSON's whitespace only
		return fmt.Errorf("%d bytes after the JSON value (%.20q): send one value", len(rest), rest)
	}
	return nil
}

// maxStrictDepth bounds how deep decodeStrict's bodies nest: they are
// small objects (a session's id, the tokens file).
const maxStrictDepth = 32

// noDuplicateKeys refuses data when one of its objects holds a key twice,
// which encoding/json would take the last of: {"id":"a","id":"b"} made
// session b (the re-probe). What is not JSON is left to the decoder: the
// walk stops at the first token it cannot read (errNotJSON) — dec.More
// stays true after an error, and a walk that went on spun for ever on
// `[{"a":"b` (a lifecycle probe: a 9-byte POST held a core).
func noDuplicateKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var walk func(depth int) error
	walk = func(depth int) error {
		if depth > maxStrictDepth {
			return fmt.Errorf("nested more than %d levels deep", maxStrictDepth)
		}
		t, err := dec.Token()
		if err != nil {
			return errNotJSON
		}
		switch t {
		case json.Delim('{'):
			seen := map[string]string{} // folded → as written
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return errNotJSON
				}
				k, _ := kt.(string)
				// encoding/json matches a key to a field without regard to
				// case, and takes the last: {"side":"client","Side":"operator"}
				// made a client token an operator's (an adversarial probe).
				f := foldKey(k)
				if first, ok := seen[f]; ok {
					if first == k {
						return fmt.Errorf("the key %q appears twice in one object", k)
					}
					return fmt.Errorf("the keys %q and %q are one key twice in one object (keys are matched without regard to case)", first, k)
				}
				seen[f] = k
				if err := walk(depth + 1); err != nil {
					return err
				}
			}
			_, _ = dec.Token()
		case json.Delim('['):
			for dec.More() {
				if err := walk(depth + 1); err != nil {
					return err
				}
			}
			_, _ = dec.Token()
		}
		return nil
	}
	if err := walk(0); err != nil && err != errNotJSON {
		return err
	}
	return nil
}

// foldKey folds k as encoding/json does when it matches a key to a field:
// case, and the letters that fold to ASCII ones (the Kelvin sign to k,
// the long s to s).
func foldKey(k string) string {
	return strings.Map(func(r rune) rune { return unicode.ToLower(unicode.ToUpper(r)) }, k)
}

// errNotJSON ends noDuplicateKeys' walk at bytes that are not JSON.
var errNotJSON = errors.New("not JSON")
