package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// A journal reads back the events it stored (session.EventReader), so
// that a session keeps only its latest events in memory and reads the
// older ones of its replay window back when a subscriber needs them
// (session.Options.History). A read starts at a stream sequence known to
// come at or before the first event asked for: an anchor, a session seq
// and its stream sequence, which the journal records for every
// anchorEvery-th event it appends and at the end of every batch a read
// goes through. Without one (a journal created for a session that was
// stored before, and not read back since) it starts at the session's
// first event, and the anchors it passes make the next read short.
const (
	// anchorEvery is how many appended events apart the journal records
	// an anchor: a read starts at most this many events before the first
	// it returns.
	anchorEvery = 256
	// maxAnchors bounds a journal's anchors (16 bytes each): the newest
	// cover the latest 8,192 events, twice a session's default replay
	// window (session.Options.LogSize).
	maxAnchors = 32
)

// anchor is a session event's seq and its stream sequence.
type anchor struct{ seq, stream uint64 }

// recordAnchor remembers that event seq is at stream sequence stream.
// Guarded by j.mu.
func (j *journal) recordAnchor(seq, stream uint64) {
	i, found := slices.BinarySearchFunc(j.anchors, seq, func(a anchor, seq uint64) int { return cmp.Compare(a.seq, seq) })
	if found {
		return
	}
	j.anchors = slices.Insert(j.anchors, i, anchor{seq, stream})
	if len(j.anchors) > maxAnchors {
		j.anchors = slices.Delete(j.anchors, 0, 1) // the oldest: reads are of the latest events
	}
}

// startFor returns the stream sequence a read of the events after seq
// after starts at: that of the newest anchor at or before the first of
// them, or 1. Guarded by j.mu.
func (j *journal) startFor(after uint64) uint64 {
	for i := len(j.anchors) - 1; i >= 0; i-- {
		if j.anchors[i].seq <= after+1 {
			return j.anchors[i].stream
		}
	}
	return 1
}

// ReadEvents returns the session's stored events with after < seq <=
// through, in order (session.EventReader). It returns fewer when the
// store holds fewer — events whose append failed and waits to be sent
// again, or a session deleted meanwhile — and an error naming what went
// wrong when the store cannot be read. It waits for no append, and no
// append waits for it beyond one batch of the read (see loadBatch).
func (j *journal) ReadEvents(ctx context.Context, after, through uint64) ([]session.Event, error) {
	if through <= after {
		return nil, nil
	}
	if j.s.closed.Load() {
		return nil, ErrClosed
	}
	j.mu.Lock()
	start := j.startFor(after)
	j.mu.Unlock()
	var events []session.Event
	var err error
	if j.s.direct {
		events, err = j.readDirect(ctx, start, after, through)
	} else {
		events, err = j.readConsumer(ctx, start, after, through)
	}
	if err != nil {
		return nil, fmt.Errorf("store: session %q: read back events %d to %d: %w", j.id, after+1, through, err)
	}
	return events, nil
}

// keep adds e to a read's events when it was asked for: after < seq <=
// through.
func keep(events *[]session.Event, e session.Event, after, through uint64) {
	if e.Seq > after && e.Seq <= through {
		*events = append(*events, e)
	}
}

// readDirect reads with batched direct gets from stream sequence start,
// until an event reaches through or the session has no more.
func (j *journal) readDirect(ctx context.Context, start, after, through uint64) ([]session.Event, error) {
	var events []session.Event
	err := j.s.withLoadSlot(func(sl *replySlot) (err error) {
		events, err = j.readDirectOn(ctx, sl, start, after, through)
		return err
	})
	return events, err
}

// readDirectOn is readDirect on the slot sl.
func (j *journal) readDirectOn(ctx context.Context, sl *replySlot, start, after, through uint64) ([]session.Event, error) {
	s := j.s
	events := make([]session.Event, 0, min(through-after, 1<<12))
	var last uint64 // the seq of the last event read
	decode := func(data []byte) error {
		f, err := protocol.DecodeFrame(data)
		if err != nil {
			return err
		}
		last = f.Seq
		keep(&events, session.Event{Seq: f.Seq, Msg: f.Msg}, after, through)
		return nil
	}
	for next := start; ; {
		b, err := s.directGet(ctx, sl, j.subject, next, s.loadBatch, decode)
		var bad *badMessage
		switch {
		case errors.As(err, &bad):
			return nil, s.undecodable(ctx, j.subject, next, bad)
		case err != nil:
			return nil, err
		case !b.found:
			return events, nil // nothing more on the subject
		}
		if b.sent > 0 {
			j.mu.Lock()
			j.recordAnchor(last, b.last)
			j.mu.Unlock()
		}
		if last >= through || b.pending <= b.sent {
			return events, nil
		}
		next = b.last + 1
		if s.loadHook != nil {
			s.loadHook()
		}
	}
}

// readConsumer reads through an ephemeral consumer from stream sequence
// start (a replicated stream, which refuses direct gets).
func (j *journal) readConsumer(ctx context.Context, start, after, through uint64) ([]session.Event, error) {
	s := j.s
	cons, done, err := s.ephemeralConsumer(ctx, s.requestContext, "read back", jetstream.ConsumerConfig{
		FilterSubject: j.subject,
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   start,
	})
	if err != nil {
		return nil, err
	}
	defer done()
	pending := cons.CachedInfo().NumPending
	var events []session.Event
	var batch []session.Event
	for read := uint64(0); read < pending; {
		rctx, cancel := s.requestContext(ctx)
		batch = batch[:0]
		got, err := fetchInto(rctx, cons, int(min(pending-read, uint64(s.pullBatch))), &batch)
		cancel()
		if err != nil {
			return nil, err
		}
		if got == 0 {
			return events, nil // deleted or trimmed meanwhile: what was read
		}
		read += uint64(got)
		for _, e := range batch {
			keep(&events, e, after, through)
		}
		if batch[len(batch)-1].Seq >= through {
			break
		}
	}
	return events, nil
}
