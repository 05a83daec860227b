package host_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// TestArtifactStateStaysInItsSession: memo keeps its last note in a
// package variable. Sessions alice and bob each call it through their own
// session: bob never sees alice's note (the red team saw it, with one
// instance pool per tool across sessions); alice's own next call does.
// Once alice leaves the environment her instance is gone, and a tool
// whose policy shares instances sees every session's notes, as it opted
// into.
func TestArtifactStateStaysInItsSession(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		shared bool
	}{{"per session", false}, {"shared by policy", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var opts *kernel.Options
			if tc.shared {
				yes := true
				opts = &kernel.Options{Policies: []kernel.PolicyRule{{Pattern: "memo", Policy: kernel.Policy{ShareInstances: &yes}}}}
			}
			e := newEnv(t, opts)
			attach(t, e, kernel.Attachment{Tool: load(t, newHost(t, nil), "memo")})
			alice, bob := session.New("alice", nil), session.New("bob", nil)
			must(t, e.Expose(alice))
			must(t, e.Expose(bob))
			call := func(s *session.Session, note string) string {
				t.Helper()
				out := s.Invoke(ctx, protocol.AudienceLLM, "memo", json.RawMessage(`{"note":"`+note+`"}`))
				if !out.IsOK() {
					t.Fatalf("%s: %+v", s.ID(), out.Err)
				}
				var v struct{ Previous string }
				must(t, json.Unmarshal(out.Value, &v))
				return v.Previous
			}
			call(alice, "alice's secret")
			got := call(bob, "bob's note")
			switch {
			case tc.shared && got != "alice's secret":
				t.Fatalf("a shared instance: bob got %q, want alice's note", got)
			case !tc.shared && got != "":
				t.Fatalf("bob got %q from another session's instance", got)
			}
			if !tc.shared {
				if got := call(alice, "again"); got != "alice's secret" {
					t.Fatalf("alice's own next call got %q, want her note", got)
				}
				e.Unexpose(alice) // she leaves: her instance goes
				if got := call(bob, "bob again"); got != "bob's note" {
					t.Fatalf("bob's own next call got %q", got)
				}
			}
		})
	}
}
