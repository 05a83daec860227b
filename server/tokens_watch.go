package server

import (
	"context"
	"log/slog"
	"os"
	"time"
)

// WatchTokens keeps tokens in step with the tokens file at path until ctx
// ends: every interval (default 2 s) it looks at the file's size and
// modification time, and when they changed it reads the file again
// ([ReadTokens]) and replaces the set ([Tokens.Replace]). A file that does
// not read — malformed, readable by others, gone — leaves the set as it
// was, with an error logged: tokens are added and revoked by editing the
// file, without a restart.
func WatchTokens(ctx context.Context, tokens *Tokens, path string, interval time.Duration, log *slog.Logger) {
	if interval <= 0 {
		interval = 2 * time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	stamp := func() (time.Time, int64) {
		fi, err := os.Stat(path)
		if err != nil {
			return time.Time{}, -1
		}
		return fi.ModTime(), fi.Size()
	}
	// The first look reads the file whatever it holds: an edit made between
	// the load and this goroutine's start is not missed.
	lastMod, lastSize := time.Time{}, int64(-2)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		mod, size := stamp()
		if mod.Equal(lastMod) && size == lastSize {
			continue
		}
		lastMod, lastSize = mod, size
		list, err := ReadTokens(path)
		if err == nil {
			err = tokens.Replace(list)
		}
		if err != nil {
			log.Error("tokens file not reloaded: the tokens in use are unchanged", slog.String("path", path), slog.String("error", err.Error()))
			continue
		}
		log.Debug("tokens read", slog.String("path", path), slog.Int("tokens", len(list)))
	}
}
