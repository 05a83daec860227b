package proc

import (
	"io"
	"slices"
)

// discardSize is the read size once a stream is past its cap.
const discardSize = 32 << 10

// capture is what was read from one output stream.
type capture struct {
	data      []byte
	truncated bool
}

// drain reads r to its end or first error, keeping at most max bytes. The
// rest is read and discarded rather than left in the pipe, so that a child
// writing more than the cap never blocks on a full pipe; it only ends at
// its exit or its deadline.
func drain(r io.Reader, max int64) capture {
	c := capture{data: make([]byte, 0, min(max, 512))}
	var discard []byte
	for {
		if int64(len(c.data)) < max {
			if len(c.data) == cap(c.data) {
				c.data = slices.Grow(c.data, int(min(int64(2*cap(c.data)), max))-len(c.data))
			}
			end := int(min(int64(cap(c.data)), max))
			n, err := r.Read(c.data[len(c.data):end])
			c.data = c.data[:len(c.data)+n]
			if err != nil {
				return c
			}
			continue
		}
		if discard == nil {
			discard = make([]byte, discardSize)
		}
		n, err := r.Read(discard)
		if n > 0 {
			c.truncated = true
		}
		if err != nil {
			return c
		}
	}
}
