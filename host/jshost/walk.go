package jshost

import (
	"context"
	"io/fs"
	"sync"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
)

// A TypeScript tool's fs.walk is the handle's own Walk, run a step at a
// time: the prelude's walk was a readDir a directory in JavaScript, which
// lost what Walk enforces — the grant's max_entries over the whole walk
// (a probe listed 15 entries under max_entries: 5), the check that each
// directory listed is the one opened, the context before every entry.
// Walk calls back for each entry, and the script cannot be called from
// inside a host function; so the walk runs on a goroutine of its own that
// hands each entry over (fs.walkNext) and waits for the script's answer —
// skip this directory or go on — before Walk goes on. One entry is in
// flight at a time, and the walk ends with the call (walkStop, closeWalks).

// walker is one fs.walk in progress.
type walker struct {
	cancel  context.CancelFunc
	entries chan walkEntry // Walk's next entry; closed when Walk returns
	decide  chan bool      // the script's answer to the last entry: skip it
	err     error          // Walk's result, set before entries is closed
	started bool           // an entry was handed over: the next step answers it
	done    sync.WaitGroup
}

type walkEntry struct {
	Path string           `json:"path"`
	Info *handle.FileInfo `json:"info,omitempty"`
	Done bool             `json:"done,omitempty"`
}

// walkStart begins a walk of path with the call's fs handle; its id is
// what walkNext and walkStop take.
func (cs *callState) walkStart(f handle.FS, path string) int {
	ctx, cancel := context.WithCancel(cs.ctx)
	w := &walker{cancel: cancel, entries: make(chan walkEntry), decide: make(chan bool)}
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		w.err = f.Walk(ctx, path, func(p string, info handle.FileInfo) error {
			select {
			case w.entries <- walkEntry{Path: p, Info: &info}:
			case <-ctx.Done():
				return ctx.Err()
			}
			select {
			case skip := <-w.decide:
				if skip {
					return fs.SkipDir
				}
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		close(w.entries)
	}()
	cs.walks = append(cs.walks, w)
	return len(cs.walks)
}

// walkNext answers the entry handed over last (skip) and returns the
// next one, or done with Walk's result.
func (cs *callState) walkNext(id int, skip bool) (walkEntry, error) {
	if id < 1 || id > len(cs.walks) || cs.walks[id-1] == nil {
		return walkEntry{}, protocol.Errorf(protocol.CodeInvalidArgument, "no walk %d in progress", id)
	}
	w := cs.walks[id-1]
	if w.started {
		select {
		case w.decide <- skip:
		case e, ok := <-w.entries: // Walk ended instead of asking (its context ended)
			if ok {
				return e, nil
			}
			return walkEntry{Done: true}, cs.walkEnded(id)
		}
	}
	w.started = true
	e, ok := <-w.entries
	if !ok {
		return walkEntry{Done: true}, cs.walkEnded(id)
	}
	return e, nil
}

// walkEnded forgets walk id, whose Walk returned, and returns its result.
func (cs *callState) walkEnded(id int) error {
	w := cs.walks[id-1]
	cs.walks[id-1] = nil
	w.done.Wait()
	w.cancel()
	return w.err
}

// walkStop ends walk id, if it is still in progress.
func (cs *callState) walkStop(id int) {
	if id < 1 || id > len(cs.walks) || cs.walks[id-1] == nil {
		return
	}
	w := cs.walks[id-1]
	cs.walks[id-1] = nil
	w.cancel()
	w.done.Wait()
}

// closeWalks ends the walks the call left in progress.
func (cs *callState) closeWalks() {
	for i := range cs.walks {
		cs.walkStop(i + 1)
	}
}
