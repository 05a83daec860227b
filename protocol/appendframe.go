package protocol

import (
	"encoding/json"
	"strconv"

	"github.com/brainrt/brain/internal/jsonvalid"
)

// AppendFrame appends the frame's JSON — exactly the bytes [EncodeFrame]
// returns — to b, and returns the extended buffer. The frames of a call's
// round trip (capability_invoked, capability_outcome, ack) are written by
// hand into the caller's buffer, without encoding/json's reflection or a
// new slice; a frame with anything the hand-written form does not cover
// (a string that needs escaping, JSON that is not compact or holds a
// character encoding/json escapes) and every other message go through
// EncodeFrame. A transport reuses one buffer per connection, a journal one
// per session. TestAppendFrame and FuzzAppendFrame hold the two to the
// same bytes.
func AppendFrame(b []byte, f *Frame) ([]byte, error) {
	if out, ok := appendFrameFast(b, f); ok {
		return out, nil
	}
	enc, err := EncodeFrame(f)
	if err != nil {
		return b, err
	}
	return append(b, enc...), nil
}

func appendFrameFast(b []byte, f *Frame) ([]byte, bool) {
	start := len(b)
	v := f.V
	if v == 0 {
		v = Version
	}
	if !plainString(f.ID) || !plainString(f.Ref) {
		return b, false
	}
	b = appendEnvelope(b, v, f)
	ok := false
	switch m := f.Msg.(type) {
	case *CapabilityInvoked:
		if plainString(m.CallID) && plainString(m.Name) && plainString(m.InvokedBy) {
			b = append(b, `,"msg":{"type":"capability_invoked","callId":`...)
			b = appendPlain(b, m.CallID)
			b = appendPlain(append(b, `,"name":`...), m.Name)
			if b, ok = appendRawJSON(append(b, `,"input":`...), m.Input); ok {
				b = appendPlain(append(b, `,"invokedBy":`...), m.InvokedBy)
			}
		}
	case *CapabilityOutcome:
		if plainString(m.CallID) && plainString(m.Name) {
			b = append(b, `,"msg":{"type":"capability_outcome","callId":`...)
			b = appendPlain(b, m.CallID)
			b = appendPlain(append(b, `,"name":`...), m.Name)
			if e := m.Outcome.Err; e != nil {
				if ok = plainString(string(e.Code)) && plainString(e.Message); ok {
					b = append(b, `,"outcome":{"ok":false,"error":{"code":`...)
					b = appendPlain(b, string(e.Code))
					b = appendPlain(append(b, `,"message":`...), e.Message)
					b = append(b, "}}"...)
				}
			} else if b, ok = appendRawJSON(append(b, `,"outcome":{"ok":true,"value":`...), nilIfEmpty(m.Outcome.Value)); ok {
				b = append(b, '}')
			}
		}
	case *Ack:
		if ok = plainString(m.CallID); ok {
			b = append(b, `,"msg":{"type":"ack"`...)
			if m.CallID != "" {
				b = appendPlain(append(b, `,"callId":`...), m.CallID)
			}
		}
	}
	if !ok {
		return b[:start], false
	}
	return append(b, "}}"...), true
}

// appendEnvelope appends a frame's opening up to its message:
// {"v":v[,"seq":…][,"id":…][,"ref":…] — its id and ref plain strings.
func appendEnvelope(b []byte, v int, f *Frame) []byte {
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(v), 10)
	if f.Seq != 0 {
		b = append(b, `,"seq":`...)
		b = strconv.AppendUint(b, f.Seq, 10)
	}
	if f.ID != "" {
		b = appendPlain(append(b, `,"id":`...), f.ID)
	}
	if f.Ref != "" {
		b = appendPlain(append(b, `,"ref":`...), f.Ref)
	}
	return b
}

func appendPlain(b []byte, s string) []byte {
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// nilIfEmpty is v, or nil when it is empty: an outcome's empty value is
// written as null.
func nilIfEmpty(v json.RawMessage) json.RawMessage {
	if len(v) == 0 {
		return nil
	}
	return v
}

// appendRawJSON appends raw as encoding/json writes a json.RawMessage
// (null when nil), when that is raw itself: valid, compact, and without
// the characters it escapes (<, >, &, U+2028, U+2029; any byte 0xE2 is
// taken for one of the latter).
func appendRawJSON(b []byte, raw json.RawMessage) ([]byte, bool) {
	if raw == nil {
		return append(b, "null"...), true
	}
	if len(raw) == 0 { // an error from encoding/json
		return b, false
	}
	inString, escaped := false, false
	for _, c := range raw {
		switch {
		case c == '<' || c == '>' || c == '&' || c == 0xE2:
			return b, false
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			return b, false // not compact
		}
	}
	if !jsonvalid.Valid(raw) {
		return b, false
	}
	return append(b, raw...), true
}
