package store

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
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
//
// An error that says the server's file store could not write is also
// told to writeFailed (the store's health: write.go).
type natsLogger struct {
	l           *slog.Logger
	writeFailed func(why string)
}

func (n natsLogger) log(level slog.Level, format string, v []any) {
	watch := level >= slog.LevelWarn && n.writeFailed != nil
	if !watch && !n.l.Enabled(context.Background(), level) {
		return
	}
	msg := fmt.Sprintf(format, v...)
	if watch {
		for _, m := range stoppedWriting {
			if i := strings.Index(msg, m); i >= 0 {
				n.writeFailed(strings.TrimPrefix(msg[i:], criticalWrite))
				break
			}
		}
	}
	n.l.Log(context.Background(), level, msg)
}

// stoppedWriting are the beginnings of nats-server's (v2.15.2) lines that
// say it stores nothing more until it restarts: a file store's first
// write error, which it keeps (setWriteErr: "Filestore [BRAIN_EVENTS]
// Critical write error: write …: no space left on device"), and
// JetStream shut down over a full disk or a file it may not write.
var stoppedWriting = []string{criticalWrite, "JetStream out of space", "permission denied while writing msg, disabling JetStream", "permission denied when flushing stream state, disabling JetStream"}

const criticalWrite = "Critical write error: "

func (n natsLogger) Noticef(format string, v ...any) { n.log(slog.LevelDebug, format, v) }
func (n natsLogger) Warnf(format string, v ...any)   { n.log(slog.LevelWarn, format, v) }
func (n natsLogger) Fatalf(format string, v ...any)  { n.log(slog.LevelError, format, v) }
func (n natsLogger) Errorf(format string, v ...any)  { n.log(slog.LevelError, format, v) }
func (n natsLogger) Debugf(format string, v ...any)  { n.log(slog.LevelDebug, format, v) }
func (n natsLogger) Tracef(format string, v ...any)  { n.log(slog.LevelDebug, format, v) }
