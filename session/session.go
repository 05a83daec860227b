package session

import (
	"crypto/rand"
	"encoding/base32"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brainrt/brain/internal/workers"
)

// Options configure a [Session]. The zero value, and a nil *Options, mean
// the defaults.
type Options struct {
	// Logger receives the session's logs; nil discards them.
	Logger *slog.Logger
	// LogSize is how many events the session keeps for replay; a subscriber
	// further behind gets a snapshot. Default 4096.
	LogSize int
	// History, if set, reads back the events the session's journal stored
	// (package store's journals do). With it the session keeps only the
	// latest LogMemory of its LogSize events in memory, and a subscriber
	// behind those reads the rest back from History: a long-lived session
	// no longer holds thousands of events that its journal already has.
	History EventReader
	// LogMemory is how many of the latest events a session with a History
	// keeps in memory. Default 32; at least 1; LogSize when it is larger.
	LogMemory int
	// LogMemoryBytes bounds, besides LogMemory, what the events kept in
	// memory hold of the values and texts peers and models chose (inputs,
	// results, props, schemas and descriptions, message texts): once they
	// hold more, the oldest leave memory, and a subscriber behind them
	// reads them back from History — or, without one, gets a snapshot.
	// The newest event always stays. Default DefaultLogMemoryBytes with a
	// History, none without one (the log is then the replay window's only
	// copy); negative means none.
	LogMemoryBytes int
	// DefaultCallTimeout bounds a dispatched call whose capability sets no
	// callTimeoutMs. Default 60 s (the spec's
	// DEFAULT_CAPABILITY_CALL_TIMEOUT_MS).
	DefaultCallTimeout time.Duration
	// ApprovalTimeout bounds the wait for a capability_approve; a call
	// still undecided then ends with timeout, without running. Default 10
	// minutes. After a restart a restored request waits a full
	// ApprovalTimeout again.
	ApprovalTimeout time.Duration
	// MaxEventBytes bounds one event as a journal stores it (its encoded
	// frame). Every input that becomes part of an event is held to it
	// before anyone sees the event: a call's input and result, props,
	// a registration, a conversation message; what is over is too_large.
	// Set it to what the session's store takes (package store's
	// MaxEventBytes). Default DefaultMaxEventBytes (1 MiB less 1 KiB);
	// at least 64 KiB.
	MaxEventBytes int
	// RequireApprovalDigest refuses an approval that does not echo its
	// request's inputDigest (invalid_request). Off by default: the seed's
	// capability_approve has no digest, and one is taken for the call's
	// only request (a request withdrawn and issued again needs the
	// digest).
	RequireApprovalDigest bool
	// MCPDecisions lets the user of an MCP host decide the approvals of the
	// calls that host made, by answering an elicitation request (peer side
	// SideMCP; the decision must carry the request's inputDigest). Off by
	// default: it trusts whoever sits at the MCP host as a decider.
	MCPDecisions bool
	// PeerGrace is how long a call to a client, app or environment
	// capability waits for its owning peer to reconnect when that peer has
	// no live connection (see [Session.Attach]); after it the call ends
	// with unavailable, naming the owner. A call made later than PeerGrace
	// after the owner left fails at once. Default 5 s; negative means no
	// grace.
	PeerGrace time.Duration
	// MaxCapabilities bounds the registered capabilities (built-ins not
	// counted); a registration beyond it fails with quota_exceeded.
	// Default 1024.
	MaxCapabilities int
	// MaxPendingCalls bounds the calls that have not finished (awaiting
	// approval, dispatched or running); an invocation beyond it fails with
	// quota_exceeded. Default 256.
	MaxPendingCalls int
	// Journal, if set, persists every event before it is visible (see
	// [Journal] and [Restore]).
	Journal Journal
	// FinishedMemory is how many finished call ids the session remembers,
	// so that a late result or approval is told how its call ended. Default
	// 1024.
	FinishedMemory int
	// Observe, if set, is told of each point of every call's life (see
	// [CallEvent]). It is called synchronously on the call's path, never
	// with the session's lock held: it must be quick and must not block.
	// The CallFinished of a call ended by a change to the registry (a
	// deregistration, a re-registration, the end of a turn) is reported
	// from a goroutine of its own, just after the change. Either way it
	// comes before the call's caller is woken: when Invoke returns, Observe
	// has seen the call finish. (The capability_outcome event is emitted
	// just before it, under the session's lock.)
	Observe func(CallEvent)
	// Go, if set, runs f on a goroutine of its choosing: each call started
	// with [Session.Start] runs there, and each agent-side handler. A
	// server passes one pool of reused goroutines for all its sessions
	// (package server's Manager does), so that a busy node runs its calls on a
	// few warm goroutines instead of a fresh one per call: a fresh
	// goroutine grows its stack again and, during a garbage collection,
	// pays at least 64 KiB of marking for its first allocation. Nil: a
	// goroutine per started call, and a pool of the session's own for
	// handlers. f must run even when every goroutine is busy (a call may
	// wait minutes for its result).
	Go func(f func())
}

func (o *Options) withDefaults() Options {
	var out Options
	if o != nil {
		out = *o
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if out.LogSize <= 0 {
		out.LogSize = 4096
	}
	switch {
	case out.History == nil || out.LogMemory > out.LogSize:
		out.LogMemory = out.LogSize
	case out.LogMemory <= 0:
		out.LogMemory = min(32, out.LogSize)
	}
	switch {
	case out.LogMemoryBytes < 0:
		out.LogMemoryBytes = 0
	case out.LogMemoryBytes == 0 && out.History != nil:
		out.LogMemoryBytes = DefaultLogMemoryBytes
	}
	if out.DefaultCallTimeout <= 0 {
		out.DefaultCallTimeout = 60 * time.Second
	}
	if out.ApprovalTimeout <= 0 {
		out.ApprovalTimeout = 10 * time.Minute
	}
	if out.FinishedMemory <= 0 {
		out.FinishedMemory = 1024
	}
	switch {
	case out.PeerGrace == 0:
		out.PeerGrace = 5 * time.Second
	case out.PeerGrace < 0:
		out.PeerGrace = 0
	}
	if out.MaxCapabilities <= 0 {
		out.MaxCapabilities = 1024
	}
	if out.MaxPendingCalls <= 0 {
		out.MaxPendingCalls = 256
	}
	switch {
	case out.MaxEventBytes <= 0:
		out.MaxEventBytes = DefaultMaxEventBytes
	case out.MaxEventBytes < 64<<10:
		out.MaxEventBytes = 64 << 10
	}
	return out
}

// Session is one agent session: its capability registry, the bridge that
// routes invocations, its turn counter and its sequenced event log. A
// Session is safe for concurrent use.
type Session struct {
	id       string
	opts     Options
	log      *slog.Logger
	idPrefix string

	callCounter atomic.Uint64

	mu       sync.Mutex
	caps     map[string]*registration
	looks    map[string]string // lookAlikeKey of each name in caps → that name (registry.go: putCapLocked)
	capsRev  atomic.Uint64     // the registry's revision (registry.go): set under mu, read without
	calls    map[string]*call
	finished finishedRing
	events   eventLog
	// journalClosed: the journal refused an event as closed (a stop); it
	// takes none after that.
	journalClosed bool
	turn          int
	turns         turnState   // the running turn and the conversation (turn.go)
	presence      []*presence // one a party (Side, AppID); see Attach
	// journaled holds the revisions of registrations a journal replayed
	// but [Restore] could not install (agent side: their handlers died with
	// the process); registering one of them again unchanged emits nothing.
	journaled map[string]string
	// streams counts the render streams reserved and not yet invoked or
	// closed (render_stream.go).
	streams int

	workers *workers.Pool[*call] // run agent-side handlers, without Options.Go
	timers  sync.Pool            // stopped *time.Timer for await
}

// New returns an empty session with id, holding only the built-in
// __capabilities.list.
func New(id string, opts *Options) *Session {
	o := opts.withDefaults()
	var rnd [5]byte
	_, _ = rand.Read(rnd[:])
	s := &Session{
		id:       id,
		opts:     o,
		log:      o.Logger.With(slog.String(keySession, id)),
		idPrefix: "c" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(rnd[:])) + "-",
		caps:     map[string]*registration{},
		looks:    map[string]string{},
		calls:    map[string]*call{},
		finished: finishedRing{size: o.FinishedMemory},
		events:   newEventLog(o.LogSize, o.LogMemory, o.LogMemoryBytes),
	}
	s.timers.New = newStoppedTimer
	if o.Go == nil {
		s.workers = workers.New(s.runCall, workerIdle)
	}
	s.registerBuiltins()
	return s
}

// ID returns the session's id.
func (s *Session) ID() string { return s.id }

// Turn returns the current turn number, starting at 0.
func (s *Session) Turn() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.turn
}

// PendingCalls returns how many calls have not finished.
func (s *Session) PendingCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// RunningHandlers counts the calls whose Go handler (an agent-side
// capability of the runtime, such as an environment's tool) is running: a
// graceful stop waits for them, and not for calls awaiting an approval or
// a peer's result, which a restored session resumes.
func (s *Session) RunningHandlers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if c.dispatched && c.reg.handler != nil && !c.finished {
			n++
		}
	}
	return n
}
