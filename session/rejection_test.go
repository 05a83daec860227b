package session

import "testing"

// TestRejection: a rejected call's message names its decider when the
// decider gave a name, and says nothing of one otherwise — a model token
// without a name (brain serve's default) decided through an MCP host's
// elicitation read "the user () rejected the call".
func TestRejection(t *testing.T) {
	for _, tc := range []struct{ by, feedback, want string }{
		{"ada", "not now", "the user (ada) rejected the call: not now"},
		{"ada", "", "the user (ada) rejected the call"},
		{"", "not now", "the user rejected the call: not now"},
		{"", "", "the user rejected the call"},
	} {
		if got := rejection(tc.by, tc.feedback); got != tc.want {
			t.Errorf("rejection(%q, %q) = %q, want %q", tc.by, tc.feedback, got, tc.want)
		}
	}
}
