package server

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/brainrt/brain/internal/regularfile"
)

// WatchTokens keeps tokens in step with the tokens file at path until ctx
// ends: every interval (default 2 s) it looks at the file's stamp — its
// size, modification time and mode, and where the system has them
// (Linux) its inode and change time — and when that changed it reads the
// file again ([ReadTokens]) and replaces the set ([Tokens.Replace]). A
// file that does not read — malformed, readable by others, gone —
// leaves the set as it was, with an error logged, and is read again at
// every look until it reads (so that `chmod 600`, which the error asks
// for, takes effect). Every backstopLooks looks it is read whatever its
// stamp, and applied if its bytes changed: a file replaced with its
// size and modification time kept (cp -p, rsync -a, an unpacked
// archive) is seen on a system without change times too. Tokens are
// added and revoked by editing the file, without a restart.
func WatchTokens(ctx context.Context, tokens *Tokens, path string, interval time.Duration, log *slog.Logger) {
	if interval <= 0 {
		interval = 2 * time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The first look reads the file whatever it holds: an edit made between
	// the load and this goroutine's start is not missed.
	var (
		last     fileStamp
		applied  []byte // the bytes of the file last applied
		failed   = true // the last read failed (or none was made): read at every look
		lastErr  string
		sinceAll int
	)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sinceAll++
		stamp := stampOf(path)
		// A file modified within two looks of now may be written again
		// within its stamp's resolution, unseen: it is looked at again.
		racy := time.Since(stamp.mod) < 2*interval
		if stamp == last && !failed && !racy && sinceAll < backstopLooks {
			continue
		}
		last, sinceAll = stamp, 0
		data, err := regularfile.Read(path, maxTokensFile)
		var list []Token
		if err == nil {
			// Checked whatever the bytes: a chmod that left the file
			// readable by others changes its stamp, not its bytes.
			list, err = parseTokens(path, data)
		}
		if err == nil && !failed && bytes.Equal(data, applied) {
			continue // the same tokens
		}
		if err == nil {
			err = tokens.Replace(list)
		}
		if err != nil {
			failed = true
			if err.Error() != lastErr { // once, not at every look
				lastErr = err.Error()
				log.Error("tokens file not reloaded: the tokens in use are unchanged", slog.String("path", path), slog.String("error", lastErr))
			}
			continue
		}
		if lastErr != "" { // the refusal logged is over: say so
			log.Info("tokens file read again: its tokens are in use", slog.String("path", path), slog.Int("tokens", len(list)))
		} else {
			log.Debug("tokens read", slog.String("path", path), slog.Int("tokens", len(list)))
		}
		failed, lastErr, applied = false, "", data
	}
}

// backstopLooks is how many looks pass between reads of the tokens file
// whatever its stamp: 30 s at the default interval.
const backstopLooks = 15

// fileStamp is what WatchTokens compares between looks (stampOf).
type fileStamp struct {
	mod        time.Time
	size       int64
	mode       os.FileMode
	ino, ctime int64 // 0 where the system does not tell (stamp_other.go)
}
