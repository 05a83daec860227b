package server

import (
	"encoding/binary"
	"encoding/json"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// A finished call's record as callTimes keeps it: its strings, each a
// uvarint length and its bytes, and its points, each a kind and the
// nanoseconds since the point before (the first: since callTimes' base),
// a varint — bytes, nothing for the collector to follow. In order: the call id (first, so
// that a lookup reads only it), name, invoker, the points' count and the
// points, decision, decidedBy, then the outcome: 0 none, 1 a value (its
// JSON), 2 an error (code, message), 3 a value left out (its size, a
// uvarint: maxKeptText).
const (
	outcomeNone    = 0
	outcomeValue   = 1
	outcomeError   = 2
	outcomeLeftOut = 3
)

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// appendCall appends a finished call's record to b, its points relative
// to base.
func appendCall(b []byte, c *callRecord, base int64) []byte {
	b = appendString(b, c.id)
	b = appendString(b, c.name)
	b = appendString(b, string(c.invoker))
	b = binary.AppendUvarint(b, uint64(len(c.points)))
	prev := base
	for _, p := range c.points {
		b = append(b, byte(p.kind))
		b = binary.AppendVarint(b, p.at-prev)
		prev = p.at
	}
	b = appendString(b, string(c.decision))
	b = appendString(b, c.decidedBy)
	switch o := c.outcome; {
	case o == nil && c.outcomeBytes > 0:
		b = binary.AppendUvarint(append(b, outcomeLeftOut), uint64(c.outcomeBytes))
	case o == nil:
		b = append(b, outcomeNone)
	case o.Err != nil:
		b = appendString(appendString(append(b, outcomeError), string(o.Err.Code)), o.Err.Message)
	default:
		b = appendString(append(b, outcomeValue), string(o.Value))
	}
	return b
}

// callDecoder reads an encoded record; it only ever reads what
// appendCall wrote, in this process.
type callDecoder struct{ b []byte }

func (d *callDecoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	d.b = d.b[n:]
	return v
}

func (d *callDecoder) varint() int64 {
	v, n := binary.Varint(d.b)
	d.b = d.b[n:]
	return v
}

func (d *callDecoder) string() string {
	n := d.uvarint()
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// isCall reports whether an encoded record is call id's.
func isCall(b []byte, id string) bool {
	d := callDecoder{b}
	n := d.uvarint()
	return string(d.b[:n]) == id // compared only: the conversion does not allocate
}

// decodeCall decodes a record appendCall wrote with base.
func decodeCall(b []byte, base int64) *callRecord {
	d := callDecoder{b}
	c := &callRecord{id: d.string(), name: d.string(), invoker: protocol.Audience(d.string())}
	c.points = make([]callPoint, d.uvarint())
	at := base
	for i := range c.points {
		kind := session.CallEventKind(d.b[0])
		d.b = d.b[1:]
		at += d.varint()
		c.points[i] = callPoint{kind, at}
	}
	c.decision, c.decidedBy = protocol.Decision(d.string()), d.string()
	kind := d.b[0]
	d.b = d.b[1:]
	switch kind {
	case outcomeValue:
		c.outcome = &protocol.Outcome{Value: json.RawMessage(d.string())}
	case outcomeError:
		c.outcome = &protocol.Outcome{Err: &protocol.Error{Code: protocol.Code(d.string()), Message: d.string()}}
	case outcomeLeftOut:
		c.outcomeBytes = int(d.uvarint())
	}
	return c
}
