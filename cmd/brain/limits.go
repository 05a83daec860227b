package main

import (
	"github.com/brainrt/brain/server"
	"github.com/brainrt/brain/session"
)

// limitsConfig is the serve config's `limits:` (docs/operations.md,
// "Limits"): the quotas of tokens, connections and sessions. An absent or
// zero key keeps its default; -1 makes a server limit unlimited.
type limitsConfig struct {
	SessionsPerToken       int     `yaml:"sessions_per_token"`
	FramesPerSecond        float64 `yaml:"frames_per_second"`
	FrameBurst             int     `yaml:"frame_burst"`
	JournalBytesPerSession int64   `yaml:"journal_bytes_per_session"`
	CapabilitiesPerSession int     `yaml:"capabilities_per_session"`
	PendingCallsPerSession int     `yaml:"pending_calls_per_session"`
}

// validate checks every key; errors name it and where it is.
func (l limitsConfig) validate(pos positions) error {
	check := func(key string, v float64, unlimitedOK bool) error {
		switch {
		case v >= 0:
		case v == -1 && unlimitedOK:
		case unlimitedOK:
			return pos.errorf("$.limits."+key, "%v: want a positive number, 0 for the default or -1 for unlimited", v)
		default:
			return pos.errorf("$.limits."+key, "%v: want a positive number, or 0 for the default", v)
		}
		return nil
	}
	for _, c := range []struct {
		key         string
		v           float64
		unlimitedOK bool
	}{
		{"sessions_per_token", float64(l.SessionsPerToken), true},
		{"frames_per_second", l.FramesPerSecond, true},
		{"frame_burst", float64(l.FrameBurst), true},
		{"journal_bytes_per_session", float64(l.JournalBytesPerSession), true},
		{"capabilities_per_session", float64(l.CapabilitiesPerSession), false},
		{"pending_calls_per_session", float64(l.PendingCallsPerSession), false},
	} {
		if err := check(c.key, c.v, c.unlimitedOK); err != nil {
			return err
		}
	}
	if (l.FramesPerSecond == -1) != (l.FrameBurst == -1) && l.FramesPerSecond != 0 && l.FrameBurst != 0 {
		return pos.errorf("$.limits", "frames_per_second and frame_burst are unlimited (-1) together or not at all")
	}
	return nil
}

// server returns the server's quotas.
func (l limitsConfig) server() server.Limits {
	return server.Limits{
		SessionsPerToken:       l.SessionsPerToken,
		FramesPerSecond:        l.FramesPerSecond,
		FrameBurst:             l.FrameBurst,
		JournalBytesPerSession: l.JournalBytesPerSession,
	}
}

// session sets the per-session quotas in o.
func (l limitsConfig) session(o *session.Options) {
	o.MaxCapabilities = l.CapabilitiesPerSession
	o.MaxPendingCalls = l.PendingCallsPerSession
}
