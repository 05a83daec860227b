package server

import (
	"github.com/klauspost/compress/s2"
)

// A session's timings are kept compressed once a chunk is full: its
// records repeat what a session's calls share — the call-id prefix, the
// capability names, the invoker, outcomes alike — and S2 (the module
// nats-server already brings, and links for its own compression) takes
// a full 4 KiB chunk of them to about 40% (TestCallTimesMemory). The
// chunk being filled stays as it is. A chunk is compressed once, when
// the next one starts (about 14 µs, once in some 60 calls of a session),
// and read only when the console asks for a call (callTimes.get). S2 is
// stateless: nothing is shared between sessions, nothing waits for
// another. docs/RATIONALE.md has the measurements against zstd.

// callChunk is a run of finished calls' records (appendCall), each after
// its length as a uvarint.
type callChunk struct {
	b      []byte // the records; once packed, an S2 block of them
	calls  int
	packed bool
}

// pack compresses a full chunk, keeping it as it is when that would not
// make it smaller. The packed chunk is a slice of its exact size: the
// 4 KiB it was filled in goes to the collector.
func (c *callChunk) pack() {
	if c.packed || len(c.b) == 0 {
		return
	}
	buf := scratch.Get().(*[]byte)
	z := s2.EncodeBetter((*buf)[:cap(*buf)], c.b)
	if len(z) < len(c.b) {
		c.b, c.packed = append([]byte(nil), z...), true
	}
	if cap(z) <= 2*callChunkBytes {
		*buf = z[:0]
		scratch.Put(buf)
	}
}

// records returns the chunk's records, decompressing a packed chunk into
// into (or a larger buffer when it does not fit). It fails only if a
// packed chunk does not decode, which is this process's own bytes and a
// bug.
func (c *callChunk) records(into []byte) ([]byte, error) {
	if !c.packed {
		return c.b, nil
	}
	return s2.Decode(into[:cap(into)], c.b)
}
