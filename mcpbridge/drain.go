package mcpbridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"
)

// drainingIO sits between a stdio transport and its streams so that the
// end of input does not drop replies: the SDK closes the connection as soon
// as its reader returns io.EOF, and a reply still being computed is then
// never written (`printf '…' | brain mcp` printed nothing). The reader
// counts the requests (messages with a method and an id) that pass
// through, the writer counts the replies (an id and no method); at the end
// of input the reader holds io.EOF back until every request read has been
// answered, or ctx is done.
type drainingIO struct {
	ctx context.Context
	in  *bufio.Reader
	out io.Writer

	mu      sync.Mutex
	pending map[string]int // request id → requests outstanding with it
	idle    chan struct{}  // closed and replaced whenever pending empties
	partial []byte         // output written after its last newline
	buf     []byte         // the rest of the current input line
}

func newDrainingIO(ctx context.Context, in io.Reader, out io.Writer) *drainingIO {
	return &drainingIO{ctx: ctx, in: bufio.NewReaderSize(in, 64<<10), out: out, pending: map[string]int{}, idle: make(chan struct{})}
}

// rpcHead is what drainingIO reads of a JSON-RPC message.
type rpcHead struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

// Read returns input a line at a time (lines of any length, in pieces),
// counting each request; at the end of input it waits for the replies.
func (d *drainingIO) Read(p []byte) (int, error) {
	if len(d.buf) == 0 {
		line, err := d.in.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			err = nil // a long line: pass it on in pieces, it is counted when complete
		}
		if len(line) > 0 {
			d.buf = append(d.buf[:0], line...)
			if line[len(line)-1] == '\n' || err != nil {
				d.countRequest(line)
			}
		}
		if len(d.buf) == 0 && err != nil {
			if err == io.EOF {
				d.waitIdle()
			}
			return 0, err
		}
	}
	n := copy(p, d.buf)
	d.buf = d.buf[n:]
	return n, nil
}

// countRequest counts a complete line that is a request. (A long line
// split by ReadSlice is counted by its last piece only, which does not
// parse: such requests are not waited for.)
func (d *drainingIO) countRequest(line []byte) {
	var h rpcHead
	if json.Unmarshal(bytes.TrimSpace(line), &h) != nil || h.Method == "" || len(h.ID) == 0 || string(h.ID) == "null" {
		return
	}
	d.mu.Lock()
	d.pending[string(h.ID)]++
	d.mu.Unlock()
}

// waitIdle blocks until no request is outstanding or ctx is done.
func (d *drainingIO) waitIdle() {
	for {
		d.mu.Lock()
		n, idle := len(d.pending), d.idle
		d.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-idle:
		case <-d.ctx.Done():
			return
		}
	}
}

// Write passes output on, and counts each complete line that is a reply.
func (d *drainingIO) Write(p []byte) (int, error) {
	n, err := d.out.Write(p)
	d.mu.Lock()
	defer d.mu.Unlock()
	data := p[:n]
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			d.partial = append(d.partial, data...)
			break
		}
		line := data[:i]
		if len(d.partial) > 0 {
			line = append(d.partial, line...)
			d.partial = d.partial[:0]
		}
		d.countReplyLocked(line)
		data = data[i+1:]
	}
	return n, err
}

func (d *drainingIO) countReplyLocked(line []byte) {
	var h rpcHead
	if json.Unmarshal(bytes.TrimSpace(line), &h) != nil || h.Method != "" || len(h.ID) == 0 {
		return
	}
	id := string(h.ID)
	if d.pending[id] == 0 {
		return
	}
	if d.pending[id]--; d.pending[id] == 0 {
		delete(d.pending, id)
	}
	if len(d.pending) == 0 {
		close(d.idle)
		d.idle = make(chan struct{})
	}
}
