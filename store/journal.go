package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

const (
	// tokenHeader names the journal that wrote an event: a journal whose
	// acknowledgement was lost recognises its own event by it.
	tokenHeader = "Brain-Journal"
	// maxBacklog and maxBacklogBytes bound the events a journal keeps to
	// publish again after failed appends; past them it gives up.
	maxBacklog      = 1024
	maxBacklogBytes = 16 << 20
	// keptEncodeBuffer bounds the encoding buffers pooled between
	// events: a rare large event does not pin its size.
	keptEncodeBuffer = 64 << 10
)

// encodeBuffers lend journals the buffer an event is encoded into.
var encodeBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// journal appends one session's events; see [Store.Journal].
type journal struct {
	s       *Store
	id      string
	subject string
	token   string
	// fence is the session's fence on the embedded server (fence.go);
	// nil on an external one, where the server checks every append.
	fence *subjectFence

	mu         sync.Mutex
	lastStream uint64 // stream sequence of the last event stored; 0: none
	lastSeq    uint64 // that event's seq
	backlog    []pending
	backlogLen int // bytes in backlog
	broken     error
	anchors    []anchor // where some events are in the stream, by seq (readback.go)
	// fromCheckpoint: the journal continues a checkpoint (ResumeFrom),
	// whose last event was taken for the stream's. An append refused as
	// not following the stream's last event then drops the checkpoint:
	// the session's next load reads its events, instead of the same
	// checkpoint again (checkpoint.go).
	fromCheckpoint bool

	appended atomic.Int64 // bytes of the events this journal stored (Bytes)

	hold atomic.Pointer[func() bool] // HoldWhile's; nil: appends are bounded by Options.Timeout
}

// HoldWhile makes every later append ride out a stream without a leader
// (a JetStream leader election), an unanswered publish or a new leader
// not ready yet for as long as valid reports true — at most 30 s —
// instead of giving up after Options.Timeout. package server passes its
// lease's Valid: a session is not handed over because of an election its
// lease outlives. Riding it out is safe whatever valid says: every append
// expects the session's last stored event to be this journal's last (the
// expected last subject sequence), so a stale owner's append is refused
// once another owner has written. An append still fails at once when the
// store is unreachable or has no quorum (an [*UnavailableError]).
func (j *journal) HoldWhile(valid func() bool) { j.hold.Store(&valid) }

// Bytes returns the bytes of the events this journal has stored (each
// event's encoded frame, as the stream holds it), not counting what the
// session held before the journal was created. It is safe to call
// concurrently with Append, and never waits for one.
func (j *journal) Bytes() int64 { return j.appended.Load() }

// pending is an event given to Append and not yet acknowledged.
type pending struct {
	seq   uint64
	data  []byte
	msgID bool // send Nats-Msg-Id (Store.msgIDs); false once the id was found to belong to a deleted event
}

// Append stores e, and before it any event whose append failed earlier
// (see [Store.Journal]).
func (j *journal) Append(e session.Event) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if f := j.s.opts.OnAppend; f != nil {
		start := time.Now()
		err := j.appendLocked(e)
		f(time.Since(start), err)
		return err
	}
	return j.appendLocked(e)
}

func (j *journal) appendLocked(e session.Event) error {
	if j.broken != nil {
		return j.broken
	}
	if j.s.closed.Load() {
		return ErrClosed
	}
	next := j.lastSeq + uint64(len(j.backlog)) + 1
	fresh := j.lastStream == 0 && len(j.backlog) == 0 // nothing stored: any seq may start the log
	if e.Seq == 0 || (e.Seq != next && !fresh) {
		return fmt.Errorf("%w: session %q: event seq %d does not follow seq %d", ErrConflict, j.id, e.Seq, next-1)
	}
	// The encoding buffer is borrowed for the append, not kept by the
	// journal: a session between events holds none (a publish copies
	// what it sends).
	buf := encodeBuffers.Get().(*[]byte)
	data, err := protocol.AppendFrame((*buf)[:0], &protocol.Frame{Seq: e.Seq, Msg: e.Msg})
	defer func() {
		if cap(data) <= keptEncodeBuffer {
			*buf = data[:0]
			encodeBuffers.Put(buf)
		}
	}()
	switch {
	case err != nil:
		j.broken = fmt.Errorf("store: session %q: event %d: %w", j.id, e.Seq, err)
		return j.broken
	case len(data) > j.s.maxEvent:
		// Refused before anything is stored: the journal stays as it was,
		// and the session puts a smaller event under the same seq.
		return fmt.Errorf("store: session %q: event %d: %w", j.id, e.Seq,
			&session.EventTooLargeError{Type: e.Msg.MessageType(), Size: len(data), Limit: j.s.maxEvent})
	case len(j.backlog) >= maxBacklog || j.backlogLen+len(data) > maxBacklogBytes:
		j.broken = fmt.Errorf("store: session %q: %d events (%d bytes) could not be appended; giving up", j.id, len(j.backlog), j.backlogLen)
		return j.broken
	}
	j.backlog = append(j.backlog, pending{seq: e.Seq, data: data, msgID: j.s.msgIDs})
	j.backlogLen += len(data)
	err = j.flushLocked()
	if errors.Is(err, ErrTooLarge) && len(j.backlog) == 1 && j.backlog[0].seq == e.Seq {
		// The server's limit is lower than the one this journal knew (an
		// external server's max payload): only this event is refused.
		j.broken = nil
		j.backlog, j.backlogLen = j.backlog[:0], 0
		return fmt.Errorf("store: session %q: event %d: %w: %w", j.id, e.Seq,
			&session.EventTooLargeError{Type: e.Msg.MessageType(), Size: len(data), Limit: j.s.maxEvent}, err)
	}
	if n := len(j.backlog); n > 0 && j.backlog[n-1].seq == e.Seq {
		// Kept to publish again: it must not share the next event's buffer.
		j.backlog[n-1].data = slices.Clone(data)
	}
	return err
}

// flushLocked publishes the backlog in order, stopping at the first failure.
func (j *journal) flushLocked() error {
	for len(j.backlog) > 0 {
		p := &j.backlog[0]
		streamSeq, err := j.publish(p)
		if err != nil {
			if errors.Is(err, ErrConflict) || errors.Is(err, ErrTooLarge) {
				j.broken = err
			}
			if errors.Is(err, ErrConflict) && j.fromCheckpoint {
				j.fromCheckpoint = false
				if derr := j.s.dropCheckpoint(context.Background(), j.id); derr == nil {
					j.s.log.Warn("store: a session's checkpoint was dropped: an append after it was refused; the session's next load reads its events",
						slog.String("session", j.id), slog.String(logKeyError, err.Error()))
				}
			}
			return err
		}
		if j.lastStream == 0 {
			j.s.idx.stored(j.id) // the session's first stored event (index.go)
		}
		j.lastStream, j.lastSeq = streamSeq, p.seq
		if p.seq%anchorEvery == 0 {
			j.recordAnchor(p.seq, streamSeq)
		}
		j.appended.Add(int64(len(p.data)))
		j.backlogLen -= len(p.data)
		j.backlog = slices.Delete(j.backlog, 0, 1)
	}
	return nil
}

// publish stores p after the journal's last event, and returns its stream
// sequence. On the embedded server, an append the session's fence clears
// is published plain, once (fence.go); any other is published with the
// headers that make the server check it.
func (j *journal) publish(p *pending) (uint64, error) {
	f := j.fence
	if f == nil {
		return j.publishChecked(p, j.s.opts.Timeout)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	timeout := j.s.opts.Timeout
	if f.clears(j) {
		start := time.Now()
		ack, err := j.s.publishPlain(&nats.Msg{Subject: j.subject, Data: p.data})
		if err == nil {
			// Stored (a message without an id is never a duplicate).
			f.stored(ack.Sequence)
			return ack.Sequence, nil
		}
		f.lost(j)
		if timeout -= time.Since(start); timeout <= 0 || !checkAgain(err) {
			return j.acked(p, nil, err)
		}
		// Unanswered, or answered as a publish that may be stored yet:
		// the rest of the timeout goes to attempts the server checks,
		// which find the plain one if it was stored.
	}
	seq, err := j.publishChecked(p, timeout)
	if err == nil {
		f.stored(seq)
	}
	return seq, err
}

// checkAgain reports an error of a plain publish after which the event
// is published again, checked by the server: no answer, an answer that
// a later attempt may not meet (pubRetryable), or one about an expected
// sequence the plain publish did not carry — the server then says what
// is stored.
func checkAgain(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
		return true
	}
	return pubRetryable(err)
}

// errUnsettled is resync's finding that the store refused an append
// whose expected last event is the one the store holds: an earlier
// attempt of the same event is still being applied (or the read came
// before it). Sent again after a pause, the append settles.
var errUnsettled = errors.New("the store refused the event, yet its last event is this journal's last: an earlier attempt is still being applied")

// publishChecked stores p with the headers that make the server check it
// follows the journal's last event. An append the store has not settled
// (errUnsettled) is sent again after a pause, for as long as a publish
// would be retried: timeout, or while the journal's hold says so
// (HoldWhile).
func (j *journal) publishChecked(p *pending, timeout time.Duration) (uint64, error) {
	var hold func() bool
	if h := j.hold.Load(); h != nil {
		hold = *h
	}
	start := time.Now()
	for {
		seq, err := j.publishOnce(p, timeout, hold)
		if !errors.Is(err, errUnsettled) {
			return seq, err
		}
		since := time.Since(start)
		if since >= timeout && (hold == nil || since >= maxAppendHold || !hold()) {
			return 0, fmt.Errorf("store: session %q: append event %d (retried with the next append): %w", j.id, p.seq, err)
		}
		t := time.NewTimer(pubRetryWait)
		select {
		case <-t.C:
		case <-j.s.connClosed:
			t.Stop()
			return 0, ErrClosed
		}
	}
}

// publishOnce sends p once with its headers (with the store's own retries
// of an unanswered publish, for up to timeout) and reads what the answer
// means.
func (j *journal) publishOnce(p *pending, timeout time.Duration, hold func() bool) (uint64, error) {
	h := j.header(p)
	ack, err := j.s.publishHeld(&nats.Msg{Subject: j.subject, Data: p.data, Header: h}, timeout, hold)
	headers.Put(h)
	return j.acked(p, ack, err)
}

// acked reads a publish's answer: p's stream sequence, or what the error
// means for the journal.
func (j *journal) acked(p *pending, ack *jetstream.PubAck, err error) (uint64, error) {
	if err == nil {
		if ack.Duplicate {
			return j.duplicate(context.Background(), p, ack.Sequence)
		}
		return ack.Sequence, nil
	}
	if errors.Is(err, ErrUnavailable) {
		return 0, fmt.Errorf("store: session %q: append event %d (retried with the next append): %w", j.id, p.seq, err)
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant:
			return j.resync(context.Background(), p)
		case jetstream.JSErrCodeStreamMessageExceedsMaximum:
			return 0, fmt.Errorf("%w: session %q: event %d: %w", ErrTooLarge, j.id, p.seq, err)
		}
	}
	if errors.Is(err, nats.ErrMaxPayload) {
		return 0, fmt.Errorf("%w: session %q: event %d: %w", ErrTooLarge, j.id, p.seq, err)
	}
	return 0, fmt.Errorf("store: session %q: append event %d (retried with the next append): %w", j.id, p.seq, err)
}

// headers lend journals the header map of a publish: an idle session's
// journal holds none (a map of three headers is about 400 bytes).
var headers = sync.Pool{New: func() any { return nats.Header{} }}

// header returns the headers of p's publish, in a map borrowed from
// headers: give it back once the publish has returned (it encodes the
// headers before it does). Guarded by j.mu.
func (j *journal) header(p *pending) nats.Header {
	h := headers.Get().(nats.Header)
	set := func(key, value string) {
		if v := h[key]; len(v) == 1 {
			v[0] = value
		} else {
			h[key] = []string{value}
		}
	}
	set(tokenHeader, j.token)
	set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(j.lastStream, 10))
	if p.msgID {
		set(jetstream.MsgIDHeader, j.id+"/"+strconv.FormatUint(p.seq, 10))
	} else {
		delete(h, jetstream.MsgIDHeader)
	}
	return h
}

// wrote reports whether the journal wrote last, an event stored after
// its last acknowledged one: by its token, or — on the embedded server —
// as the plain publish its fence is unsure of. Only that journal's plain
// publish can be stored without a token after the fence's last known
// event (fence.go). f.mu is held.
func (j *journal) wrote(last lastEvent) bool {
	if last.token == j.token {
		return true
	}
	return last.token == "" && j.fence != nil && j.fence.unsure == j
}

// duplicate handles an acknowledgement saying that p's message id was
// stored already, at stream sequence seq.
func (j *journal) duplicate(ctx context.Context, p *pending, seq uint64) (uint64, error) {
	var m *jetstream.RawStreamMsg
	err := j.s.retry(ctx, fmt.Sprintf("read event %d of session %q", p.seq, j.id), func(ctx context.Context) error {
		var err error
		m, err = j.s.stream.GetMsg(ctx, seq)
		return err
	})
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		// The id is remembered from a deleted event (a session deleted and
		// its id reused within the duplicate window): store p without it.
		p.msgID = false
		return j.publish(p)
	case err != nil:
		return 0, fmt.Errorf("store: session %q: append event %d (retried with the next append): %w", j.id, p.seq, err)
	case m.Subject == j.subject && m.Header.Get(tokenHeader) == j.token:
		// This journal's earlier publish of p was stored; its
		// acknowledgement was lost (a clustered stream checks ids first).
		return seq, nil
	}
	return 0, fmt.Errorf("%w: session %q: event %d was stored by another journal", ErrConflict, j.id, p.seq)
}

// resync handles a publish refused because the session's last stored
// event is not the one this journal wrote last: either this journal's
// earlier publish of p was stored and its acknowledgement lost, or another
// owner wrote, or the session was deleted.
func (j *journal) resync(ctx context.Context, p *pending) (uint64, error) {
	var last lastEvent
	err := j.s.retry(ctx, fmt.Sprintf("read the last event of session %q", j.id), func(ctx context.Context) error {
		var err error
		last, err = j.s.last(ctx, j.subject)
		return err
	})
	switch {
	case err != nil:
		return 0, fmt.Errorf("store: session %q: append event %d (retried with the next append): %w", j.id, p.seq, err)
	case j.wrote(last) && last.seq == p.seq && last.streamSeq > j.lastStream:
		return last.streamSeq, nil
	case j.lastStream != 0 && last.seq == j.lastSeq && last.streamSeq == j.lastStream:
		// Nobody wrote after this journal's last event, yet the store
		// refused the next: not a conflict.
		return 0, errUnsettled
	case last.streamSeq == 0:
		return 0, fmt.Errorf("%w: session %q: event %d: the session was deleted", ErrConflict, j.id, p.seq)
	}
	return 0, fmt.Errorf("%w: session %q: event %d: the session's last stored event is %d, written by another journal", ErrConflict, j.id, p.seq, last.seq)
}
