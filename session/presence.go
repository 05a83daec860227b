package session

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/brainrt/brain/protocol"
)

// presence is what the session knows of a party's connections.
type presence struct {
	party  Peer // its key (see party)
	conns  int
	goneAt time.Time   // when conns last dropped to 0
	timer  *time.Timer // fails the party's dispatched calls at goneAt+PeerGrace
}

// party is the key of p in Session.presence: its side and app id.
func party(p Peer) Peer { return Peer{Side: p.Side, AppID: p.AppID} }

// Attach tells the session that peer p has a live connection, and returns
// how many p's party now has. The transport calls it when a connection is
// established, and [Session.Detach] when it ends.
//
// Liveness decides what a call to a client, app or environment capability
// does when its owner has no connection: it waits at most Options.PeerGrace
// for a reconnect, then ends with unavailable. A party the transport never
// attached (an embedder answering calls in-process) is taken as present;
// the owners of registrations restored from a journal are taken as having
// left at the restore.
func (s *Session) Attach(p Peer) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := s.presenceLocked(p)
	pr.conns++
	if pr.timer != nil {
		pr.timer.Stop()
		pr.timer = nil
	}
	return pr.conns
}

// Detach ends one connection of p's party that [Session.Attach] counted, and
// returns how many remain. When none remain, the party's dispatched calls
// end with unavailable unless it attaches again within Options.PeerGrace.
func (s *Session) Detach(p Peer) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := s.presenceLocked(p)
	if pr.conns > 0 {
		pr.conns--
	}
	if pr.conns == 0 {
		s.goneLocked(party(p), pr)
	}
	return pr.conns
}

func (s *Session) presenceLocked(p Peer) *presence {
	k := party(p)
	if pr := s.presenceOfLocked(k); pr != nil {
		return pr
	}
	pr := &presence{party: k}
	s.presence = append(s.presence, pr)
	return pr
}

// presenceOfLocked returns what the session knows of party k, or nil.
// A session has a handful of parties (a client, its apps, an
// environment): a slice holds them in less than a map's smallest table.
func (s *Session) presenceOfLocked(k Peer) *presence {
	for _, pr := range s.presence {
		if pr.party == k {
			return pr
		}
	}
	return nil
}

// goneLocked records that party k has no connection from now on.
func (s *Session) goneLocked(k Peer, pr *presence) {
	pr.goneAt = time.Now()
	if pr.timer != nil {
		pr.timer.Stop()
	}
	pr.timer = time.AfterFunc(s.opts.PeerGrace, func() { s.failGone(k) })
}

// failGone ends the dispatched calls of party k if it is still gone.
func (s *Session) failGone(k Peer) {
	s.mu.Lock()
	pr := s.presenceOfLocked(k)
	if pr == nil || pr.conns > 0 {
		s.mu.Unlock()
		return
	}
	pr.timer = nil
	n := 0
	for _, c := range s.sortedCallsLocked() {
		if c.dispatched && !c.finished && c.reg.handler == nil && c.reg.owner.Same(k) {
			s.endLocked(c, goneOutcome(c.reg, pr, s.opts.PeerGrace))
			n++
		}
	}
	s.mu.Unlock()
	if n > 0 {
		s.logInfo("owner gone: calls ended", slog.String(keyPeer, k.String()), slog.Int("calls", n))
	}
}

// ownerGone reports whether a call to r must fail at once because its owner
// left longer than PeerGrace ago, with the outcome to end it with.
func (s *Session) ownerGone(r *registration) (protocol.Outcome, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := s.presenceOfLocked(party(r.owner))
	if pr == nil || pr.conns > 0 || time.Since(pr.goneAt) < s.opts.PeerGrace {
		return protocol.Outcome{}, false
	}
	return goneOutcome(r, pr, s.opts.PeerGrace), true
}

func goneOutcome(r *registration, pr *presence, grace time.Duration) protocol.Outcome {
	return protocol.Fail(protocol.CodeUnavailable, "%s",
		fmt.Sprintf("capability %q is answered by %s, which is not connected (it left %s ago and did not come back within %s); try again once it reconnects",
			r.def[0].Name, r.owner, time.Since(pr.goneAt).Round(time.Millisecond), grace))
}
