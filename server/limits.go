package server

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// Default limits; see [Limits].
const (
	DefaultSessionsPerToken       = 1000
	DefaultFramesPerSecond        = 1000
	DefaultFrameBurst             = 5000
	DefaultJournalBytesPerSession = 64 << 20
)

// Limits are the quotas the server enforces on what one token, one
// connection and one session may use. A zero field takes its default; a
// negative one means unlimited. Exceeding a quota is an error with code
// quota_exceeded naming the quota and its limit; nothing else changes, and
// other sessions are not affected.
type Limits struct {
	// SessionsPerToken bounds the sessions one token may create (its first
	// connection to an id that has no past). Reconnecting to a session
	// already created does not count again; deleting one gives it back.
	// With a store that records owners (package store), the count
	// survives restarts. Default 1000.
	SessionsPerToken int
	// FramesPerSecond and FrameBurst are a token bucket per WebSocket
	// connection: a connection may send FrameBurst frames at once, then
	// FramesPerSecond on average. A frame over the rate is answered with
	// quota_exceeded and not applied. Defaults 1000 and 5000: a client
	// answering a burst of calls, or a benchmark's thousand round trips,
	// passes; a connection flooding the kernel is held to 1000 frames a
	// second, a fraction of what one kernel decodes.
	FramesPerSecond float64
	FrameBurst      int
	// JournalBytesPerSession bounds the bytes of events a session journals
	// (with a store). Once it is reached, new work — registering
	// capabilities and invoking them, over WebSocket or MCP — is refused;
	// results, approvals, cancellations and deregistrations still go
	// through, so that every call already started ends and is journaled.
	// Default 64 MiB.
	JournalBytesPerSession int64
}

func (l Limits) withDefaults() Limits {
	if l.SessionsPerToken == 0 {
		l.SessionsPerToken = DefaultSessionsPerToken
	}
	if l.FramesPerSecond == 0 {
		l.FramesPerSecond = DefaultFramesPerSecond
	}
	if l.FrameBurst == 0 {
		l.FrameBurst = DefaultFrameBurst
	}
	if l.JournalBytesPerSession == 0 {
		l.JournalBytesPerSession = DefaultJournalBytesPerSession
	}
	return l
}

// quotaError is the error of a used-up quota.
func quotaError(format string, args ...any) *protocol.Error {
	return protocol.Errorf(protocol.CodeQuotaExceeded, format, args...)
}

// countingJournal counts the bytes a session's journal holds: what the
// store held at restore, plus what is appended since — reported by the
// journal itself when it can (package store's Bytes), so that no event is
// encoded twice, and otherwise counted here.
type countingJournal struct {
	closed atomic.Bool // a stop: nothing more is stored
	j      session.Journal
	sized  sizedJournal // nil: count in Append
	bytes  atomic.Int64 // at restore, plus appends when sized is nil

	// On a node of its own (no lease: a cluster's fencedJournal does this
	// with its lease), the first append that fails — the store cannot
	// write (its disk is full, say) — fails the journal: failedAt is that
	// event's seq, every later append is refused (a later one that went
	// through would leave a gap in the journal), the session's
	// connections show nothing from it on (journalGate), and onFail stops
	// serving the session, which the next connection restores from what
	// the journal holds. A probe's client had been shown an event that a
	// restart no longer had.
	failedAt atomic.Uint64
	failErr  atomic.Pointer[error]
	onFail   func(error) // nil: failures are the fencedJournal's (a cluster)
}

// sizedJournal is a journal that reports the bytes it stored.
type sizedJournal interface{ Bytes() int64 }

func newCountingJournal(j session.Journal) *countingJournal {
	c := &countingJournal{j: j}
	c.sized, _ = j.(sizedJournal)
	return c
}

// Append journals e and, without a sized journal, counts its encoded size.
// Once the journal is closed (a stop: shutdown.go) it stores nothing.
func (c *countingJournal) Append(e session.Event) error {
	if c.closed.Load() {
		return session.ErrJournalClosed
	}
	if at := c.failedAt.Load(); at != 0 {
		return fmt.Errorf("event %d: the session's journal failed at event %d: the session is being loaded again from what its journal holds", e.Seq, at)
	}
	if err := c.j.Append(e); err != nil {
		if c.onFail != nil {
			c.failed(e.Seq, err)
		}
		return err
	}
	if c.sized == nil {
		c.bytes.Add(eventBytes(e))
	}
	return nil
}

// failed fails the journal at seq for err, unless err leaves it as it
// was (an event refused for its size, a stop) or it failed already. Its
// own function: err's address, kept, would otherwise make every Append
// allocate it.
func (c *countingJournal) failed(seq uint64, err error) {
	var tl *session.EventTooLargeError
	if errors.As(err, &tl) || errors.Is(err, session.ErrJournalClosed) || !c.failedAt.CompareAndSwap(0, seq) {
		return
	}
	c.failErr.Store(&err)
	go c.onFail(err)
}

// The journalGate of a session on a node of its own (see failedAt).

func (c *countingJournal) shows(seq uint64) bool {
	at := c.failedAt.Load()
	return at == 0 || seq < at
}

func (c *countingJournal) admits(r *protocol.Frame) bool { return c.shows(r.Seq) }

func (c *countingJournal) closeCause() *closeError {
	var err error
	if p := c.failErr.Load(); p != nil {
		err = *p
	}
	return reloadCause(err)
}

// total returns the bytes the session's journal holds.
func (c *countingJournal) total() int64 {
	if c.sized != nil {
		return c.bytes.Load() + c.sized.Bytes()
	}
	return c.bytes.Load()
}

// eventBytes is the size of e as a journal stores it: one encoded frame.
func eventBytes(e session.Event) int64 {
	b, err := protocol.EncodeFrame(&protocol.Frame{Seq: e.Seq, Msg: e.Msg})
	if err != nil {
		return 0
	}
	return int64(len(b))
}

// journals tracks the byte count of each live session's journal.
type journals struct {
	limit int64

	mu sync.Mutex
	by map[*session.Session]*countingJournal
}

// Admit reports whether session s may take new work: nil, or a
// quota_exceeded error when its journal has reached
// Limits.JournalBytesPerSession. The WebSocket endpoint asks before every
// capability_register, capability_invoke and turn_start (admitFrame); the
// MCP endpoint should ask before every tools/call
// (mcpbridge.ServerOptions.Admit).
func (m *Manager) Admit(s *session.Session) *protocol.Error {
	if m.journals.limit < 0 {
		return nil
	}
	m.journals.mu.Lock()
	cj := m.journals.by[s]
	m.journals.mu.Unlock()
	if cj == nil {
		return nil
	}
	if n := cj.total(); n >= m.journals.limit {
		return quotaError("session %s has journaled %d bytes, its limit of %d (limits.journal_bytes_per_session): it takes no new registrations or calls; delete it or start another", s.ID(), n, m.journals.limit)
	}
	return nil
}

// admitFrame is Admit for a WebSocket's command that starts new work:
// once the node is stopping it is refused too. A connection outlives the
// request that opened it, and one open before the stop had started calls
// until the stop's bound, which they outlived. An HTTP request needs no
// such check: a stopping node refuses it unserved, or, when it was being
// answered as the stop began (an MCP POST), answers it, as the stop waits
// for it (the MCP endpoint's Admit must not refuse it: its caller, a
// forwarding node, would take the refusal for the call's outcome).
func (m *Manager) admitFrame(s *session.Session) *protocol.Error {
	if m.stopping.Load() {
		return protocol.Errorf(protocol.CodeUnavailable, "the node is stopping: nothing new starts here; reconnect (in a cluster, another node takes the session) and send it again")
	}
	return m.Admit(s)
}

// JournalBytes returns the bytes of events journaled for s, 0 without a
// store.
func (m *Manager) JournalBytes(s *session.Session) int64 {
	m.journals.mu.Lock()
	defer m.journals.mu.Unlock()
	if cj := m.journals.by[s]; cj != nil {
		return cj.total()
	}
	return 0
}

func (js *journals) track(s *session.Session, cj *countingJournal) {
	js.mu.Lock()
	defer js.mu.Unlock()
	if js.by == nil {
		js.by = map[*session.Session]*countingJournal{}
	}
	js.by[s] = cj
}

// untrack forgets s's journal as s leaves memory (hibernated, its lease
// lost, its creation failed, a stop), and closes it: what the session
// object does after — a timer of its own firing (session's Restore waits
// out a peer grace) — is not stored, where it could come before the
// events of the session's next incarnation and break its journal.
func (js *journals) untrack(s *session.Session) {
	js.mu.Lock()
	defer js.mu.Unlock()
	if cj := js.by[s]; cj != nil {
		cj.closed.Store(true)
	}
	delete(js.by, s)
}

// bucket is a token bucket: burst frames at once, then rate per second.
// It is used by one connection's reader only.
type bucket struct {
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

func newBucket(rate float64, burst int, now time.Time) *bucket {
	return &bucket{rate: rate, burst: float64(burst), tokens: float64(burst), last: now}
}

// take spends one token at now, and reports whether there was one. A nil
// bucket is unlimited.
func (b *bucket) take(now time.Time) bool {
	if b == nil {
		return true
	}
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.burst, b.tokens+d.Seconds()*b.rate)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// frameLimiter returns the bucket of a new connection; nil when unlimited.
func (l Limits) frameLimiter(now time.Time) *bucket {
	if l.FramesPerSecond < 0 || l.FrameBurst < 0 {
		return nil
	}
	return newBucket(l.FramesPerSecond, l.FrameBurst, now)
}

// rateError is the reply to a frame over a connection's rate.
func (l Limits) rateError() *protocol.Error {
	return quotaError("more than %g frames per second (burst %d) on this connection (limits.frames_per_second): the frame was not applied; slow down and send it again", l.FramesPerSecond, l.FrameBurst)
}
