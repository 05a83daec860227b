package server

import (
	"log/slog"
	"testing"
)

// TestForwardWarnsOncePerOwner: a failed forward warns once for each
// owner within forwardWarnEvery and logs at debug between — an owner that
// died made a warn line of every client's retry until its lease lapsed (a
// lifecycle probe).
func TestForwardWarnsOncePerOwner(t *testing.T) {
	srv := &Server{}
	for i, c := range []struct {
		owner string
		want  slog.Level
	}{{"node1", slog.LevelWarn}, {"node1", slog.LevelDebug}, {"node2", slog.LevelWarn}, {"node1", slog.LevelDebug}} {
		if got := srv.forwardLevel(c.owner); got != c.want { // the calls are microseconds apart, the window 10 s
			t.Errorf("forward %d to %s: level %v, want %v", i, c.owner, got, c.want)
		}
	}
}
