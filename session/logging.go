package session

import (
	"context"
	"log/slog"
)

// Log attribute keys. Capabilities are logged under the spec's taxonomy,
// "capability:<origin kind>:<name>".
const (
	keySession    = "session"
	keyCapability = "capability"
	keyOrigin     = "origin"
	keyCall       = "call"
	keyInvoker    = "invoker"
	keyPeer       = "peer"
	keyCode       = "code"
)

// The helpers check Enabled first so that a disabled level costs no
// allocation on the invocation path.

func (s *Session) logDebug(msg string, attrs ...slog.Attr) {
	s.logAt(slog.LevelDebug, msg, attrs)
}

func (s *Session) logInfo(msg string, attrs ...slog.Attr) {
	s.logAt(slog.LevelInfo, msg, attrs)
}

func (s *Session) logError(msg string, attrs ...slog.Attr) {
	s.logAt(slog.LevelError, msg, attrs)
}

func (s *Session) logAt(level slog.Level, msg string, attrs []slog.Attr) {
	ctx := context.Background()
	if s.log.Enabled(ctx, level) {
		s.log.LogAttrs(ctx, level, msg, attrs...)
	}
}
