package session

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/brainrt/brain/protocol"
)

// defCap is a client capability named name with input schema schema.
func defCap(name, schema string) protocol.Capability {
	return protocol.Capability{Name: name, Description: "shared " + name, InputSchema: json.RawMessage(schema),
		Side: protocol.SideClient, Origin: protocol.Origin{Kind: protocol.OriginClient},
		Audience: []protocol.Audience{protocol.AudienceLLM}}
}

// registered returns the definition session s holds for name, and the one
// its latest capability_register event carries.
func registered(t *testing.T, s *Session, name string) (held, event *protocol.Capability) {
	t.Helper()
	s.mu.Lock()
	r := s.caps[name]
	s.mu.Unlock()
	if r == nil {
		t.Fatalf("%q is not registered", name)
	}
	sub := s.Subscribe(0)
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		e, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("no capability_register event for %q: %v", name, err)
		}
		if m, ok := e.Msg.(*protocol.CapabilityRegister); ok && len(m.Capabilities) == 1 && m.Capabilities[0].Name == name {
			return &r.def[0], &m.Capabilities[0]
		}
	}
}

func TestSessionsShareADefinition(t *testing.T) {
	a, b := New("def-a", nil), New("def-b", nil)
	for _, s := range []*Session{a, b} {
		if err := s.Register(Client, defCap("ui.shared", `{"type":"object"}`)); err != nil {
			t.Fatal(err)
		}
	}
	heldA, eventA := registered(t, a, "ui.shared")
	heldB, eventB := registered(t, b, "ui.shared")
	if heldA != heldB || eventA != heldA || eventB != heldA {
		t.Fatalf("two sessions registering one definition hold %p and %p, their events %p and %p: want one shared copy", heldA, heldB, eventA, eventB)
	}
	// The built-in is shared too.
	if a.caps[CapabilitiesListName].def != b.caps[CapabilitiesListName].def {
		t.Fatalf("the built-in %s is a copy a session", CapabilitiesListName)
	}
}

func TestSharedDefinitionIsTheRegistrantsCopy(t *testing.T) {
	s := New("def-c", nil)
	c := defCap("ui.copied", `{"type":"object"}`)
	if err := s.Register(Client, c); err != nil {
		t.Fatal(err)
	}
	// What the registrant does with its value afterwards changes nothing
	// registered, in this session or any that shares the definition.
	c.Audience[0] = protocol.AudienceUser
	c.InputSchema[1] = 'X'
	held, _ := registered(t, s, "ui.copied")
	if held.Audience[0] != protocol.AudienceLLM || string(held.InputSchema) != `{"type":"object"}` {
		t.Fatalf("the registered definition changed with the registrant's value: %+v", held)
	}
}

func TestTwinsUnderOneRevisionAreNotShared(t *testing.T) {
	// json.Marshal compacts a schema's text, so these two digest alike
	// (revisionOf); each session still shows the text it was given.
	a, b := New("def-d", nil), New("def-e", nil)
	if err := a.Register(Client, defCap("ui.twin", `{"type":"object"}`)); err != nil {
		t.Fatal(err)
	}
	if err := b.Register(Client, defCap("ui.twin", `{"type": "object"}`)); err != nil {
		t.Fatal(err)
	}
	heldA, _ := registered(t, a, "ui.twin")
	heldB, eventB := registered(t, b, "ui.twin")
	if a.caps["ui.twin"].rev != b.caps["ui.twin"].rev {
		t.Fatalf("the twins' revisions differ (%s, %s): the test no longer makes twins", a.caps["ui.twin"].rev, b.caps["ui.twin"].rev)
	}
	if heldA == heldB || string(heldB.InputSchema) != `{"type": "object"}` || string(eventB.InputSchema) != `{"type": "object"}` {
		t.Fatalf("the second twin shows %s (event %s), want its own text", heldB.InputSchema, eventB.InputSchema)
	}
}

func TestSharedDefinitionsAreForgotten(t *testing.T) {
	var rev string
	func() {
		s := New("def-f", nil)
		if err := s.Register(Client, defCap("ui.forgotten", `{"type":"object","title":"forgotten"}`)); err != nil {
			t.Fatal(err)
		}
		rev = s.caps["ui.forgotten"].rev
		if !definitions.shared(rev) {
			t.Fatal("a registered definition is not in the table")
		}
	}()
	// The session is gone: its definition's entry goes with it once the
	// collector has run its cleanup (in a goroutine of the runtime's).
	deadline := time.Now().Add(10 * time.Second)
	for definitions.shared(rev) && time.Now().Before(deadline) {
		runtime.GC()
		runtime.Gosched()
	}
	if definitions.shared(rev) {
		t.Fatal("a definition nothing holds is still in the table after 10 s of collections")
	}
}

// TestSharingUnderConcurrentSessions: sessions registering one definition
// at once, and ending, all get the one copy while it is held.
func TestSharingUnderConcurrentSessions(t *testing.T) {
	const n = 16
	c := defCap("ui.concurrent", `{"type":"object","title":"concurrent"}`)
	defs := make(chan *[1]protocol.Capability, n)
	keep := New("def-keep", nil) // holds the definition throughout
	if err := keep.Register(Client, c); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, n)
	for i := range n {
		go func() {
			s := New(fmt.Sprintf("def-g%d", i), nil)
			err := s.Register(Client, c)
			if err == nil {
				s.mu.Lock()
				defs <- s.caps["ui.concurrent"].def
				s.mu.Unlock()
			}
			done <- err
		}()
	}
	for range n {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	want := keep.caps["ui.concurrent"].def
	for range n {
		if got := <-defs; got != want {
			t.Fatalf("a session registering concurrently holds %p, want the shared %p", got, want)
		}
	}
}

// shared reports whether a definition is shared under rev, for tests.
func (t *definitionTable) shared(rev string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.byRev[rev]
	return ok
}
