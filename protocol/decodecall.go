package protocol

import (
	"bytes"
	"unicode/utf8"

	"github.com/brainrt/brain/internal/jsonscan"
	"github.com/brainrt/brain/internal/jsonvalid"
)

// A wake decodes a session's log, and most of a log is its calls: a
// capability_invoked and a capability_outcome each. decodeCallFast reads
// those two in one pass over the bytes, after checking that they are
// JSON (internal/jsonvalid) and UTF-8, instead of decodeMessageFast's three and encoding/json's reflection
// (BenchmarkDecodeFrame). It takes only what it reads exactly as the
// strict decoder would — the message's keys once each, spelled exactly;
// strings of printable ASCII without escapes; an input or a value that is
// not null; an outcome that is {"ok":true,"value":…} (an error outcome's
// message may hold anything, and goes the strict way) — and anything
// else, valid or not, goes to decodeMessageFast and then the strict
// decoder, as before. FuzzDecodeFast holds the three to the same result.

var (
	invokedType = []byte(`"` + TypeCapabilityInvoked + `"`)
	outcomeType = []byte(`"` + TypeCapabilityOutcome + `"`)
)

// decodeCallFast decodes data when it is a capability_invoked or an ok
// capability_outcome it can read in one pass; ok is false for anything
// else.
func decodeCallFast(data []byte) (_ Message, ok bool) {
	invoked := bytes.Contains(data, invokedType)
	if !invoked && !bytes.Contains(data, outcomeType) {
		return nil, false
	}
	if len(data) > MaxFrameBytes || !jsonvalid.Valid(data) || !utf8.Valid(data) {
		return nil, false
	}
	// From here data is one valid JSON value: the scans below meet
	// balanced brackets and terminated strings.
	sc := jsonscan.New(data)
	if !sc.Open() {
		return nil, false
	}
	if invoked {
		return decodeInvoked(sc)
	}
	return decodeOutcome(sc)
}

// decodeInvoked reads a capability_invoked's keys, the '{' read.
func decodeInvoked(sc *jsonscan.Scanner) (Message, bool) {
	var typ, callID, name, invokedBy, input []byte
	fields := [...]field{{"type", plainText, &typ}, {"callId", plainText, &callID}, {"name", plainText, &name},
		{"invokedBy", plainText, &invokedBy}, {"input", rawValue, &input}}
	if !readFields(sc, fields[:]) || !sc.End() || string(typ) != string(TypeCapabilityInvoked) {
		return nil, false
	}
	return &CapabilityInvoked{CallID: string(callID), Name: string(name), Input: bytes.Clone(input), InvokedBy: string(invokedBy)}, true
}

// decodeOutcome reads an ok capability_outcome's keys, the '{' read.
func decodeOutcome(sc *jsonscan.Scanner) (Message, bool) {
	var typ, callID, name, outcome, ok, value []byte
	fields := [...]field{{"type", plainText, &typ}, {"callId", plainText, &callID}, {"name", plainText, &name}, {"outcome", rawValue, &outcome}}
	if !readFields(sc, fields[:]) || !sc.End() || string(typ) != string(TypeCapabilityOutcome) {
		return nil, false
	}
	// The outcome, alone: {"ok":true,"value":…}, its keys in either order.
	outcomeFields := [...]field{{"ok", trueLiteral, &ok}, {"value", rawValue, &value}}
	out := jsonscan.New(outcome)
	if !out.Open() || !readFields(out, outcomeFields[:]) || !out.End() {
		return nil, false
	}
	return &CapabilityOutcome{CallID: string(callID), Name: string(name), Outcome: Outcome{Value: bytes.Clone(value)}}, true
}

// field is a key readFields takes, the kind of value it takes for it, and
// where the value's bytes go.
type field struct {
	key  string
	kind fieldKind
	dst  *[]byte
}

type fieldKind uint8

const (
	plainText   fieldKind = iota // a string of printable ASCII without escapes: its contents
	rawValue                     // any value but null, as written
	trueLiteral                  // true
)

// readFields reads an object's keys up to its '}', the '{' read: every
// key of fields exactly once, each with a value of its kind, and no
// other key. It reports false for anything else.
func readFields(sc *jsonscan.Scanner, fields []field) bool {
	for first := true; ; first = false {
		key, more := sc.Key(first)
		if !more {
			break
		}
		i := 0
		for i < len(fields) && fields[i].key != string(key) {
			i++
		}
		if i == len(fields) || *fields[i].dst != nil {
			return false // another key, or one twice
		}
		var v []byte
		switch fields[i].kind {
		case plainText:
			s, ok := sc.PlainString()
			if !ok {
				return false
			}
			v = s
		case rawValue:
			if v = sc.Value(); len(v) == 0 || v[0] == 'n' { // null: the strict way
				return false
			}
		case trueLiteral:
			if v = sc.Value(); string(v) != "true" {
				return false
			}
		}
		*fields[i].dst = v
	}
	if sc.Bad {
		return false
	}
	for _, f := range fields {
		if *f.dst == nil {
			return false // a key missing
		}
	}
	return true
}
