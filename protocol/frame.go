package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"
)

// Version is the protocol version a frame carries in "v".
const Version = 2

// MaxFrameBytes is the largest frame DecodeFrame accepts.
const MaxFrameBytes = 1 << 20

// Frame is the envelope around exactly one message. See docs/protocol.md.
//
//	{"v":2,"seq":17,"msg":{"type":"capability_invoked",…}}   kernel → peer
//	{"v":2,"id":"c1","msg":{"type":"capability_result",…}}   peer → kernel
//	{"v":2,"seq":17,"ref":"c1","msg":{"type":"ack"}}         kernel reply
type Frame struct {
	// V is the protocol version; DecodeFrame accepts only Version.
	V int
	// Seq is set on everything the kernel sends. On events it is the
	// event's place in the session's log; on ack and error replies it is the
	// last seq the session had emitted when it replied.
	Seq uint64
	// ID is an optional correlation id a peer puts on a command.
	ID string
	// Ref, on an ack or error reply, is the ID of the command answered.
	Ref string
	// Msg is the one message.
	Msg Message
}

// messageSpec says how to decode one message type strictly.
type messageSpec struct {
	new      func() Message
	allowed  map[string]bool
	required []string
}

var messageSpecs = map[Type]messageSpec{}

func init() {
	for _, m := range []Message{
		&CapabilityRegister{}, &CapabilityDeregister{}, &CapabilityResult{},
		&CapabilityApprove{}, &CapabilityInvoked{}, &RenderInvoked{},
		&CapabilityInvoke{}, &CapabilityCancel{}, &CapabilityProgress{}, &ApprovalRequested{},
		&CapabilityOutcome{}, &Resume{}, &Snapshot{}, &Ack{}, &ErrorReply{},
		&ApprovalDecided{}, &ApprovalWithdrawn{},
		&TurnStart{}, &TurnEnd{}, &TurnCancel{}, &TurnStarted{}, &TurnEnded{}, // turn.go
		&ConversationMessage{}, &AssistantDelta{},
	} {
		t := reflect.TypeOf(m).Elem()
		allowed, required := jsonFields(t)
		allowed["type"] = true
		messageSpecs[m.MessageType()] = messageSpec{
			new:      func() Message { return reflect.New(t).Interface().(Message) },
			allowed:  allowed,
			required: required,
		}
	}
}

// jsonFields derives the accepted and required JSON names of a struct from
// its tags: a field without omitempty or omitzero is required.
func jsonFields(t reflect.Type) (allowed map[string]bool, required []string) {
	allowed = map[string]bool{}
	for i := range t.NumField() {
		tag := t.Field(i).Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" || name == "-" {
			continue
		}
		allowed[name] = true
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
			required = append(required, name)
		}
	}
	return allowed, required
}

type frameJSON struct {
	V   int             `json:"v"`
	Seq uint64          `json:"seq,omitempty"`
	ID  string          `json:"id,omitempty"`
	Ref string          `json:"ref,omitempty"`
	Msg json.RawMessage `json:"msg"`
}

var frameFields, frameRequired = jsonFields(reflect.TypeOf(frameJSON{}))

// EncodeFrame returns the frame's JSON.
func EncodeFrame(f *Frame) ([]byte, error) {
	if f.Msg == nil {
		return nil, fmt.Errorf("encode frame: no message")
	}
	v := f.V
	if v == 0 {
		v = Version
	}
	if !plainString(f.ID) || !plainString(f.Ref) {
		msg, err := EncodeMessage(f.Msg)
		if err != nil {
			return nil, err
		}
		return json.Marshal(frameJSON{V: v, Seq: f.Seq, ID: f.ID, Ref: f.Ref, Msg: msg})
	}
	// The envelope and the message's "type" by hand around the message's
	// own JSON: the bytes json.Marshal of the frame would give (the body is
	// compact JSON already), without re-validating and copying it.
	body, err := json.Marshal(f.Msg)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", f.Msg.MessageType(), err)
	}
	t := f.Msg.MessageType()
	b := appendEnvelope(make([]byte, 0, len(body)+len(t)+len(f.ID)+len(f.Ref)+72), v, f)
	b = append(append(append(b, `,"msg":{"type":"`...), t...), '"')
	if len(body) > 2 {
		b = append(b, ',')
	}
	b = append(b, body[1:]...)
	return append(b, '}'), nil
}

// plainString reports whether json.Marshal writes s as itself in quotes:
// printable ASCII with nothing to escape (encoding/json also escapes <, >
// and &).
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// EncodeMessage returns the message's JSON with its "type" first.
func EncodeMessage(m Message) ([]byte, error) {
	body, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", m.MessageType(), err)
	}
	b := make([]byte, 0, len(body)+len(m.MessageType())+10)
	b = append(b, `{"type":"`...)
	b = append(b, m.MessageType()...)
	b = append(b, '"')
	if len(body) > 2 {
		b = append(b, ',')
	}
	return append(b, body[1:]...), nil
}

// DecodeError is a frame that could not be decoded. ID is the frame's id
// when it could be read — a top-level "id" holding a string, even if the
// rest of the frame is broken — so that an error reply can refer to it.
// Code is the error code a reply should carry: [CodeTooLarge] for a frame
// over [MaxFrameBytes], [CodeInvalidRequest] for anything else.
type DecodeError struct {
	ID   string
	Code Code
	Err  error
}

func (e *DecodeError) Error() string { return "decode frame: " + e.Err.Error() }
func (e *DecodeError) Unwrap() error { return e.Err }

// DecodeFrame decodes one frame strictly: at most MaxFrameBytes, version 2,
// known fields only, one message of a known type with its required fields.
// Every failure is a *DecodeError whose message names the field. It never
// panics, whatever the bytes (a fuzz test holds it to that).
//
// DecodeFrame accepts what the kernel sends (frames with "seq" and "ref");
// a kernel decoding what a peer sent uses [DecodePeerFrame].
func DecodeFrame(data []byte) (*Frame, error) {
	if f, ok := decodeFrameFast(data); ok { // a kernel frame (decodefast.go)
		return f, nil
	}
	f, _, err := decodeFrame(data)
	return f, err
}

// DecodePeerFrame is [DecodeFrame] for a frame a peer sent to the kernel:
// it also refuses the kernel-only fields "seq" and "ref", with an error
// naming the field, so that a peer cannot pass off a command as a reply or
// an event, and a frame that is not UTF-8 (JSON text is; raw bytes in an
// input or a result would reach other peers' text frames, which a browser
// must refuse).
func DecodePeerFrame(data []byte) (*Frame, error) {
	f, keys, err := decodeFrame(data)
	if err != nil {
		return nil, err
	}
	if !utf8.Valid(data) {
		return nil, &DecodeError{ID: f.ID, Code: CodeInvalidRequest, Err: fmt.Errorf("the frame is not valid UTF-8, as JSON text must be")}
	}
	for _, k := range []string{"seq", "ref"} {
		if keys[k] {
			return nil, &DecodeError{ID: f.ID, Code: CodeInvalidRequest, Err: fmt.Errorf("%s: set by the kernel only; a peer's frame must not carry it", k)}
		}
	}
	return f, nil
}

func decodeFrame(data []byte) (*Frame, map[string]bool, error) {
	return decodeFrameWith(data, DecodeMessage)
}

// decodeFrameWith is decodeFrame decoding the message with decodeMsg (a
// test gives decodeMessageStrict).
func decodeFrameWith(data []byte, decodeMsg func([]byte) (Message, error)) (*Frame, map[string]bool, error) {
	if len(data) > MaxFrameBytes {
		return nil, nil, &DecodeError{Code: CodeTooLarge, Err: fmt.Errorf("frame is %d bytes, more than the limit of %d", len(data), MaxFrameBytes)}
	}
	if !json.Valid(data) {
		var probe json.RawMessage
		err := json.Unmarshal(data, &probe) // for the syntax error's message
		// The id, when it comes before what broke the JSON (nesting too
		// deep, a frame cut short), so that the reply refers to it.
		return nil, nil, &DecodeError{ID: LeadingFrameID(data), Code: CodeInvalidRequest, Err: fmt.Errorf("invalid JSON: %w", err)}
	}
	fail := func(err error) (*Frame, map[string]bool, error) {
		// Only a failure pays for finding the id a second time.
		return nil, nil, &DecodeError{ID: frameID(data), Code: CodeInvalidRequest, Err: err}
	}
	keys, err := objectKeys(data)
	if err != nil {
		return fail(err)
	}
	if err := checkKeys(keys, frameFields, frameRequired...); err != nil {
		return fail(err)
	}
	var fj frameJSON
	if err := json.Unmarshal(data, &fj); err != nil {
		return fail(err)
	}
	if fj.V != Version {
		return fail(fmt.Errorf("v: unsupported protocol version %d (want %d)", fj.V, Version))
	}
	msg, err := decodeMsg(fj.Msg)
	if err != nil {
		return fail(fmt.Errorf("msg: %w", err))
	}
	return &Frame{V: fj.V, Seq: fj.Seq, ID: fj.ID, Ref: fj.Ref, Msg: msg}, keys, nil
}

// frameID returns the string value of the top-level "id" of a valid JSON
// document, matched exactly (not case-folded), or "" when there is none,
// it is not a string, or it appears twice.
func frameID(data []byte) string {
	id, found, ok := "", false, true
	whole := eachMember(data, func(key string, v json.RawMessage) bool {
		if key != "id" {
			return true
		}
		if found || json.Unmarshal(v, &id) != nil {
			ok = false
			return false
		}
		found = true
		return true
	})
	if !whole || !ok {
		return ""
	}
	return id
}

// LeadingFrameID returns the string value of the top-level "id" of a
// frame of which only prefix was read (one too large to read whole), or
// "" when no top-level "id" with a string value comes before the cut. A
// reply to such a frame can so carry its ref when the peer put the id
// first, as the spec's examples do.
func LeadingFrameID(prefix []byte) string {
	var id string
	eachMember(prefix, func(key string, v json.RawMessage) bool {
		if key != "id" {
			return true
		}
		if json.Unmarshal(v, &id) != nil {
			id = ""
		}
		return false
	})
	return id
}

// eachMember calls visit with each top-level member of the JSON object
// in data, in order, until visit returns false. It reports whether every
// member was read: false when data is not an object, or is cut short or
// not JSON before the member visit stopped at, or visit stopped.
func eachMember(data []byte, visit func(key string, v json.RawMessage) bool) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return false
		}
		if k, _ := tok.(string); !visit(k, v) {
			return false
		}
	}
	return true
}

// DecodeMessage decodes one message strictly by its "type".
func DecodeMessage(data []byte) (Message, error) {
	if m, ok := decodeMessageFast(data); ok { // decodefast.go
		return m, nil
	}
	return decodeMessageStrict(data)
}

// decodeMessageStrict is DecodeMessage without its fast path.
func decodeMessageStrict(data []byte) (Message, error) {
	var head struct {
		Type *Type `json:"type"`
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return nil, fmt.Errorf("want a JSON object")
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, err
	}
	if head.Type == nil {
		return nil, fmt.Errorf("type: missing")
	}
	spec, ok := messageSpecs[*head.Type]
	if !ok {
		return nil, fmt.Errorf("type: unknown message type %q", *head.Type)
	}
	if err := checkFields(data, spec.allowed, spec.required...); err != nil {
		return nil, fmt.Errorf("%s: %w", *head.Type, err)
	}
	m := spec.new()
	if err := json.Unmarshal(data, m); err != nil {
		return nil, fmt.Errorf("%s: %w", *head.Type, err)
	}
	return m, nil
}
