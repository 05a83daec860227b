package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/brainrt/brain/internal/textcut"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// Connection limits.
const (
	// replyQueue bounds the replies waiting to be written to a peer; while
	// it is full the connection reads no further frame (send).
	replyQueue = 16
	// hardMessageLimit closes a connection whose message is absurdly large;
	// anything above protocol.MaxFrameBytes and below this is read,
	// discarded and answered with an error.
	hardMessageLimit = 64 << 20
)

// serveWS accepts one WebSocket connection of peer p to session s and
// hands it to goroutines of its own (run): it returns as soon as the
// connection is open, so that nothing of the HTTP server's request — its
// goroutine and stack, its buffers, the request's headers — stays with a
// connection for its lifetime. Query parameter "after" resumes from a
// seq; without it the peer gets a snapshot first.
func (srv *Server) serveWS(w http.ResponseWriter, r *http.Request, s *session.Session, p session.Peer) {
	var cw *corkedWriter
	if _, ok := w.(http.Hijacker); ok {
		cw = &corkedWriter{ResponseWriter: w}
		w = cw
	}
	// Accept checks a browser's Origin against r.Host: a forwarded
	// handshake's is this node's, not the one the browser reached.
	r.Host = clientHost(r)
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: srv.opts.OriginPatterns})
	if err != nil {
		return // Accept wrote the HTTP error
	}
	conn.SetReadLimit(-1) // frames are bounded below, while reading, without buffering
	after, err := parseAfter(r.URL.Query().Get("after"))
	if err != nil {
		_ = conn.Close(websocket.StatusPolicyViolation, err.Error())
		return
	}
	c := &wsConn{srv: srv, s: s, peer: p, conn: conn, replies: make(chan *protocol.Frame, replyQueue), cork: cw.corkConn(),
		bucket: srv.opts.Manager.limits.frameLimiter(time.Now())}
	c.wakeFn = c.wake
	// The connection outlives the request: its context is not the
	// request's (which ends when this handler returns) but the manager's
	// record of it, which holds the session and which a delete, a move
	// or a stop ends (api_sessions.go).
	ctx, cancel, done := srv.opts.Manager.connect(context.WithoutCancel(r.Context()), s.ID(), p.Side, &c.delivered)
	if end := connEnd(r.Context()); end != nil { // a console sign-in's or a token's end (conn_end.go)
		release, closed := endWith(end, cancel), done
		done = func() { release(); closed() }
	}
	// Set up here, on the request's goroutine, which ends in a moment: a
	// snapshot and a subscription take stack the connection's own
	// goroutine would keep for its lifetime (see run).
	c.open(ctx, cancel, after, done)
	go c.run()
}

// run serves the opened connection until the peer goes away or ctx ends
// (cancel ends it), then calls done.
//
// Its goroutine spends an idle connection's life waiting for the next
// frame. It starts with a small stack (2 KiB), and the wait fits in it;
// once grown, a stack is only ever halved by the collector, when what the
// goroutine uses while parked is under a quarter of it — the wait uses
// about 600 bytes, so a stack grown to 4 KiB stays 4 KiB. So this
// goroutine does as little as it can: the connection is set up before it
// starts (serveWS), its first frames are read on a shared reader
// (readFrameWhere), and the wait is here, under as few and as small frames
// as can be — reading a frame and ending are calls of their own, whose
// frames are gone while it waits (idlewait.go; TestIdleConnectionStack
// and TestConnectBurstStack hold the bounds).
func (c *wsConn) run() {
	for {
		if c.cork.waitReadable() {
			c.woke = sinceStart()
		}
		if !c.readFrameWhere() {
			break
		}
	}
	c.end()
}

// readFrameWhere reads and applies the next frame on the reader's own
// goroutine, or, within handOffFor of the peer's last idle spell, on one
// of the server's shared frame readers, the reader waiting. Why: at
// thousands of mostly idle connections, each frame meets a reader that
// has not run since the collector's last cycle began, and a goroutine's
// first allocation in a cycle costs it at least 64 KiB of marking; a
// shared reader, the one idle last, has paid already (docs/RATIONALE.md,
// "Why call runners are shared…"). A busy connection, whose peer is
// never idle that long, reads on its own goroutine and pays no hand-off.
//
// A connection's first frame — its peer's registration, usually — is
// read on a shared reader too, however late it comes (woke is justOpened
// until then, on plain TCP: see open), and so are the frames within
// handOffFor of it: reading and applying a frame grows a stack to 4 KiB
// and more, which the reader's goroutine would keep (see run).
func (c *wsConn) readFrameWhere() bool {
	if c.woke == justOpened {
		c.woke = sinceStart()
	} else if sinceStart()-c.woke >= handOffFor.get() {
		return c.readFrame()
	}
	c.handed.Add(1)
	c.srv.frames.Submit(c)
	c.handed.Wait() // nothing allocated: the WaitGroup is the connection's
	return c.handedOK
}

// readHandedFrame is the shared frame readers' job (readFrameWhere).
func readHandedFrame(c *wsConn) {
	c.handedOK = c.readFrame()
	c.handed.Done()
}

// idleWait is how long a peer has not sent anything for its connection to
// count as idle, and handOffFor how long after that its frames are read
// on a shared reader (readFrameWhere): a wait that long is not a busy
// peer's gap between frames (tens of microseconds), and the window covers
// an exchange that began after it — a call, and the result the peer sends
// back a millisecond later.
const idleWait = 2 * time.Millisecond

// handOffFor: see idleWait.
var handOffFor = newTunable(100 * time.Millisecond)

// justOpened is a connection's woke until its first frame (readFrameWhere).
const justOpened time.Duration = -1

// processStart is the origin of sinceStart.
var processStart = time.Now()

// sinceStart is the time since the process started, on the monotonic
// clock: a connection keeps an 8-byte instant instead of a time.Time.
func sinceStart() time.Duration { return time.Since(processStart) }

// open sets the connection up before run starts, on the request's
// goroutine: the connection is counted, attached to its session and
// subscribed to its events, and ctx's end will close it.
func (c *wsConn) open(ctx context.Context, cancel context.CancelCauseFunc, after *uint64, done func()) {
	srv, s, p, conn := c.srv, c.s, c.peer, c.conn
	c.ctx, c.cancel, c.done, c.closed = ctx, cancel, ctx.Done(), done
	srv.conns.add(p.Side, 1)
	s.Attach(p)                          // the session knows the peer is here to answer its calls
	c.fence = srv.opts.Manager.gateOf(s) // cluster.go
	c.subs = make(chan *session.Subscription, 1)
	c.sub = c.subscribe(after)
	c.snapshotDue = after == nil
	// Reads and writes run without a context of their own (a context per
	// frame costs coder/websocket an AfterFunc, and a write timeout a
	// timer): the connection ends when ctx does, and each write is bounded
	// by the write deadline its batch sets (beginBatch).
	// The end of ctx aborts a blocked read or a write in flight, as a
	// context per call would; otherwise the connection is closed below with
	// a status and a reason (the close handshake), not dropped.
	c.stopClose = context.AfterFunc(ctx, func() {
		if code, why, ok := closeReason(context.Cause(ctx)); ok {
			// A stop, a delete or a move tells the peer why, with the close
			// handshake (which ends the blocked read): it reconnects — in
			// a cluster to the session's next owner — or not, for a deleted
			// session (shutdown.go, api_sessions.go, cluster.go).
			go c.cork.closing(func() { _ = conn.Close(code, why) })
			return
		}
		if !c.readerDone.Load() || c.writing.Load() {
			_ = conn.CloseNow()
		}
	})
	c.kick() // the snapshot, or the events after "after"
	if c.cork.waits() {
		// The first frame goes to a shared reader once it has begun to
		// arrive; where the reader cannot wait for that (TLS), a shared
		// reader would wait for it instead, for as long as the peer likes.
		c.woke = justOpened
	}
}

// end is run's end, once the reader has stopped: the writers stop, the
// subscriptions close, the peer leaves the session and is told why.
func (c *wsConn) end() {
	srv, s, p, conn, ctx := c.srv, c.s, c.peer, c.conn, c.ctx
	defer c.closed()
	defer c.cancel(nil)
	defer srv.conns.add(p.Side, -1)
	defer s.Detach(p)
	c.readerDone.Store(true)
	c.cancel(nil)
	c.endWriters()
	if c.sub != nil { // nil once closed (writeBatch)
		c.sub.Close()
	}
	select {
	case sub := <-c.subs:
		sub.Close()
	default:
	}
	c.stopClose()
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
		c.logger().Debug("peer disconnected")
		_ = conn.Close(websocket.StatusNormalClosure, "")
	} else {
		c.logger().Info("peer disconnected", slog.String("reason", reason.Error()))
		_ = conn.Close(websocket.StatusPolicyViolation, peerCloseReason(reason))
	}
}

// maxCloseReason is the most a close frame's reason may hold (RFC 6455
// 5.5: 125 bytes of payload, 2 of them the code); coder/websocket sends
// a longer one as 1011 without any.
const maxCloseReason = 123

// peerCloseReason is the reason a close frame gives a peer whose own
// doing ended its connection (a frame it must not send, a message it did
// not finish, replies it did not read): the cause, cut to fit, or for a
// message that did not arrive in time the sentence docs/protocol.md
// gives.
func peerCloseReason(cause error) string {
	if errors.Is(cause, errFrameIncomplete) {
		return fmt.Sprintf("a frame was begun and not completed within %s", frameReadTimeout.get())
	}
	return textcut.Cut(cause.Error(), maxCloseReason-len(textcut.Ellipsis))
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
	srv        *Server
	s          *session.Session
	peer       session.Peer
	conn       *websocket.Conn
	replies    chan *protocol.Frame       // encoded by the writer
	enc        *[]byte                    // the writer's encoding buffer, borrowed for a batch (buffers.go)
	subs       chan *session.Subscription // a new subscription replaces sub (resume)
	sub        *session.Subscription      // the session's events for the peer; the running writer's (nil once closed)
	ctx        context.Context            // the connection's: its end ends the connection
	cancel     context.CancelCauseFunc
	closed     func()           // the manager's: the connection has ended (connect)
	stopClose  func() bool      // stops ctx's end from closing the connection (open)
	readerDone atomic.Bool      // the reader has stopped
	writeErr   atomic.Value     // error: why the writer gave up, if it did
	bucket     *bucket          // frame rate (limits.go); nil: unlimited; reader only
	frame      io.LimitedReader // the frame being read, bounded (readFrame; reader only)
	writing    atomic.Bool      // a write is in flight, or about to start
	cork       *corkConn        // batches the writer's frames into one write; nil: each frame is written alone

	// woke is when the reader last woke from the peer's idle spell
	// (sinceStart), or justOpened; handed and handedOK carry a frame read
	// on a shared reader (readFrameWhere). Reader only (and open, before
	// the reader starts).
	woke     time.Duration
	handed   sync.WaitGroup
	handedOK bool

	// The writer runs only while there is something to write (see kick):
	// an idle connection keeps its reader's goroutine alone.
	writer atomic.Int32 // writerIdle, writerRunning or writerKicked
	wakeFn func()       // c.wake, made once: what the session calls on its next event
	wmu    sync.Mutex   // guards ended, and writers.Add
	ended  bool         // the connection ended: no writer starts any more
	// snapshotDue: the subscription begins with a snapshot the writer has
	// not written yet, which goes before any reply (writeBatch). Set by
	// open before the writer starts; the writer's after that.
	snapshotDue bool
	writers     sync.WaitGroup

	// fence is the session's journal: a peer is shown no event and sent
	// no reply the journal has not stored (cluster.go, journalGate); nil
	// without a store.
	fence journalGate

	done      <-chan struct{} // the connection's end (its context's Done)
	delivered atomic.Uint64   // the last seq of the log the writer has written (or filtered out)
}

// logger is the connection's logger, made when something is logged (an
// idle connection keeps no logger of its own).
func (c *wsConn) logger() *slog.Logger {
	return c.srv.log.With(slog.String("session", c.s.ID()), slog.String("peer", c.peer.String()))
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
	var sub *session.Subscription
	if after == nil {
		// Taken now, before the reader applies the peer's first command:
		// a snapshot taken later would fold that command's events into it.
		sub = c.s.SubscribeSnapshot()
	} else {
		sub = c.s.Subscribe(*after)
	}
	if c.peer.Side != session.SideClient && c.peer.Side != session.SideOperator {
		// An app or environment sees its own calls' events only
		// (visibleTo), by their owner, which events read back from the
		// journal do not carry: behind what the session holds in memory,
		// it gets a snapshot — its pending calls — as it always has past
		// the log.
		sub.SnapshotWhenBehind()
	}
	return sub
}

// readerEnds ends the connection from its reader, for cause: the reader
// stops, so ctx's end need not drop the connection to stop it (open's
// AfterFunc), and end closes it with the handshake, telling the peer why
// (peerCloseReason). Cancelling first, the AfterFunc could drop the
// connection before end's close frame, and the peer saw only the
// connection end.
func (c *wsConn) readerEnds(cause error) {
	c.readerDone.Store(true)
	c.cancel(cause)
}

// readFrame reads, decodes and answers the peer's next frame, and reports
// whether the connection goes on: a bad frame gets an error reply and
// the connection stays usable.
func (c *wsConn) readFrame() bool {
	// Waiting for a frame holds no buffer: one is borrowed once a frame
	// has begun, and given back when it is decoded (decoding copies what
	// it keeps).
	typ, rd, err := c.conn.Reader(context.Background()) // ctx's end closes the connection
	if err != nil {
		if c.ctx.Err() == nil {
			c.readerEnds(readError(err))
		}
		return false
	}
	lr := &c.frame
	lr.R, lr.N = rd, protocol.MaxFrameBytes+1
	buf := buffers.get()
	data, err := readAll(*buf, lr)
	if err != nil {
		buffers.put(buf, data)
		c.readerEnds(readError(err))
		return false
	}
	allowed := c.bucket.take(time.Now())
	if len(data) > protocol.MaxFrameBytes {
		id := protocol.LeadingFrameID(data)
		buffers.put(buf, data)
		n, err := io.Copy(io.Discard, io.LimitReader(rd, hardMessageLimit))
		if err != nil {
			c.readerEnds(readError(err))
			return false
		}
		if n >= hardMessageLimit {
			c.readerEnds(fmt.Errorf("message larger than %d bytes", hardMessageLimit))
			return false
		}
		var ref *string
		if id != "" {
			ref = &id
		}
		c.reply(ref, protocol.Errorf(protocol.CodeTooLarge, "frame larger than %d bytes; nothing was applied", protocol.MaxFrameBytes))
		return true
	}
	if typ != websocket.MessageText {
		buffers.put(buf, data)
		c.reply(nil, protocol.Errorf(protocol.CodeInvalidRequest, "binary messages are not frames: send JSON text"))
		return true
	}
	f, err := decodePeerFrame(data) // fastframe.go
	buffers.put(buf, data)
	if !allowed {
		var de *protocol.DecodeError
		var id *string
		if f != nil {
			id = &f.ID
		} else if errors.As(err, &de) && de.ID != "" {
			id = &de.ID
		}
		c.reply(id, c.srv.opts.Manager.limits.rateError())
		return true
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
		return true
	}
	if rs, ok := f.Msg.(*protocol.Resume); ok {
		after := rs.AfterSeq
		sub := c.subscribe(&after)
		select {
		case c.subs <- sub:
		default:
			sub.Close()
			c.reply(&f.ID, protocol.Errorf(protocol.CodeConflict, "a resume is already pending"))
			return true
		}
		c.reply(&f.ID, nil) // and kicks the writer, which takes the subscription first
		return true
	}
	switch f.Msg.(type) {
	case *protocol.CapabilityRegister, *protocol.CapabilityInvoke, *protocol.TurnStart: // new work; results, decisions and endings go through
		if perr := c.srv.opts.Manager.admitFrame(c.s); perr != nil {
			c.reply(&f.ID, perr)
			return true
		}
	}
	c.send(c.s.HandleFrame(c.peer, f))
	return true
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
	// No reply before the journal has stored what it acknowledges
	// (cluster.go, journalGate; keep this gate: TestClusterLoad,
	// TestSingleNodeJournalFailure).
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
		// the write deadline after WriteTimeout (beginBatch).
		c.kick()
		select {
		case c.replies <- f:
		case <-c.done:
			return
		}
	}
	c.kick()
}

// maxBatch bounds the frames the writer gathers into one socket write
// before it flushes them.
const maxBatch = 64

// closedChan is always ready.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// The writer's states.
const (
	writerIdle    = iota // no writer goroutine: the next kick starts one
	writerRunning        // a writer runs
	writerKicked         // a writer runs, and was kicked since it last looked for work
)

// kick tells the writer there may be something to write — a reply, a new
// subscription, or (called by the session, Subscription.Notify) an event —
// and starts a writer goroutine when none runs. It is quick and never
// blocks. Every kick writes the state (a compare-and-swap), so that a
// writer about to end observes it (park).
func (c *wsConn) kick() (started bool) {
	for {
		st := c.writer.Load()
		next := int32(writerKicked)
		if st == writerIdle {
			next = writerRunning
		}
		if c.writer.CompareAndSwap(st, next) {
			if st == writerIdle {
				c.startWriter()
			}
			return st == writerIdle
		}
	}
}

// wake is what the session calls on its next event (Subscription.Notify
// and TryNextOrNotify, with its lock held): a kick, and for a writer
// already running — which may be waiting for a reply — a nil reply, which
// wakes it without a channel made for the wait. It never blocks: with the
// replies full, the writer has work and reads the event after them.
func (c *wsConn) wake() {
	if !c.kick() {
		select {
		case c.replies <- nil:
		default:
		}
	}
}

func (c *wsConn) startWriter() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.ended {
		return // the connection is done: no writer (the state stays running, so none ever starts)
	}
	c.writers.Add(1)
	writersRunning.Add(1)
	go c.writeLoop()
}

// writerStarts, when set (tests only), runs as a writer starts, with the
// count of the replies it has waiting.
var writerStarts atomic.Pointer[func(replies func() int)]

// writersRunning counts the connections' writers running, for tests.
var writersRunning atomic.Int64

// endWriters waits for the running writer, if any, to end (the
// connection's end, which it sees) and lets no other start.
func (c *wsConn) endWriters() {
	c.wmu.Lock()
	c.ended = true
	c.wmu.Unlock()
	c.writers.Wait()
}

// writeLoop writes replies and the session's events (filtered for the
// peer) until there is nothing left to write for a whole idleTick, or the
// connection ends. It reads the subscription itself — no goroutine
// between the session's log and the socket — and takes a waiting resume
// first, then replies, then events: a peer answering calls at speed never
// starves its own replies. Whatever is ready at once is written as one
// batch: the frames are encoded into a buffer and leave in one write (see
// corkConn).
func (c *wsConn) writeLoop() {
	defer c.writers.Done()
	defer writersRunning.Add(-1)
	if h := writerStarts.Load(); h != nil {
		(*h)(func() int { return len(c.replies) })
	}
	now := true  // gather at once: whatever kicked it is waiting
	busy := true // wrote something since the last idle tick
	for {
		var first *protocol.Frame
		var ready <-chan struct{}
		if now {
			ready = closedChan
		}
		if now || c.sub != nil {
			// One yield before waiting: the goroutine about to emit the
			// next event (a caller woken by the result just read) often
			// runs in it, and the writer then finds the event without a
			// park and a wake-up (~20 % of a round trip on 2 cores).
			runtime.Gosched()
		}
		select {
		case next := <-c.subs:
			c.replaceSub(next)
		case first = <-c.replies: // a reply, or nil: an event was appended (wake)
		case <-ready:
		case <-c.done:
			return
		case <-idleTicks.next():
			if busy {
				busy = false
				continue
			}
			if c.park() {
				return
			}
			now = true
			continue
		}
		busy = true
		var ok bool
		if now, ok = c.writeBatch(first); !ok {
			return
		}
	}
}

// replaceSub makes next the connection's subscription.
func (c *wsConn) replaceSub(next *session.Subscription) {
	if c.sub != nil {
		c.sub.Close()
	}
	c.sub, c.snapshotDue = next, false
}

// park ends the writer when nothing is waiting to be written: it reports
// true when the writer must return, false when there is work (the writer
// goes on). Only the running writer calls it.
//
// A producer pushes its work and then kicks, and a kick always writes the
// state: if the kick came before the Swap below, the Swap observes it and
// the checks see the work; if it came between the Swap and the final
// compare-and-swap, that fails and the writer looks again; after it, the
// kick finds the writer idle and starts a new one.
func (c *wsConn) park() bool {
	for {
		c.writer.Swap(writerRunning)
		if len(c.replies) > 0 || len(c.subs) > 0 {
			return false
		}
		if c.sub != nil && !c.sub.Notify(c.wakeFn) {
			return false // an event is ready
		}
		if c.writer.CompareAndSwap(writerRunning, writerIdle) {
			return true
		}
	}
}

// writeBatch writes first, if set, and then everything that is ready —
// a new subscription, replies, events — up to maxBatch frames, as one
// batch. Caught up with the subscription's events, it arranges for the
// next one to wake the writer (wake). It returns more true when the batch
// stopped at its bound (the next starts at once), and ok false when the
// connection is done.
func (c *wsConn) writeBatch(first *protocol.Frame) (more, ok bool) {
	if !c.beginBatch() {
		return false, false
	}
	n := 0
	var read uint64 // the last seq read from the log in this batch
	if c.snapshotDue && c.sub != nil {
		// The peer's first frame is the snapshot, even when its first
		// command's reply is ready before the writer has run (a peer that
		// sends before it reads).
		c.snapshotDue = false
		if ev, ok, err := c.sub.TryNextOrNotify(c.wakeFn); err == nil && ok {
			read = ev.Seq
			if b := c.encodeEvent(ev); b != nil {
				if !c.writeFrame(b) {
					return false, false
				}
				n++
			}
		}
	}
	if first != nil {
		if !c.writeReply(first) {
			return false, false
		}
		n++
	}
gather:
	for ; n < maxBatch; n++ {
		select {
		case next := <-c.subs:
			c.replaceSub(next)
			continue
		case f := <-c.replies:
			if f != nil && !c.writeReply(f) {
				return false, false
			}
			continue
		default:
		}
		sub := c.sub
		if sub == nil {
			break
		}
		for {
			ev, ok, err := sub.TryNextOrNotify(c.wakeFn)
			switch {
			case err != nil: // closed: only the writer closes it
				c.sub = nil
				break gather
			case !ok:
				break gather
			}
			read = ev.Seq
			if b := c.encodeEvent(ev); b != nil {
				if !c.writeFrame(b) {
					return false, false
				}
				continue gather
			}
			// Not for this peer: no frame, read on.
		}
	}
	if !c.endBatch() {
		return false, false
	}
	if read > 0 {
		c.delivered.Store(read)
	}
	return n >= maxBatch, true
}

// encodeEvent returns the frame of an event for the peer, in the
// writer's buffer (valid until the next encoding), or nil when the peer
// does not see it.
func (c *wsConn) encodeEvent(ev session.Event) []byte {
	// No event the journal has not stored; the connection ends
	// (cluster.go, journalGate; keep this gate: TestClusterLoad,
	// TestSingleNodeJournalFailure).
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
		c.logger().Error("encode event", slog.String("error", err.Error()))
		return nil
	}
	return b
}

// writeReply encodes and writes a reply; one that does not encode is
// logged and skipped.
func (c *wsConn) writeReply(f *protocol.Frame) bool {
	b, err := c.encode(f)
	if err != nil {
		c.logger().Error("encode reply", slog.String("error", err.Error()))
		return true
	}
	return c.writeFrame(b)
}

// encode encodes f into the writer's buffer (protocol.AppendFrame).
func (c *wsConn) encode(f *protocol.Frame) ([]byte, error) {
	b, err := protocol.AppendFrame((*c.enc)[:0], f)
	*c.enc = b[:0] // a larger buffer is kept for the rest of the batch
	return b, err
}

// beginBatch starts a batch of writes: the connection is marked writing
// (so that the connection's end aborts it), corked, and given a write
// deadline of Options.WriteTimeout. The deadline is the socket's own (the
// runtime's timer of the connection's descriptor): it bounds every write
// of the batch, and a pong the reader is writing meanwhile, with nothing
// allocated — a timer made per writer cost three allocations, and a
// writer's first allocation during a garbage collection costs it 64 KiB of
// marking.
func (c *wsConn) beginBatch() bool {
	// Set before the end is checked: an end of the connection either sees
	// the write (and aborts it) or comes before the check (and the write
	// does not start).
	c.writing.Store(true)
	select {
	case <-c.done:
		c.writing.Store(false)
		return false
	default:
	}
	c.cork.setWriteDeadline(time.Now().Add(c.srv.opts.WriteTimeout))
	c.cork.cork()
	c.enc = buffers.get()
	return true
}

// releaseEncoder gives the batch's encoding buffer back.
func (c *wsConn) releaseEncoder() {
	if c.enc != nil {
		buffers.put(c.enc, *c.enc)
		c.enc = nil
	}
}

// writeFrame writes one frame of the batch (into the cork's buffer, unless
// the batch has outgrown it).
func (c *wsConn) writeFrame(b []byte) bool {
	if err := c.conn.Write(context.Background(), websocket.MessageText, b); err != nil {
		c.writeFailed(err)
		return false
	}
	return true
}

// endBatch sends what the batch held back and lifts the write deadline.
func (c *wsConn) endBatch() bool {
	c.releaseEncoder()
	err := c.cork.flush()
	c.cork.setWriteDeadline(time.Time{})
	c.writing.Store(false)
	if err != nil {
		c.writeFailed(fmt.Errorf("failed to write frames: %w", err))
		return false
	}
	return true
}

func (c *wsConn) writeFailed(err error) {
	c.releaseEncoder()
	c.cork.drop()
	if errors.Is(err, os.ErrDeadlineExceeded) { // our deadline, not a closing connection
		c.writeErr.Store(fmt.Errorf("write: the peer has not read for %s: %w", c.srv.opts.WriteTimeout, err))
	}
	c.cancel(fmt.Errorf("write: %w", err))
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
