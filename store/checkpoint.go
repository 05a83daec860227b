package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// A session's checkpoint (session.Checkpoint) is kept in a key-value
// bucket of its own, beside the session's events: a wake reads it and the
// events stored after it instead of every event (Store.ResumeFrom), and
// the kernel writes it when a session hibernates (Store.Checkpoint). The
// bucket's file blocks hold only checkpoints, a few KiB each, so a wake
// after a start seldom pays for loading a block of the events stream —
// 8 MB, whose first read took 9–16 ms (docs/performance.md).
//
// A checkpoint is trusted only while the events stream holds exactly the
// events it covers and those after it: the subject's message count
// (which the server keeps in memory, per subject) must be at least the
// checkpoint's, and the events after it must continue it. A session's
// events are only ever appended, and purged whole when it is deleted —
// which purges its checkpoint first, under the session's fence, which a
// checkpoint is written under too.
//
// Only the embedded store with one replica keeps checkpoints; so does
// nothing that caps a session's events (Options.MaxEventsPerSession drops
// old ones, which the count cannot see).
const (
	checkpointBucket  = "brain_checkpoints"
	checkpointSubject = "$KV." + checkpointBucket + "." // and the session's id
	// checkpointVersion is the encoding's version: a checkpoint of
	// another is ignored (the session is loaded from its events) and
	// written again at its next hibernation.
	checkpointVersion = 1
	// minCheckpointEvents is the fewest events a session must have
	// stored for its first checkpoint: a shorter one is read whole as
	// fast, and its checkpoint — its latest 32 events and more — would
	// take as much disk again as its events.
	minCheckpointEvents = 128
)

// storedCheckpoint is a checkpoint as the bucket holds it: the session's
// checkpoint with its events as frames (the journal's encoding), the
// stream sequence of its last event, and the bytes its events take in the
// stream.
type storedCheckpoint struct {
	Version int `json:"v"`
	session.Checkpoint
	// Created is when the events stream was created: a stream made anew
	// (its directory deleted) holds other events under the same ids.
	Created time.Time         `json:"created"`
	Stream  uint64            `json:"stream"`
	Bytes   int64             `json:"bytes"`
	State   []json.RawMessage `json:"state"`
	Latest  []json.RawMessage `json:"latest"`
}

// checkpointsWanted reports whether a store keeps checkpoints (see above).
func checkpointsWanted(direct bool, o Options) bool {
	return direct && o.Replicas <= 1 && o.MaxEventsPerSession == 0
}

// openCheckpoints makes the checkpoints bucket.
func (s *Store) openCheckpoints(ctx context.Context) error {
	kv, err := s.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      checkpointBucket,
		Description: "brain: each hibernated session's checkpoint, which a wake reads instead of every event",
		Storage:     jetstream.FileStorage,
		Replicas:    1,
	})
	if err != nil {
		return fmt.Errorf("store: create bucket %s: %w", checkpointBucket, err)
	}
	stream, err := s.js.Stream(ctx, "KV_"+checkpointBucket)
	if err != nil {
		return fmt.Errorf("store: bucket %s: %w", checkpointBucket, err)
	}
	s.checkpoints, s.checkpointStream = kv, stream
	return nil
}

// KeepsCheckpoints reports whether the store keeps checkpoints: the
// embedded store with one replica and no MaxEventsPerSession. Elsewhere
// Checkpoint does nothing and ResumeFrom is Resume.
func (s *Store) KeepsCheckpoints() bool { return s.checkpoints != nil }

// dropCheckpoints deletes the checkpoints bucket of an embedded store
// that keeps none now: one opened with MaxEventsPerSession drops old
// events while the count stays the same, and its checkpoints would be
// taken for current if the cap were lifted again.
func (s *Store) dropCheckpoints(ctx context.Context) error {
	err := s.js.DeleteKeyValue(ctx, checkpointBucket)
	if err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("store: delete bucket %s: %w", checkpointBucket, err)
	}
	return nil
}

// Checkpoint writes the checkpoint of a session's stored events — the
// one it had, brought up to the events stored since — for
// [Store.ResumeFrom] to read at its next wake. opts are the options the
// session is restored with (session.Compact). It does nothing on a store
// that keeps no checkpoints (see [Store.ResumeFrom]), for a session of
// fewer than 128 stored events and no checkpoint yet (read whole about as
// fast), or when nothing was stored since the last checkpoint.
// The session's appends wait while it runs. A checkpoint too large for
// the bucket (a registry of very large definitions) is not written: the
// session is loaded from its events.
func (s *Store) Checkpoint(ctx context.Context, sessionID string, opts *session.Options) error {
	subj, err := subjectFor(sessionID)
	if err != nil || s.checkpoints == nil {
		return err
	}
	if s.closed.Load() {
		return ErrClosed
	}
	f := s.fences.get(subj) // Delete waits: no checkpoint outlives its session
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := s.storedEvents(ctx, subj)
	if err != nil {
		return fmt.Errorf("store: checkpoint session %q: count its events: %w", sessionID, err)
	}
	prev := s.readCheckpoint(ctx, sessionID)
	if prev != nil {
		switch covered := prev.Seq - prev.First + 1; {
		case n == covered:
			return nil // nothing stored since
		case n < covered:
			prev = nil // not borne out by the stream: made again from every event
		}
	}
	if prev == nil && n < minCheckpointEvents {
		return nil // too few to be worth one
	}
	for {
		// The events since prev, brought into it; or, without prev, or
		// when they do not continue it, every event.
		from := uint64(1)
		var cp *session.Checkpoint
		if prev != nil {
			from, cp = prev.Stream+1, &prev.Checkpoint
		}
		var events []session.Event
		var last uint64
		var added int64
		err = s.withLoadSlot(func(sl *replySlot) (err error) {
			events, last, added, err = s.loadDirectOn(ctx, sl, subj, from)
			return err
		})
		if err != nil {
			return fmt.Errorf("store: checkpoint session %q: %w", sessionID, err)
		}
		if len(events) == 0 {
			return nil
		}
		if prev != nil && events[0].Seq != prev.Seq+1 {
			prev = nil
			continue
		}
		st := storedCheckpoint{Version: checkpointVersion, Created: s.Created(), Stream: last, Bytes: added}
		if prev != nil {
			st.Bytes += prev.Bytes
		}
		data, err := s.compactToFit(cp, events, opts, &st)
		switch {
		case err != nil && prev != nil:
			prev = nil
			continue
		case err != nil:
			return fmt.Errorf("store: checkpoint session %q: %w", sessionID, err)
		}
		return s.putCheckpoint(ctx, sessionID, data)
	}
}

// compactToFit makes st's checkpoint of cp and events (session.Compact)
// and encodes it, keeping fewer latest events than opts ask for when the
// checkpoint would be larger than an event may be (the latest events of
// a session whose calls return large results): the restored session
// reads the others back from the store. A checkpoint too large even so —
// a registry of very large definitions, a very long conversation — is
// nil, and not an error.
func (s *Store) compactToFit(cp *session.Checkpoint, events []session.Event, opts *session.Options, st *storedCheckpoint) ([]byte, error) {
	var o session.Options
	if opts != nil {
		o = *opts
	}
	for keep := o.LogMemory; ; keep /= 2 {
		o.LogMemory = keep
		next, err := session.Compact(cp, events, &o)
		if err != nil {
			return nil, err
		}
		st.Checkpoint = *next
		data, err := encodeCheckpoint(st)
		switch {
		case err != nil:
			return nil, err
		case len(data) <= s.maxEvent:
			return data, nil
		case keep == 1:
			return nil, nil
		case keep == 0:
			keep = 32 // Compact's default, halved next
		}
	}
}

// putCheckpoint writes a session's checkpoint, or, for nil data (too
// large to be one), drops the one it had and says so.
func (s *Store) putCheckpoint(ctx context.Context, sessionID string, data []byte) error {
	if data == nil {
		s.log.Info("store: no checkpoint for this session: it would be larger than an event may be (very large definitions, or a very long conversation); it wakes from its events",
			slog.String("session", sessionID), slog.Int("limit", s.maxEvent))
		return s.dropCheckpoint(ctx, sessionID)
	}
	if _, err := s.checkpoints.Put(ctx, sessionID, data); err != nil {
		return fmt.Errorf("store: checkpoint session %q: write: %w", sessionID, err)
	}
	return nil
}

// dropCheckpoint removes a session's checkpoint, if it has one. It
// purges the key's subject from the bucket's stream: a key-value purge
// would leave a marker behind, for every session deleted.
func (s *Store) dropCheckpoint(ctx context.Context, sessionID string) error {
	if s.checkpoints == nil {
		return nil
	}
	err := s.retry(ctx, fmt.Sprintf("drop the checkpoint of session %q", sessionID), func(ctx context.Context) error {
		return s.checkpointStream.Purge(ctx, jetstream.WithPurgeSubject(checkpointSubject+sessionID))
	})
	if err != nil {
		return fmt.Errorf("store: drop the checkpoint of session %q: %w", sessionID, err)
	}
	return nil
}

// readCheckpoint returns a session's checkpoint, or nil when it has none
// or one that cannot be used (logged: the session is then loaded from its
// events).
func (s *Store) readCheckpoint(ctx context.Context, sessionID string) *storedCheckpoint {
	st, _ := s.readCheckpointFor(ctx, sessionID)
	return st
}

// readCheckpointFor is readCheckpoint; ok is false when the bucket holds
// a checkpoint for the session that cannot be used.
func (s *Store) readCheckpointFor(ctx context.Context, sessionID string) (_ *storedCheckpoint, ok bool) {
	e, err := s.checkpoints.Get(ctx, sessionID)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return nil, true
	case err != nil:
		s.log.Warn("store: a session's checkpoint could not be read; the session is loaded from its events",
			slog.String("session", sessionID), slog.String(logKeyError, err.Error()))
		return nil, true
	}
	st, err := decodeCheckpoint(e.Value())
	if err != nil {
		s.log.Warn("store: a session's checkpoint is unusable; the session is loaded from its events, and checkpointed again when it hibernates",
			slog.String("session", sessionID), slog.String(logKeyError, err.Error()))
		return nil, false
	}
	if !st.Created.Equal(s.Created()) {
		return nil, false // of the events stream before it was made anew
	}
	return st, true
}

// encodeCheckpoint encodes a checkpoint for the bucket; its State and
// Latest events are encoded as frames.
func encodeCheckpoint(st *storedCheckpoint) ([]byte, error) {
	frames := func(events []session.Event) ([]json.RawMessage, error) {
		out := make([]json.RawMessage, len(events))
		for i, e := range events {
			b, err := protocol.AppendFrame(nil, &protocol.Frame{Seq: e.Seq, Msg: e.Msg})
			if err != nil {
				return nil, fmt.Errorf("event %d: %w", e.Seq, err)
			}
			out[i] = b
		}
		return out, nil
	}
	var err error
	if st.State, err = frames(st.Checkpoint.State); err != nil {
		return nil, err
	}
	if st.Latest, err = frames(st.Checkpoint.Latest); err != nil {
		return nil, err
	}
	return json.Marshal(st)
}

// decodeCheckpoint decodes what encodeCheckpoint wrote, refusing another
// version and events that do not decode; session.RestoreFrom checks that
// the rest holds together.
func decodeCheckpoint(data []byte) (*storedCheckpoint, error) {
	var st storedCheckpoint
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if st.Version != checkpointVersion {
		return nil, fmt.Errorf("checkpoint: version %d, this kernel reads %d", st.Version, checkpointVersion)
	}
	events := func(frames []json.RawMessage) ([]session.Event, error) {
		out := make([]session.Event, len(frames))
		for i, b := range frames {
			f, err := protocol.DecodeFrame(b)
			if err != nil {
				return nil, fmt.Errorf("checkpoint: event %d: %w", i, err)
			}
			out[i] = session.Event{Seq: f.Seq, Msg: f.Msg}
		}
		return out, nil
	}
	var err error
	if st.Checkpoint.State, err = events(st.State); err != nil {
		return nil, err
	}
	if st.Checkpoint.Latest, err = events(st.Latest); err != nil {
		return nil, err
	}
	st.State, st.Latest = nil, nil
	if st.Stream == 0 {
		return nil, errors.New("checkpoint: no stream sequence")
	}
	if err := st.Checkpoint.Check(); err != nil {
		return nil, err
	}
	return &st, nil
}

// storedEvents returns how many messages the stream holds on subj, from
// the per-subject counts the server keeps in memory: no file block is
// read.
func (s *Store) storedEvents(ctx context.Context, subj string) (uint64, error) {
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	info, err := s.stream.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		return 0, err
	}
	return info.State.Subjects[subj], nil
}

// resumeCheckpoint returns a session's checkpoint and the events stored
// after it, with the stream sequence of the last of them; nil when the
// session has no checkpoint the stream still bears out (see above).
func (s *Store) resumeCheckpoint(ctx context.Context, sessionID, subj string) (*storedCheckpoint, []session.Event, uint64) {
	st, ok := s.readCheckpointFor(ctx, sessionID)
	if !ok {
		s.dropStaleCheckpoint(ctx, sessionID, subj, "it does not decode, or is of another events stream")
	}
	if st == nil {
		return nil, nil, 0
	}
	n, err := s.storedEvents(ctx, subj)
	covered := st.Seq - st.First + 1
	switch {
	case err != nil:
		s.log.Warn("store: the events of a session could not be counted; it is loaded from its events",
			slog.String("session", sessionID), slog.String(logKeyError, err.Error()))
		return nil, nil, 0
	case n < covered:
		// Fewer events than it covers: a tail lost (a damaged block, a
		// crash before the events' fsync) or an older copy of the events.
		// Left in place, it would be taken again once new events brought
		// the count back.
		s.dropStaleCheckpoint(ctx, sessionID, subj, fmt.Sprintf("the store holds %d of the %d events it covers", n, covered))
		return nil, nil, 0
	case n == covered:
		return st, nil, st.Stream
	}
	var events []session.Event
	var last uint64
	err = s.withLoadSlot(func(sl *replySlot) (err error) {
		events, last, _, err = s.loadDirectOn(ctx, sl, subj, st.Stream+1)
		return err
	})
	if err != nil {
		return nil, nil, 0
	}
	if len(events) == 0 || events[0].Seq != st.Seq+1 || uint64(len(events)) != n-covered {
		s.dropStaleCheckpoint(ctx, sessionID, subj, "the events stored after it do not continue it")
		return nil, nil, 0
	}
	return st, events, last
}

// dropStaleCheckpoint drops a session's checkpoint that its events do
// not bear out, under the session's fence (no append comes between), and
// says so: the session wakes from its events, and its next hibernation
// checkpoints it again.
func (s *Store) dropStaleCheckpoint(ctx context.Context, sessionID, subj, why string) {
	f := s.fences.get(subj)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := s.dropCheckpoint(ctx, sessionID); err != nil {
		s.log.Warn("store: a session's checkpoint its events do not bear out could not be dropped",
			slog.String("session", sessionID), slog.String("why", why), slog.String(logKeyError, err.Error()))
		return
	}
	s.log.Warn("store: a session's checkpoint was dropped: its events do not bear it out; the session wakes from its events",
		slog.String("session", sessionID), slog.String("why", why))
}
