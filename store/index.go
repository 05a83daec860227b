package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// index is the store's list of the sessions with stored events, in id
// order, for paging ([Store.SessionsPage]) and counting
// ([Store.SessionCount]) without reading the stream's subjects for each
// request: a million stored sessions would make every page read and sort
// a million subjects.
//
// It is read from the stream once, when first asked for (never at Open:
// a start loads nothing), and kept current by what this process appends
// and deletes. With an external server other nodes write too: there the
// index is read again when a request finds it older than
// externalIndexAge.
//
// An entry costs its id's bytes and a string header (16 bytes): about 40
// bytes for a 22-character id. The embedded NATS server holds its own
// entry per subject besides (its per-subject state).
type index struct {
	mu      sync.Mutex
	loaded  bool
	loading chan struct{} // closed when a load in flight ends; nil when none runs
	at      time.Time     // when the loaded index was read
	pending []indexOp     // what happened while a load ran, applied after it
	err     error         // the last load's failure, returned to whoever waited on it

	// The ids: base, sorted, plus recent additions (sorted, few) and
	// removals of base's ids, merged into base once either grows past
	// indexMerge: an insert never moves a million strings.
	base []string
	add  []string
	del  map[string]struct{}
}

// indexMerge bounds the additions and removals kept beside the base
// list before they are merged into it.
const indexMerge = 4096

// externalIndexAge is how old an index of an external server's stream may
// be before a request reads it again (other nodes create sessions).
const externalIndexAge = 5 * time.Second

type indexOp struct {
	id     string
	remove bool
}

// stored records that session id has stored events (its first append).
func (x *index) stored(id string) { x.apply(indexOp{id: id}) }

// removed records that session id's events were deleted.
func (x *index) removed(id string) { x.apply(indexOp{id: id, remove: true}) }

func (x *index) apply(op indexOp) {
	x.mu.Lock()
	defer x.mu.Unlock()
	switch {
	case x.loading != nil:
		// The load may or may not see it: applied once the load is in.
		x.pending = append(x.pending, op)
	case x.loaded:
		x.applyLocked(op)
	}
	// Not loaded: the load to come reads it from the stream.
}

func (x *index) applyLocked(op indexOp) {
	_, inBase := slices.BinarySearch(x.base, op.id)
	j, inAdd := slices.BinarySearch(x.add, op.id)
	_, gone := x.del[op.id]
	switch {
	case op.remove && inAdd:
		x.add = slices.Delete(x.add, j, j+1)
	case op.remove && inBase && !gone:
		if x.del == nil {
			x.del = map[string]struct{}{}
		}
		x.del[op.id] = struct{}{}
	case !op.remove && inBase && gone:
		delete(x.del, op.id)
	case !op.remove && !inBase && !inAdd:
		x.add = slices.Insert(x.add, j, strings.Clone(op.id))
	}
	if len(x.add) > indexMerge || len(x.del) > indexMerge {
		x.mergeLocked()
	}
}

// mergeLocked folds the additions and removals into base.
func (x *index) mergeLocked() {
	out := make([]string, 0, len(x.base)+len(x.add)-len(x.del))
	i, j := 0, 0
	for i < len(x.base) || j < len(x.add) {
		if j == len(x.add) || (i < len(x.base) && x.base[i] < x.add[j]) {
			if _, gone := x.del[x.base[i]]; !gone {
				out = append(out, x.base[i])
			}
			i++
			continue
		}
		out = append(out, x.add[j])
		j++
	}
	x.base, x.add, x.del = out, nil, nil
}

// ready loads the index when it is not loaded (or, stale, is older than
// maxAge: 0 means never stale), with read doing the reading; concurrent
// callers share one load.
func (x *index) ready(ctx context.Context, maxAge time.Duration, read func(context.Context) ([]string, error)) error {
	for {
		x.mu.Lock()
		fresh := x.loaded && (maxAge == 0 || time.Since(x.at) < maxAge)
		if fresh {
			x.mu.Unlock()
			return nil
		}
		if ch := x.loading; ch != nil {
			x.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return ctx.Err()
			}
			x.mu.Lock()
			err := x.err
			loaded := x.loaded
			x.mu.Unlock()
			if loaded {
				return nil
			}
			if err != nil {
				return err
			}
			continue
		}
		ch := make(chan struct{})
		x.loading = ch
		x.mu.Unlock()

		at := time.Now()
		ids, err := read(ctx)
		x.mu.Lock()
		x.loading = nil
		x.err = err
		if err == nil {
			slices.Sort(ids)
			x.base, x.add, x.del = slices.Compact(ids), nil, nil
			x.loaded, x.at = true, at
			for _, op := range x.pending {
				x.applyLocked(op)
			}
		}
		x.pending = nil
		x.mu.Unlock()
		close(ch)
		return err
	}
}

// page returns up to limit ids after the id after ("" for the first), in
// order, and whether more follow. The index is loaded.
func (x *index) page(after string, limit int) (ids []string, more bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	i, found := slices.BinarySearch(x.base, after)
	if found {
		i++
	}
	j, found := slices.BinarySearch(x.add, after)
	if found {
		j++
	}
	for i < len(x.base) || j < len(x.add) {
		var id string
		if j == len(x.add) || (i < len(x.base) && x.base[i] < x.add[j]) {
			id = x.base[i]
			i++
			if _, gone := x.del[id]; gone {
				continue
			}
		} else {
			id = x.add[j]
			j++
		}
		if len(ids) == limit {
			return ids, true
		}
		ids = append(ids, id)
	}
	return ids, false
}

// count is the number of ids. The index is loaded.
func (x *index) count() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.base) + len(x.add) - len(x.del)
}

// scanBatch is how many subjects one fetch of scanSessions asks for.
const scanBatch = 4096

// scanTimeout bounds the creation of scanSessions' consumer (unless ctx
// ends sooner, or Options.Timeout is longer).
const scanTimeout = 2 * time.Minute

// scanSessions reads the id of every session with stored events: one
// message per subject, the last, headers only, through an ephemeral
// consumer — the server walks its per-subject state once, in stream
// order (a stream info listing subjects would sort them all for every
// hundred thousand).
func (s *Store) scanSessions(ctx context.Context) ([]string, error) {
	// The server counts the subjects before it answers the consumer's
	// creation: seconds for a million, more than a request's timeout.
	scanBound := func(ctx context.Context) (context.Context, context.CancelFunc) {
		return context.WithTimeout(ctx, max(s.opts.Timeout, scanTimeout))
	}
	cons, done, err := s.ephemeralConsumer(ctx, scanBound, "scan", jetstream.ConsumerConfig{
		FilterSubject: subjectPrefix + "*",
		DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy,
		HeadersOnly:   true,
	})
	if err != nil {
		return nil, err
	}
	defer done()
	pending := cons.CachedInfo().NumPending
	ids := make([]string, 0, pending)
	for uint64(len(ids)) < pending {
		rctx, cancel := s.requestContext(ctx)
		batch, err := cons.Fetch(int(min(pending-uint64(len(ids)), scanBatch)), jetstream.FetchContext(rctx))
		if err != nil {
			cancel()
			return nil, fmt.Errorf("fetch: %w", err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			ids = append(ids, strings.TrimPrefix(m.Subject(), subjectPrefix))
		}
		err = batch.Error()
		cancel()
		if err != nil {
			return nil, fmt.Errorf("fetch: %w", err)
		}
		if got == 0 {
			break // sessions deleted while scanning: fewer than counted
		}
	}
	return ids, nil
}

// loadIndex makes the index ready for a request.
func (s *Store) loadIndex(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	maxAge := time.Duration(0)
	if s.ns == nil {
		maxAge = externalIndexAge
	}
	// Not retried as a request is (store/retry.go bounds the whole to
	// Options.Timeout on the embedded server): the read of a million
	// subjects takes longer than that, and a failed one is read again by
	// the next request.
	err := s.idx.ready(ctx, maxAge, func(ctx context.Context) ([]string, error) {
		if h := s.failing(); h != nil {
			return nil, &UnavailableError{Op: "list sessions", Health: *h}
		}
		return s.scanSessions(ctx)
	})
	if errors.Is(err, ErrUnavailable) {
		return err
	}
	if err != nil {
		return fmt.Errorf("store: list sessions: %w", err)
	}
	return nil
}

// SessionsPage returns, in id order, up to limit ids of sessions with
// stored events that sort after the id after ("" for the first page), and
// whether more follow. The first call reads every session's id from the
// stream (once: what this process appends and deletes keeps the list
// current; with an external server it is read again every few seconds,
// as other nodes write); later pages cost the page.
func (s *Store) SessionsPage(ctx context.Context, after string, limit int) (ids []string, more bool, err error) {
	if limit <= 0 {
		return nil, false, fmt.Errorf("store: list sessions: limit %d, want at least 1", limit)
	}
	if err := s.loadIndex(ctx); err != nil {
		return nil, false, err
	}
	ids, more = s.idx.page(after, limit)
	return ids, more, nil
}

// SessionCount returns how many sessions have stored events (see
// [Store.SessionsPage] for what it reads).
func (s *Store) SessionCount(ctx context.Context) (int, error) {
	if err := s.loadIndex(ctx); err != nil {
		return 0, err
	}
	return s.idx.count(), nil
}
