package protocol

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// The strict decoder reads a frame in several passes: json.Valid, a key
// scan, json.Unmarshal of the envelope (which validates again), then for
// the message json.Unmarshal of its "type", json.Valid and a key scan for
// the field check, and json.Unmarshal of the message — each message byte
// read about eleven times. Kernel frames (what a journal stores and a
// wake decodes, a thousand at a time) have one shape, the one
// appendEnvelope writes; for those decodeFrameFast reads the envelope in
// place and decodeMessageFast takes the type from the key scan, then
// json.Unmarshal validates and decodes: three passes in all.
//
// Neither ever fails: anything they do not recognise, and anything that
// does not decode, goes to the strict path, which decodes it again and
// gives its own errors. What they accept the strict path accepts with the
// same result (FuzzDecodeFast holds them to it).

// decodeFrameFast decodes data when it is a kernel frame's envelope —
// {"v":2, then "seq" (digits), "id" and "ref" (printable ASCII without
// escapes), each optional and in that order, then "msg" last — around a
// message DecodeMessage accepts; ok is false for anything else.
func decodeFrameFast(data []byte) (_ *Frame, ok bool) {
	const head = `{"v":2,`
	if len(data) > MaxFrameBytes || !bytes.HasPrefix(data, []byte(head)) || data[len(data)-1] != '}' {
		return nil, false
	}
	f := Frame{V: Version}
	rest := data[len(head) : len(data)-1]
	if r, found := bytes.CutPrefix(rest, []byte(`"seq":`)); found {
		n := 0
		for n < len(r) && '0' <= r[n] && r[n] <= '9' {
			n++
		}
		if n == 0 || n > 1 && r[0] == '0' || n >= len(r) || r[n] != ',' {
			return nil, false
		}
		seq, err := strconv.ParseUint(string(r[:n]), 10, 64)
		if err != nil {
			return nil, false
		}
		f.Seq, rest = seq, r[n+1:]
	}
	for _, field := range []struct {
		key string
		dst *string
	}{{`"id":"`, &f.ID}, {`"ref":"`, &f.Ref}} {
		r, found := bytes.CutPrefix(rest, []byte(field.key))
		if !found {
			continue
		}
		n := 0
		for n < len(r) && r[n] != '"' {
			if c := r[n]; c < 0x20 || c >= 0x7f || c == '\\' {
				return nil, false
			}
			n++
		}
		if n+1 >= len(r) || r[n+1] != ',' {
			return nil, false
		}
		*field.dst, rest = string(r[:n]), r[n+2:]
	}
	msg, found := bytes.CutPrefix(rest, []byte(`"msg":`))
	if !found {
		return nil, false
	}
	m, err := DecodeMessage(msg)
	if err != nil {
		return nil, false
	}
	f.Msg = m
	return &f, true
}

// decodeMessageFast decodes data when it is an object whose keys the
// scan reads, with a plain "type" of a known message, only that
// message's fields, each once, the required ones present, and a body
// json.Unmarshal accepts; ok is false for anything else.
//
// It scans before anything validated data: the scan never fails on what
// is not JSON (it may read keys from it), and json.Unmarshal, which
// validates the whole message first, decides.
func decodeMessageFast(data []byte) (_ Message, ok bool) {
	if m, ok := decodeCallFast(data); ok { // decodecall.go: a call's two events in one pass
		return m, true
	}
	seen, dup, typ, ok := scanKeysCapture(data, "type")
	if !ok || dup != nil || len(typ) < 2 || typ[0] != '"' || typ[len(typ)-1] != '"' || bytes.IndexByte(typ, '\\') >= 0 {
		return nil, false
	}
	spec, ok := messageSpecs[Type(typ[1:len(typ)-1])]
	if !ok || checkKeys(seen, spec.allowed, spec.required...) != nil {
		return nil, false
	}
	m := spec.new()
	if json.Unmarshal(data, m) != nil {
		return nil, false
	}
	return m, true
}
