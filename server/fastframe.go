package server

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/brainrt/brain/internal/jsonscan"
	"github.com/brainrt/brain/internal/jsonvalid"
	"github.com/brainrt/brain/protocol"
)

// decodePeerFrame is protocol.DecodePeerFrame with a fast path for the
// frame a peer sends most, a capability_result:
//
//	{"v":2,"id":"r1","msg":{"type":"capability_result","callId":"c-1","result":…}}
//
// read in one pass over the bytes instead of the strict decoder's several
// (key scan, envelope, message head, message). The fast path takes only
// frames it can read exactly as the strict decoder would — known keys
// once each, printable-ASCII strings without escapes, "v" written as 2 —
// and gives anything else, valid or not, to protocol.DecodePeerFrame,
// whose errors are the only ones a peer sees. FuzzDecodeResultFrame holds
// the two to the same frame.
func decodePeerFrame(data []byte) (*protocol.Frame, error) {
	if f, ok := decodeResultFrame(data); ok {
		return f, nil
	}
	return protocol.DecodePeerFrame(data)
}

var resultType = []byte(`"` + protocol.TypeCapabilityResult + `"`)

// decodeResultFrame is the fast path of decodePeerFrame; ok is false when
// it does not take the frame.
func decodeResultFrame(data []byte) (f *protocol.Frame, ok bool) {
	// The type's bytes first: any other frame (a registration can be a
	// megabyte) costs the fast path a substring search, not a second
	// validation beside the strict decoder's.
	if len(data) > protocol.MaxFrameBytes || !bytes.Contains(data, resultType) || !jsonvalid.Valid(data) || !utf8.Valid(data) {
		return nil, false
	}
	// From here the document is valid JSON: every scan below can rely on
	// balanced brackets and terminated strings.
	sc := jsonscan.New(data)
	if !sc.Open() {
		return nil, false
	}
	var id, callID []byte
	var result []byte
	var seen, seenMsg uint8
	const (
		keyV = 1 << iota
		keyID
		keyMsg
		keyType
		keyCallID
		keyResult
	)
	for first := true; ; first = false {
		key, more := sc.Key(first)
		if !more {
			break
		}
		switch string(key) {
		case "v":
			if seen&keyV != 0 || string(sc.Number()) != "2" {
				return nil, false
			}
			seen |= keyV
		case "id":
			s, ok := sc.PlainString()
			if seen&keyID != 0 || !ok {
				return nil, false
			}
			id, seen = s, seen|keyID
		case "msg":
			if seen&keyMsg != 0 || !sc.Open() {
				return nil, false
			}
			seen |= keyMsg
			for mfirst := true; ; mfirst = false {
				mkey, more := sc.Key(mfirst)
				if !more {
					break
				}
				switch string(mkey) {
				case "type":
					s, ok := sc.PlainString()
					if seenMsg&keyType != 0 || !ok || string(s) != string(protocol.TypeCapabilityResult) {
						return nil, false
					}
					seenMsg |= keyType
				case "callId":
					s, ok := sc.PlainString()
					if seenMsg&keyCallID != 0 || !ok {
						return nil, false
					}
					callID, seenMsg = s, seenMsg|keyCallID
				case "result":
					if seenMsg&keyResult != 0 {
						return nil, false
					}
					result, seenMsg = sc.Value(), seenMsg|keyResult
				default:
					return nil, false
				}
			}
		default:
			return nil, false // seq, ref, unknown or wrongly cased keys: the strict decoder's error
		}
		if sc.Bad {
			return nil, false
		}
	}
	if sc.Bad || seen&(keyV|keyMsg) != keyV|keyMsg || seenMsg != keyType|keyCallID|keyResult {
		return nil, false
	}
	return &protocol.Frame{V: protocol.Version, ID: string(id), Msg: &protocol.CapabilityResult{
		CallID: string(callID),
		Result: append(json.RawMessage(nil), result...), // the frame's buffer is reused for the next one
	}}, true
}
