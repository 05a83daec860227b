package server

import "sync"

// buffers lends byte buffers to connections for as long as one frame is
// read or one batch is written, so that an idle connection holds none:
// ten thousand idle clients would otherwise keep ten thousand read,
// encoding and cork buffers of a few kilobytes each (measured: 8 KB a
// connection, a quarter of issue 21's bound). A buffer that grew past
// keptBuffer (a large snapshot, a megabyte frame) is left to the
// collector instead of being pooled.
var buffers = bufferPool{max: keptBuffer}

// keptBuffer is the largest buffer returned to the pool: a round trip's
// frames fit many times over.
const keptBuffer = 16 << 10

type bufferPool struct {
	p   sync.Pool // of *[]byte
	max int
}

// get returns an empty buffer.
func (bp *bufferPool) get() *[]byte {
	if b, ok := bp.p.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, 1024)
	return &b
}

// put returns b, holding data (which may have grown from *b) for reuse;
// the caller keeps no reference to either.
func (bp *bufferPool) put(b *[]byte, data []byte) {
	if b == nil || cap(data) > bp.max {
		return
	}
	*b = data[:0]
	bp.p.Put(b)
}
