package store

import (
	"context"
	"fmt"
	"log/slog"
)

// Log attribute keys.
const (
	logKeyComponent = "component"
	logKeyError     = "error"
)

// natsLogger sends the embedded server's logs to slog: notices at Debug
// (they are its start and stop banner — version, git commit, JetStream
// limits, "Server is ready" — about 18 lines a start that say nothing an
// operator acts on), warnings at Warn, errors (fatal ones too) at Error.
// The server's own debug and trace logs are never enabled.
type natsLogger struct{ l *slog.Logger }

func (n natsLogger) log(level slog.Level, format string, v []any) {
	if n.l.Enabled(context.Background(), level) {
		n.l.Log(context.Background(), level, fmt.Sprintf(format, v...))
	}
}

func (n natsLogger) Noticef(format string, v ...any) { n.log(slog.LevelDebug, format, v) }
func (n natsLogger) Warnf(format string, v ...any)   { n.log(slog.LevelWarn, format, v) }
func (n natsLogger) Fatalf(format string, v ...any)  { n.log(slog.LevelError, format, v) }
func (n natsLogger) Errorf(format string, v ...any)  { n.log(slog.LevelError, format, v) }
func (n natsLogger) Debugf(format string, v ...any)  { n.log(slog.LevelDebug, format, v) }
func (n natsLogger) Tracef(format string, v ...any)  { n.log(slog.LevelDebug, format, v) }
