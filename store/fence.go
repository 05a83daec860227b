package store

import (
	"runtime"
	"sync"
	"weak"
)

// On the embedded server, a session's fence is kept in memory, and an
// append that the fence clears is published without headers.
//
// Every append expects the session's last stored message to be the one its
// journal last wrote. On an external server the server checks it
// (Nats-Expected-Last-Subject-Sequence), since other processes write to the
// same stream. The embedded server has one writer: this process holds its
// data directory's lock (lock_unix.go) and reaches it through one
// in-process connection that never reconnects, so every write to a
// session's subject goes through this store, and a subjectFence can know
// the subject's last stream sequence. The server's check is not free: it
// reads the subject's last message, and after a quiet spell that message's
// file block is no longer in memory, and the server loads all of it (up to
// 8 MB, over 10 ms on the stream's one goroutine, with every append of
// every session waiting behind it). The headers themselves cost the server
// a parse and about 60 bytes of disk an event (docs/RATIONALE.md, "Why the
// embedded store's appends carry no headers").
//
// What the headers did, the fence does:
//   - the expected sequence: an append whose journal's last stream
//     sequence is the subject's is published plain; any other is published
//     with the headers, and the server refuses it as before when another
//     journal wrote since;
//   - the token that recognises a journal's own event after a lost
//     acknowledgement: a plain publish is sent once, never repeated; one
//     that goes unanswered makes the fence unsure (it may yet be stored),
//     and what follows on the subject is published with the headers until
//     one is acknowledged. The server takes a connection's messages in
//     order, so once that one is answered, the unanswered one was stored
//     before it or not at all; the stored event without a token whose seq
//     is the unsure journal's pending one is that journal's (resync).
//
// A fence is made unknown — the next append checked by the server — when
// it is new (a journal for a session no live journal holds), after a
// plain publish fails, and when the session is deleted.
type subjectFence struct {
	// mu is held for a publish to the subject and for its purge: the
	// subject's writes are one at a time, and last is the server's.
	mu    sync.Mutex
	known bool   // last is the subject's last stream sequence
	last  uint64 // 0: the subject holds no message
	// unsure is the journal whose plain publish went unanswered, while
	// no later publish on the subject has been acknowledged.
	unsure *journal
}

// clears reports whether j may publish plain: nobody wrote to the subject
// since j's last event. f.mu is held.
func (f *subjectFence) clears(j *journal) bool { return f.known && f.last == j.lastStream }

// stored records an acknowledged publish at stream sequence seq. f.mu
// is held.
func (f *subjectFence) stored(seq uint64) {
	f.known, f.last, f.unsure = true, seq, nil
}

// lost records that a plain publish of j's failed or went unanswered:
// it may be stored. f.mu is held.
func (f *subjectFence) lost(j *journal) { f.known, f.unsure = false, j }

// forget makes the fence unknown (a purge). f.mu is held.
func (f *subjectFence) forget() { f.known, f.unsure = false, nil }

// fences are a store's subject fences, one per session that has a
// journal in memory. The map holds them weakly: a fence lives as long as
// a journal of its subject, and a hibernated session holds nothing here.
type fences struct {
	mu sync.Mutex
	m  map[string]weak.Pointer[subjectFence]
}

// get returns subject's fence, making an unknown one if no journal holds
// it.
func (fs *fences) get(subject string) *subjectFence {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f := fs.m[subject].Value(); f != nil {
		return f
	}
	f := &subjectFence{}
	if fs.m == nil {
		fs.m = make(map[string]weak.Pointer[subjectFence])
	}
	fs.m[subject] = weak.Make(f)
	runtime.AddCleanup(f, fs.collected, subject)
	return f
}

// collected removes subject's entry once its fence is gone, unless a
// newer fence took its place.
func (fs *fences) collected(subject string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.m[subject].Value() == nil {
		delete(fs.m, subject)
	}
}
