package session_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// TestRegistryRevision: the revision changes exactly when the registry
// does, and never names two registries, even of different sessions.
func TestRegistryRevision(t *testing.T) {
	s := session.New("rev", nil)
	other := session.New("rev2", nil)
	if s.RegistryRevision() == 0 || s.RegistryRevision() == other.RegistryRevision() {
		t.Fatalf("fresh sessions have revisions %d and %d: want two different non-zero ones", s.RegistryRevision(), other.RegistryRevision())
	}
	scoped := clientCap("t.scratch")
	scoped.Scope = protocol.ScopeTurn
	changed := clientCap("c.one")
	changed.Description = "Another description."
	for _, tt := range []struct {
		name    string
		do      func() error
		changes bool // else refused or a no-op
	}{
		{"register", func() error { return s.Register(session.Client, clientCap("c.one"), clientCap("c.two")) }, true},
		{"register the same again", func() error { return s.Register(session.Client, clientCap("c.one")) }, false},
		{"an agent-side one with its handler", func() error { return s.RegisterAgent(agentCap("a.echo"), echo) }, true},
		{"the same agent-side one with a new handler", func() error { return s.RegisterAgent(agentCap("a.echo"), echo) }, false},
		{"replace with another definition", func() error { return s.Register(session.Client, changed) }, true},
		{"a refused registration (conflict)", func() error { return s.Register(session.App("x"), appCap("x", "c.one")) }, false},
		{"a refused registration (invalid)", func() error { return s.Register(session.Client, protocol.Capability{Name: "bad"}) }, false},
		{"deregister a name nobody registered", func() error { return s.Deregister(session.Client, "nope") }, false},
		{"a refused deregistration", func() error { return s.Deregister(session.App("x"), "c.two") }, false},
		{"deregister", func() error { return s.Deregister(session.Client, "c.two") }, true},
		{"a turn-scoped one", func() error { return s.Register(session.Client, scoped) }, true},
		{"a turn starts", func() error { _, err := s.StartTurn(session.Client, "hi"); return err }, false},
		{"the turn ends, dropping the turn-scoped one", func() error { s.EndTurn(protocol.TurnCompleted, ""); return nil }, true},
		{"a turn with nothing to drop ends", func() error { s.EndTurn(protocol.TurnCompleted, ""); return nil }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := s.RegistryRevision()
			err := tt.do()
			after := s.RegistryRevision()
			if err != nil && tt.changes {
				t.Fatal(err)
			}
			if (after != before) != tt.changes {
				t.Fatalf("revision %d -> %d (error %v); want a change: %v", before, after, err, tt.changes)
			}
			caps, rev := s.ListRevision(protocol.AudienceLLM)
			if rev != after {
				t.Fatalf("ListRevision's revision %d, RegistryRevision %d", rev, after)
			}
			if !slices.EqualFunc(caps, s.List(protocol.AudienceLLM), func(a, b protocol.Capability) bool { return a.Name == b.Name }) {
				t.Fatal("ListRevision lists other capabilities than List")
			}
			if after == other.RegistryRevision() {
				t.Fatal("two sessions' registries share a revision")
			}
		})
	}
}

// A turn runner builds what a model step offers from the registry once,
// and builds it again only when the revision says the registry changed.
func ExampleSession_RegistryRevision() {
	s := session.New("demo", nil)
	caps, rev := s.ListRevision(protocol.AudienceLLM)
	fmt.Println(len(caps), "capability listed")

	fmt.Println("unchanged:", s.RegistryRevision() == rev)
	_ = s.Register(session.Client, protocol.Capability{
		Name:        "platform.react",
		Description: "Acknowledge a user message with an emoji.",
		InputSchema: json.RawMessage(`{"type":"object"}`),
		Side:        protocol.SideClient,
		Origin:      protocol.Origin{Kind: protocol.OriginClient},
	})
	if s.RegistryRevision() != rev {
		caps, rev = s.ListRevision(protocol.AudienceLLM)
		fmt.Println("changed:", len(caps), "capabilities listed")
	}
	fmt.Println("unchanged:", s.RegistryRevision() == rev)
	// Output:
	// 1 capability listed
	// unchanged: true
	// changed: 2 capabilities listed
	// unchanged: true
}
