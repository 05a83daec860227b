package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// Connection limits.
const (
	// replyQueue bounds the replies waiting to be written to a peer; while
	// it is full the connection reads no further frame (send).
	replyQueue = 64
	// hardMessageLimit closes a connection whose message is absurdly large;
	// anything above protocol.MaxFrameBytes and below this is read,
	// discarded and answered with an error.
	hardMessageLimit = 64 << 20
)

// serveWS runs one WebSocket connection of peer p to session s until the
// peer goes away or ctx ends. Query parameter "after" resumes from a seq;
// without it the peer gets a snapshot first.
func (srv *Server) serveWS(ctx context.Context, w http.ResponseWriter, r *http.Request, s *session.Session, p session.Peer, delivered *atomic.Uint64) {
	var cw *corkedWriter
	if _, ok := w.(http.Hijacker); ok {
		cw = &corkedWriter{ResponseWriter: w}
		w = cw
	}
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: srv.opts.OriginPatterns})
	if err != nil {
		return // Accept wrote the HTTP error
	}
	conn.SetReadLimit(-1) // frames are bounded below, while reading, without buffering
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	c := &wsConn{srv: srv, s: s, peer: p, conn: conn, replies: make(chan *protocol.Frame, replyQueue), cancel: cancel, cork: cw.corkConn(),
		bucket: srv.opts.Manager.limits.frameLimiter(time.Now()), done: ctx.Done(), delivered: delivered,
		log: srv.log.With(slog.String("session", s.ID()), slog.String("peer", p.String()))}

	after, err := parseAfter(r.URL.Query().Get("after"))
	if err != nil {
		_ = conn.Close(websocket.StatusPolicyViolation, err.Error())
		return
	}
	srv.conns.add(p.Side, 1)
	defer srv.conns.add(p.Side, -1)
	s.Attach(p) // the session knows the peer is here to answer its calls
	defer s.Detach(p)
	c.fence = srv.opts.Manager.fenceOf(s) // cluster.go
	c.subs = make(chan *session.Subscription, 1)
	c.subs <- c.subscribe(after)
	// Reads and writes run without a context of their own (a context per
	// frame costs coder/websocket an AfterFunc, and a write timeout a
	// timer): the connection ends when ctx does, and each write is bounded
	// by its writer's watchdog.
	// The end of ctx aborts a blocked read or a write in flight, as a
	// context per call would; otherwise the connection is closed below with
	// a status and a reason (the close handshake), not dropped.
	var readerDone atomic.Bool
	stopClose := context.AfterFunc(ctx, func() {
		if code, why, ok := closeReason(context.Cause(ctx)); ok {
			// A stop, a delete or a move tells the peer why, with the close
			// handshake (which ends the blocked read): it reconnects — in
			// a cluster to the session's next owner — or not, for a deleted
			// session (shutdown.go, api_sessions.go, cluster.go).
			go func() { _ = conn.Close(code, why) }()
			return
		}
		if !readerDone.Load() || c.writing.Load() {
			_ = conn.CloseNow()
		}
	})
	writerDone := make(chan struct{})
	go func() { defer close(writerDone); c.writeLoop(ctx) }()
	c.readLoop(ctx)
	readerDone.Store(true)
	cancel(nil)
	<-writerDone
	stopClose()
	if p.Side == session.SideEnvironment {
		// An environment's tools cannot be called without it.
		c.deregisterOwned()
	}
	// A failed write closes the connection, which the reader may notice
	// first: the write's error is the real reason.
	reason := context.Cause(ctx)
	if werr, ok := c.writeErr.Load().(error); ok {
		reason = werr
	}
	if code, why, ok := closeReason(reason); ok {
		_ = conn.Close(code, why)
		return
	}
	if reason == nil || errors.Is(reason, context.Canceled) || isNormalClose(reason) {
		c.log.Debug("peer disconnected")
		_ = conn.Close(websocket.StatusNormalClosure, "")
	} else {
		c.log.Info("peer disconnected", slog.String("reason", reason.Error()))
		_ = conn.Close(websocket.StatusPolicyViolation, reason.Error())
	}
}

// StatusSessionDeleted closes the connections of a deleted session: a
// client does not reconnect on it (docs/protocol.md, "Connecting").
const StatusSessionDeleted websocket.StatusCode = 4404

// closeReason is the close code and reason of a connection the kernel
// ends on purpose, by its cause.
func closeReason(cause error) (websocket.StatusCode, string, bool) {
	if ce, ok := closeCause(cause); ok {
		// This node stops serving the session for the store's sake or
		// another node's (storefault.go): the cause carries both.
		return ce.code, ce.reason, true
	}
	switch {
	case errors.Is(cause, ErrStopping):
		return websocket.StatusGoingAway, "the node is stopping: reconnect", true
	case errors.Is(cause, ErrDeleted):
		return StatusSessionDeleted, "the session was deleted", true
	}
	return 0, "", false
}

// keptReadBuffer is the largest read buffer a connection keeps between
// frames; a larger frame's buffer is left to the collector.
const keptReadBuffer = 64 << 10

// readAll is io.ReadAll into b's spare capacity.
func readAll(b []byte, r io.Reader) ([]byte, error) {
	if cap(b) == 0 {
		b = make([]byte, 0, 1024)
	}
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				return b, nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // grow
		}
	}
}

// parseAfter reads the "after" parameter: empty means "snapshot, then live".
func parseAfter(v string) (*uint64, error) {
	if v == "" {
		return nil, nil
	}
	var n uint64
	if _, err := fmt.Sscan(v, &n); err != nil {
		return nil, fmt.Errorf("after=%q is not a seq", v)
	}
	return &n, nil
}

type wsConn struct {
	srv      *Server
	s        *session.Session
	peer     session.Peer
	conn     *websocket.Conn
	log      *slog.Logger
	replies  chan *protocol.Frame       // encoded by the writer
	enc      []byte                     // the writer's encoding buffer
	subs     chan *session.Subscription // a new subscription replaces the current one (resume)
	cancel   context.CancelCauseFunc
	writeErr atomic.Value // error: why the writer gave up, if it did
	bucket   *bucket      // frame rate (limits.go); nil: unlimited; reader only
	writing  atomic.Bool  // a write is in flight, or about to start
	cork     *corkConn    // batches the writer's frames into one write; nil: each frame is written alone

	// fence, in a cluster, is the session's journal: a peer is shown no
	// event and sent no reply the journal has not stored (cluster.go).
	fence *fencedJournal

	done      <-chan struct{} // the connection's end (its context's Done)
	delivered *atomic.Uint64  // the last seq of the log the writer has written (or filtered out)
}

// isNormalClose reports a peer closing the connection normally.
func isNormalClose(err error) bool {
	switch websocket.CloseStatus(err) {
	case websocket.StatusNormalClosure, websocket.StatusGoingAway:
		return true
	}
	return errors.Is(err, io.EOF)
}

// subscribe starts a subscription after seq, or — with no seq — one that
// begins with a snapshot of the session.
func (c *wsConn) subscribe(after *uint64) *session.Subscription {
	if after == nil {
		// Taken now, before the reader applies the peer's first command:
		// a snapshot taken later would fold that command's events into it.
		return c.s.SubscribeSnapshot()
	}
	return c.s.Subscribe(*after)
}

// readLoop decodes each frame and answers it; a bad frame gets an error
// reply and the connection stays usable.
func (c *wsConn) readLoop(ctx context.Context) {
	var lr io.LimitedReader
	var buf []byte
	for {
		typ, rd, err := c.conn.Reader(context.Background()) // ctx's end closes the connection
		if err != nil {
			if ctx.Err() == nil {
				c.cancel(fmt.Errorf("read: %w", err))
			}
			return
		}
		lr.R, lr.N = rd, protocol.MaxFrameBytes+1
		data, err := readAll(buf[:0], &lr)
		if cap(data) <= keptReadBuffer {
			buf = data // decoding copies what it keeps: the buffer serves the next frame
		}
		if err != nil {
			c.cancel(fmt.Errorf("read: %w", err))
			return
		}
		allowed := c.bucket.take(time.Now())
		if len(data) > protocol.MaxFrameBytes {
			n, _ := io.Copy(io.Discard, io.LimitReader(rd, hardMessageLimit))
			if n >= hardMessageLimit {
				c.cancel(fmt.Errorf("message larger than %d bytes", hardMessageLimit))
				return
			}
			c.reply(nil, protocol.Errorf(protocol.CodeTooLarge, "frame larger than %d bytes; nothing was applied", protocol.MaxFrameBytes))
			continue
		}
		if typ != websocket.MessageText {
			c.reply(nil, protocol.Errorf(protocol.CodeInvalidRequest, "binary messages are not frames: send JSON text"))
			continue
		}
		f, err := decodePeerFrame(data) // fastframe.go
		if !allowed {
			var de *protocol.DecodeError
			var id *string
			if f != nil {
				id = &f.ID
			} else if errors.As(err, &de) && de.ID != "" {
				id = &de.ID
			}
			c.reply(id, c.srv.opts.Manager.limits.rateError())
			continue
		}
		if err != nil {
			var de *protocol.DecodeError
			var id *string
			code := protocol.CodeInvalidRequest
			if errors.As(err, &de) {
				if de.ID != "" {
					id = &de.ID
				}
				if de.Code != "" {
					code = de.Code
				}
			}
			c.reply(id, protocol.Errorf(code, "%v", err))
			continue
		}
		if rs, ok := f.Msg.(*protocol.Resume); ok {
			after := rs.AfterSeq
			select {
			case c.subs <- c.subscribe(&after):
			default:
				c.reply(&f.ID, protocol.Errorf(protocol.CodeConflict, "a resume is already pending"))
				continue
			}
			c.reply(&f.ID, nil)
			continue
		}
		switch f.Msg.(type) {
		case *protocol.CapabilityRegister, *protocol.CapabilityInvoke, *protocol.TurnStart: // new work; results, decisions and endings go through
			if perr := c.srv.opts.Manager.Admit(c.s); perr != nil {
				c.reply(&f.ID, perr)
				continue
			}
		}
		c.send(c.s.HandleFrame(c.peer, f))
	}
}

// reply queues an ack (err nil) or an error reply to the frame id.
func (c *wsConn) reply(id *string, err *protocol.Error) {
	f := &protocol.Frame{V: protocol.Version, Seq: c.s.LastSeq()}
	if id != nil {
		f.Ref = *id
	}
	if err != nil {
		f.Msg = &protocol.ErrorReply{Code: err.Code, Message: err.Message}
	} else {
		f.Msg = &protocol.Ack{}
	}
	c.send(f)
}

func (c *wsConn) send(f *protocol.Frame) {
	// In a cluster, no reply before the journal has stored what it
	// acknowledges (cluster.go; keep this gate: TestClusterLoad).
	if c.fence != nil && !c.fence.admits(f) {
		c.cancel(c.fence.closeCause())
		return
	}
	select {
	case c.replies <- f:
	default:
		// The peer sends faster than its replies can be written: read no
		// further frame until the writer catches up, so that TCP pushes
		// back on the peer (a burst within FrameBurst always goes
		// through). A peer that stops reading altogether is disconnected by
		// the writer's watchdog after WriteTimeout.
		select {
		case c.replies <- f:
		case <-c.done:
		}
	}
}

// maxBatch bounds the frames the writer gathers into one socket write
// before it flushes them.
const maxBatch = 64

// closedChan is always ready.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// writeLoop writes replies and the session's events (filtered for the
// peer) until the connection ends. It reads the subscription itself — no
// goroutine between the session's log and the socket — and takes a waiting
// resume first, then replies, then events: a peer answering calls at speed
// never starves its own replies. Whatever is ready at once is written as
// one batch: the frames are encoded into the connection's buffer and leave
// in one write (see corkConn).
func (c *wsConn) writeLoop(ctx context.Context) {
	wd := c.newWatchdog()
	defer wd.t.Stop()
	var sub *session.Subscription
	defer func() {
		if sub != nil {
			sub.Close()
		}
	}()
	var wake <-chan struct{} = closedChan // gather at once: a snapshot may be waiting
	for {
		var first *protocol.Frame
		if wake != nil {
			// One yield before parking: the goroutine about to emit the
			// next event (a caller woken by the result just read) often
			// runs in it, and the writer then finds the event without a
			// park and a wake-up (~20 % of a round trip on 2 cores).
			runtime.Gosched()
		}
		select {
		case next := <-c.subs:
			if sub != nil {
				sub.Close()
			}
			sub = next
		case first = <-c.replies:
		case <-wake:
		case <-ctx.Done():
			return
		}
		var ok bool
		if wake, ok = c.writeBatch(ctx, wd, &sub, first); !ok {
			return
		}
	}
}

// writeBatch writes first, if set, and then everything that is ready —
// a new subscription, replies, events — up to maxBatch frames, as one
// batch. It returns the channel to wait on for more events (nil without a
// subscription; closedChan when the batch stopped at its bound), and false
// when the connection is done.
func (c *wsConn) writeBatch(ctx context.Context, wd *watchdog, subp **session.Subscription, first *protocol.Frame) (<-chan struct{}, bool) {
	if !c.beginBatch(ctx, wd) {
		return nil, false
	}
	n := 0
	if first != nil {
		if !c.writeReply(wd, first) {
			return nil, false
		}
		n++
	}
	var wake <-chan struct{}
	var read uint64 // the last seq read from the log in this batch
gather:
	for ; n < maxBatch; n++ {
		select {
		case next := <-c.subs:
			if *subp != nil {
				(*subp).Close()
			}
			*subp = next
			continue
		case f := <-c.replies:
			if !c.writeReply(wd, f) {
				return nil, false
			}
			continue
		default:
		}
		sub := *subp
		if sub == nil {
			break
		}
		for {
			ev, ok, w, err := sub.TryNext()
			switch {
			case err != nil: // closed: only this loop closes it
				*subp = nil
				break gather
			case !ok:
				wake = w
				break gather
			}
			read = ev.Seq
			if b := c.encodeEvent(ev); b != nil {
				if !c.writeFrame(wd, b) {
					return nil, false
				}
				continue gather
			}
			// Not for this peer: no frame, read on.
		}
	}
	if n >= maxBatch {
		wake = closedChan // more may be ready: the next batch starts at once
	}
	if !c.endBatch(wd) {
		return nil, false
	}
	if read > 0 && c.delivered != nil {
		c.delivered.Store(read)
	}
	return wake, true
}

// encodeEvent returns the frame of an event for the peer, in the
// writer's buffer (valid until the next encoding), or nil when the peer
// does not see it.
func (c *wsConn) encodeEvent(ev session.Event) []byte {
	// In a cluster, no event the journal has not stored; the connection
	// ends (cluster.go; keep this gate: TestClusterLoad).
	if c.fence != nil && !c.fence.shows(ev.Seq) {
		c.cancel(c.fence.closeCause())
		return nil
	}
	if snap, ok := ev.Msg.(*protocol.Snapshot); ok {
		ev.Msg = filterSnapshot(c.s, c.peer, snap)
	} else if !visibleTo(c.peer, ev) {
		return nil
	}
	b, err := c.encode(&protocol.Frame{Seq: ev.Seq, Msg: ev.Msg})
	if err != nil {
		c.log.Error("encode event", slog.String("error", err.Error()))
		return nil
	}
	return b
}

// writeReply encodes and writes a reply; one that does not encode is
// logged and skipped.
func (c *wsConn) writeReply(wd *watchdog, f *protocol.Frame) bool {
	b, err := c.encode(f)
	if err != nil {
		c.log.Error("encode reply", slog.String("error", err.Error()))
		return true
	}
	return c.writeFrame(wd, b)
}

// encode encodes f into the writer's buffer (protocol.AppendFrame).
func (c *wsConn) encode(f *protocol.Frame) ([]byte, error) {
	b, err := protocol.AppendFrame(c.enc[:0], f)
	if cap(b) <= keptWriteBuffer {
		c.enc = b
	}
	return b, err
}

// watchdog bounds the writer's writes by Options.WriteTimeout: one
// timer, reset per write, instead of a context and a timer per frame.
type watchdog struct {
	t       *time.Timer
	writing atomic.Bool
	fired   atomic.Bool
}

func (c *wsConn) newWatchdog() *watchdog {
	wd := &watchdog{}
	wd.t = time.AfterFunc(time.Hour, func() {
		if wd.writing.Load() {
			wd.fired.Store(true)
			_ = c.conn.CloseNow() // the stuck write returns
		}
	})
	wd.t.Stop()
	return wd
}

// beginBatch starts a batch of writes: the connection is marked writing
// (so that the end of ctx aborts it), corked, and the watchdog armed.
func (c *wsConn) beginBatch(ctx context.Context, wd *watchdog) bool {
	// Set before ctx is checked: an end of ctx either sees the write (and
	// aborts it) or comes before the check (and the write does not start).
	c.writing.Store(true)
	if ctx.Err() != nil {
		c.writing.Store(false)
		return false
	}
	wd.writing.Store(true)
	wd.t.Reset(c.srv.opts.WriteTimeout)
	c.cork.cork()
	return true
}

// writeFrame writes one frame of the batch (into the cork's buffer, unless
// the batch has outgrown it).
func (c *wsConn) writeFrame(wd *watchdog, b []byte) bool {
	if err := c.conn.Write(context.Background(), websocket.MessageText, b); err != nil {
		c.writeFailed(wd, err)
		return false
	}
	return true
}

// endBatch sends what the batch held back and disarms the watchdog.
func (c *wsConn) endBatch(wd *watchdog) bool {
	err := c.cork.flush()
	wd.t.Stop()
	wd.writing.Store(false)
	c.writing.Store(false)
	if err != nil {
		c.writeFailed(wd, fmt.Errorf("failed to write frames: %w", err))
		return false
	}
	return true
}

func (c *wsConn) writeFailed(wd *watchdog, err error) {
	wd.t.Stop()
	c.cork.drop()
	if wd.fired.Load() { // our deadline, not a closing connection
		c.writeErr.Store(fmt.Errorf("write: the peer has not read for %s: %w", c.srv.opts.WriteTimeout, err))
	}
	c.cancel(fmt.Errorf("write: %w", err))
	wd.writing.Store(false)
	c.writing.Store(false)
}

// visibleTo decides which events a peer sees. The client and operators see
// everything; an app or an environment sees registrations and the events of
// the calls made to capabilities it owned when the call was made — never
// those of calls made to an earlier owner of the same name — and nothing of
// anyone else's calls.
func visibleTo(p session.Peer, ev session.Event) bool {
	if p.Side == session.SideClient || p.Side == session.SideOperator {
		return true
	}
	switch ev.Msg.(type) {
	case *protocol.CapabilityInvoked, *protocol.RenderInvoked, *protocol.ApprovalRequested,
		*protocol.ApprovalDecided, *protocol.ApprovalWithdrawn, *protocol.CapabilityOutcome:
		return ev.Owner.Side != "" && ev.Owner.Same(p)
	}
	return true
}

// filterSnapshot narrows a snapshot for an app or environment: only the
// pending calls made to capabilities it owns (see visibleTo).
func filterSnapshot(s *session.Session, p session.Peer, snap *protocol.Snapshot) *protocol.Snapshot {
	if p.Side == session.SideClient || p.Side == session.SideOperator {
		return snap
	}
	out := *snap
	out.PendingCalls = []protocol.PendingCall{}
	for _, c := range snap.PendingCalls {
		if owner, ok := s.CallOwner(c.CallID); ok && owner.Same(p) {
			out.PendingCalls = append(out.PendingCalls, c)
		}
	}
	return &out
}

// deregisterOwned removes what the connection's peer registered.
func (c *wsConn) deregisterOwned() {
	var names []string
	for _, cp := range c.s.Snapshot().Capabilities {
		if owner, ok := c.s.Owner(cp.Name); ok && owner.Same(c.peer) {
			names = append(names, cp.Name)
		}
	}
	if len(names) > 0 {
		_ = c.s.Deregister(c.peer, names...)
	}
}
