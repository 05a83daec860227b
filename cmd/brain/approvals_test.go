package main

import (
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/session"
)

// TestApprovalsConfig: approvals.timeout and approvals.peer_grace reach the
// session options; bad values are errors naming the key.
func TestApprovalsConfig(t *testing.T) {
	bad := []struct{ name, body, want string }{
		{"not a duration", "  timeout: soon\n", "approvals.timeout"},
		{"zero timeout", "  timeout: 0s\n", "approvals.timeout"},
		{"negative grace", "  peer_grace: -1s\n", "approvals.peer_grace"},
		{"huge grace", "  peer_grace: 3h\n", "approvals.peer_grace"},
		{"unknown key", "  expiry: 3m\n", "expiry"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadServeConfig(writeConfig(t, "approvals:\n"+tt.body), t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one naming %q", err, tt.want)
			}
		})
	}
	good := []struct {
		name, body     string
		timeout, grace time.Duration
	}{
		{"both", "approvals:\n  timeout: 90s\n  peer_grace: 2s\n", 90 * time.Second, 2 * time.Second},
		{"no grace", "approvals:\n  peer_grace: 0s\n", 0, -1},
		{"absent", "tools: []\n", 0, 0},
	}
	for _, tt := range good {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := loadServeConfig(writeConfig(t, tt.body), t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			var o session.Options
			cfg.Approvals.session(&o)
			if o.ApprovalTimeout != tt.timeout || o.PeerGrace != tt.grace {
				t.Fatalf("options timeout %s grace %s, want %s and %s", o.ApprovalTimeout, o.PeerGrace, tt.timeout, tt.grace)
			}
		})
	}
}
