package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
	"github.com/brainrt/brain/store"
)

// restoredState is what a session restored from a store shows: its
// registry, pending calls and last seq, and every event a subscriber
// from the start reads (the older ones read back from the store).
func restoredState(t *testing.T, s *session.Session) string {
	t.Helper()
	snap, err := json.Marshal(s.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	sub := s.Subscribe(0)
	defer sub.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", snap)
	for seq := uint64(0); seq < s.LastSeq(); {
		e, err := sub.Next(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		seq = e.Seq
		f, _ := protocol.EncodeFrame(&protocol.Frame{Seq: e.Seq, Msg: e.Msg})
		fmt.Fprintf(&b, "%s\n", f)
	}
	return b.String()
}

// wake wakes a session as package server does, from its checkpoint when
// it has one; it returns the session and whether a checkpoint was used.
func wake(t *testing.T, st *store.Store, id string) (*session.Session, *session.Checkpoint, []session.Event) {
	t.Helper()
	cp, events, j, err := st.ResumeFrom(ctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	opts := &session.Options{Journal: j}
	if r, ok := j.(session.EventReader); ok {
		opts.History = r
	}
	s, err := session.RestoreFrom(id, cp, events, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, cp, events
}

// TestCheckpointWake: a session checkpointed as it hibernates wakes from
// its checkpoint — reading no event but those stored after it — as it
// wakes from all of its events: the same registry and pending calls, the
// same events replayed to a subscriber from the start, after a restart
// too; and what it appends then continues the stream.
func TestCheckpointWake(t *testing.T) {
	dir := t.TempDir()
	st := open(t, dir, nil)
	j := journal(t, st, "s")
	events := []session.Event{{Seq: 1, Msg: &protocol.CapabilityRegister{Capabilities: []protocol.Capability{clientCap("ui.confirm", true)}}},
		{Seq: 2, Msg: &protocol.ApprovalRequested{CallID: "cold1-1", Name: "ui.confirm", Input: json.RawMessage(`{}`), Invoker: protocol.AudienceLLM}}}
	for _, e := range wakeLog(1000) {
		events = append(events, session.Event{Seq: e.Seq + 2, Msg: e.Msg})
	}
	appendAll(t, j, events...)

	full, err := session.Restore("s", load(t, st, "s"), &session.Options{PeerGrace: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := restoredState(t, full)

	if err := st.Checkpoint(ctx(t), "s", nil); err != nil {
		t.Fatal(err)
	}
	s, cp, after := wake(t, st, "s")
	if cp == nil || len(after) != 0 || cp.Seq != 1002 || len(cp.State) != 2 || len(cp.Latest) != 32 {
		t.Fatalf("woke from checkpoint %+v and %d events after it; want one to 1002 of the registration, the pending call and 32 events", cp, len(after))
	}
	if got := restoredState(t, s); got != want {
		t.Fatalf("woken from the checkpoint:\n%.2000s\nwant, from the events:\n%.2000s", got, want)
	}

	// The session goes on; its next wake reads the checkpoint and what
	// came after it.
	if out := s.Invoke(ctx(t), protocol.AudienceLLM, "__capabilities.list", json.RawMessage(`{}`)); !out.IsOK() {
		t.Fatal(out.Err)
	}
	last := s.LastSeq()
	stored := load(t, st, "s")
	if uint64(len(stored)) != last {
		t.Fatalf("stored %d events, the session is at %d", len(stored), last)
	}
	full, err = session.Restore("s", stored, &session.Options{PeerGrace: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want = restoredState(t, full)
	s2, cp, after := wake(t, st, "s")
	if cp == nil || cp.Seq != 1002 || len(after) != int(last-1002) {
		t.Fatalf("woke from %+v and %d events after it; want the checkpoint at 1002 and %d", cp, len(after), last-1002)
	}
	if got := restoredState(t, s2); got != want {
		t.Fatalf("woken from the checkpoint and %d events:\n%.2000s\nwant:\n%.2000s", len(after), got, want)
	}

	// Checkpointed again and restarted: the new checkpoint covers them.
	if err := st.Checkpoint(ctx(t), "s", nil); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = open(t, dir, nil)
	s3, cp, after := wake(t, st, "s")
	if cp == nil || cp.Seq != last || len(after) != 0 {
		t.Fatalf("after a restart, woke from %+v and %d events", cp, len(after))
	}
	if got := restoredState(t, s3); got != want {
		t.Fatalf("woken after a restart:\n%.2000s\nwant:\n%.2000s", got, want)
	}
}

// TestCheckpointOfADeletedSession: a deleted session's checkpoint goes
// with it, so a session made again under its id — even with as many
// events — is never woken from it.
func TestCheckpointOfADeletedSession(t *testing.T) {
	st := open(t, t.TempDir(), nil)
	appendAll(t, journal(t, st, "s"), evs("a", 200)...)
	if err := st.Checkpoint(ctx(t), "s", nil); err != nil {
		t.Fatal(err)
	}
	if cp, _, _, err := st.ResumeFrom(ctx(t), "s"); err != nil || cp == nil {
		t.Fatalf("not checkpointed: %v", err)
	}
	if err := st.Delete(ctx(t), "s"); err != nil {
		t.Fatal(err)
	}
	if cp, events, _, err := st.ResumeFrom(ctx(t), "s"); err != nil || cp != nil || len(events) != 0 {
		t.Fatalf("a deleted session resumed from %v with %d events, %v", cp, len(events), err)
	}
	appendAll(t, journal(t, st, "s"), evs("b", 200)...)
	cp, events, _, err := st.ResumeFrom(ctx(t), "s")
	if err != nil || cp != nil || !slices.Equal(writers(events), writers(evs("b", 200))) {
		t.Fatalf("the session made again resumed from %v with %d events, %v", cp, len(events), err)
	}
	// Deleting sessions, checkpointed or not, leaves nothing in the
	// bucket (a key-value purge would leave a marker for each).
	if err := st.Checkpoint(ctx(t), "s", nil); err != nil {
		t.Fatal(err)
	}
	appendAll(t, journal(t, st, "short"), evs("c", 3)...)
	for _, id := range []string{"s", "short", "never"} {
		if err := st.Delete(ctx(t), id); err != nil {
			t.Fatal(err)
		}
	}
	info, err := store.CheckpointStream(st).Info(ctx(t))
	if err != nil || info.State.Msgs != 0 {
		t.Fatalf("the bucket holds %d messages after the deletes, %v", info.State.Msgs, err)
	}
}

// TestCheckpointOfAStreamMadeAnew: a checkpoint kept while the events
// stream is made anew (its directory deleted) is not taken for the new
// stream's session of the same id, even of as many events.
func TestCheckpointOfAStreamMadeAnew(t *testing.T) {
	dir := t.TempDir()
	st := open(t, dir, nil)
	appendAll(t, journal(t, st, "s"), evs("a", 200)...)
	if err := st.Checkpoint(ctx(t), "s", nil); err != nil {
		t.Fatal(err)
	}
	if err := store.DeleteEventsStream(ctx(t), st); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = open(t, dir, nil)
	appendAll(t, journal(t, st, "s"), evs("b", 200)...)
	cp, events, _, err := st.ResumeFrom(ctx(t), "s")
	if err != nil || cp != nil || !slices.Equal(writers(events), writers(evs("b", 200))) {
		t.Fatalf("resumed from %v with %d events, %v; want the new stream's events", cp, len(events), err)
	}
}

// TestNoCheckpointOfAShortSession: a session with fewer events than a
// checkpoint would hold is not checkpointed (it is read whole as fast).
func TestNoCheckpointOfAShortSession(t *testing.T) {
	st := open(t, t.TempDir(), nil)
	appendAll(t, journal(t, st, "s"), evs("a", 127)...)
	if err := st.Checkpoint(ctx(t), "s", nil); err != nil {
		t.Fatal(err)
	}
	if cp, events, _, err := st.ResumeFrom(ctx(t), "s"); err != nil || cp != nil || len(events) != 127 {
		t.Fatalf("resumed from %v with %d events, %v", cp, len(events), err)
	}
	j := journal(t, st, "s")
	appendAll(t, j, ev(128, "a"))
	if err := st.Checkpoint(ctx(t), "s", nil); err != nil {
		t.Fatal(err)
	}
	if cp, events, _, err := st.ResumeFrom(ctx(t), "s"); err != nil || cp == nil || cp.Seq != 128 || len(events) != 0 {
		t.Fatalf("at 128 events: resumed from %v with %d events, %v", cp, len(events), err)
	}
}

// evs returns n events made by ev, from seq 1.
func evs(by string, n int) []session.Event {
	out := make([]session.Event, n)
	for i := range out {
		out[i] = ev(uint64(i+1), by)
	}
	return out
}

// TestCheckpointThatIsWrong: a checkpoint the stream does not bear out —
// garbage in the bucket, another version, one covering more events than
// the session has — is not used: the session wakes from its events, and
// the store says why.
func TestCheckpointThatIsWrong(t *testing.T) {
	var logs bytes.Buffer
	dir := t.TempDir()
	st := open(t, dir, &store.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	appendAll(t, journal(t, st, "s"), evs("a", 200)...)
	if err := st.Checkpoint(ctx(t), "s", nil); err != nil {
		t.Fatal(err)
	}
	kv := store.Checkpoints(st)
	good, err := kv.Get(ctx(t), "s")
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(good.Value(), &raw); err != nil {
		t.Fatal(err)
	}
	variant := func(k string, v any) []byte {
		m := map[string]any{}
		for k, v := range raw {
			m[k] = v
		}
		m[k] = v
		b, _ := json.Marshal(m)
		return b
	}
	for _, c := range []struct {
		name string
		data []byte
		log  string
	}{
		{"garbage", []byte("{not json"), "unusable"},
		{"another version", variant("v", 99), "version 99"},
		{"a bad event", variant("latest", []string{`{"seq":200,"type":"nonsense"}`}), "unusable"},
		{"a seq its events do not end at", variant("seq", 9), "not its seq 9"},
		{"a finished call past the tables", variant("finished", map[string]any{"codes": []string{""}, "calls": []uint64{1<<15 | 5<<9}}), "names no entry"},
		{"more events than stored", variant("first", 0), "first event's seq is 0"},
	} {
		logs.Reset()
		if _, err := kv.Put(ctx(t), "s", c.data); err != nil {
			t.Fatal(err)
		}
		cp, events, _, err := st.ResumeFrom(ctx(t), "s")
		if err != nil || cp != nil || !slices.Equal(writers(events), writers(evs("a", 200))) {
			t.Fatalf("%s: resumed from %v with %d events, %v; want every event", c.name, cp, len(events), err)
		}
		if c.log != "" && !strings.Contains(logs.String(), c.log) {
			t.Errorf("%s: the log does not say %q:\n%s", c.name, c.log, logs.String())
		}
	}
	// Checkpointed again, it is used again.
	if err := st.Checkpoint(ctx(t), "s", nil); err != nil {
		t.Fatal(err)
	}
	if cp, _, _, err := st.ResumeFrom(ctx(t), "s"); err != nil || cp == nil || cp.Seq != 200 {
		t.Fatalf("after checkpointing again: %v, %v", cp, err)
	}
}

// TestNoCheckpointsWhereEventsAreCapped: a store that drops a session's
// old events keeps no checkpoints (its count could not tell a checkpoint
// outrun), and Checkpoint does nothing there; the checkpoints it kept
// before the cap are dropped, so that lifting the cap again cannot wake
// a session from one its events outran.
func TestNoCheckpointsWhereEventsAreCapped(t *testing.T) {
	dir := t.TempDir()
	st := open(t, dir, nil)
	appendAll(t, journal(t, st, "s"), evs("a", 200)...)
	if err := st.Checkpoint(ctx(t), "s", nil); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = open(t, dir, &store.Options{MaxEventsPerSession: 200})
	j := journal(t, st, "s")
	for seq := uint64(201); seq <= 400; seq++ { // the stream keeps 200: as many as the checkpoint covers
		appendAll(t, j, ev(seq, "b"))
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = open(t, dir, nil)
	if cp, events, _, err := st.ResumeFrom(ctx(t), "s"); err != nil || cp != nil || len(events) != 200 || events[0].Seq != 201 {
		t.Fatalf("after the cap was lifted: resumed from %v with %d events, %v", cp, len(events), err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = open(t, dir, &store.Options{MaxEventsPerSession: 2})
	appendAll(t, journal(t, st, "t"), evs("a", 200)...)
	if err := st.Checkpoint(ctx(t), "t", nil); err != nil {
		t.Fatal(err)
	}
	cp, events, _, err := st.ResumeFrom(ctx(t), "t")
	if err != nil || cp != nil || !slices.Equal(writers(events), []string{"a.199", "a.200"}) {
		t.Fatalf("resumed from %v with %v, %v", cp, writers(events), err)
	}
	if err := st.Checkpoint(ctx(t), "bad id!", nil); !errors.Is(err, store.ErrInvalidSessionID) {
		t.Fatalf("checkpoint of an invalid id: %v", err)
	}
}

// TestCheckpointWakeAllocatesLittle is the default suite's small version
// of the scale test's wake (scale.sh): a 1,000-event session woken from
// its checkpoint allocates a small part of what a wake from its events
// does (537 allocations against 14,612 in BenchmarkWake, the embedded
// server's included). It counts allocations, not time, so that it holds
// on a busy machine; the bound is the one a wake reading every event
// again would break.
func TestCheckpointWakeAllocatesLittle(t *testing.T) {
	st := open(t, t.TempDir(), nil)
	appendAll(t, journal(t, st, "s"), wakeLog(1000)...)
	if err := st.Checkpoint(ctx(t), "s", nil); err != nil {
		t.Fatal(err)
	}
	wake := func() {
		cp, events, j, err := st.ResumeFrom(ctx(t), "s")
		if err != nil || cp == nil {
			t.Fatalf("resume: checkpoint %v, %v", cp != nil, err)
		}
		if _, err := session.RestoreFrom("s", cp, events, &session.Options{Journal: j}, nil); err != nil {
			t.Fatal(err)
		}
	}
	wake() // the first read of the bucket's block
	if n := testing.AllocsPerRun(20, wake); n > 2000 {
		t.Fatalf("a wake from a checkpoint allocated %.0f times, want at most 2,000 (a wake from every event: about 14,600)", n)
	}
}

// TestCheckpointRacesDeletes: checkpoints written all the while a session
// is deleted and made again, each time with other events and as many,
// never make a wake show an earlier incarnation's events: what a wake
// reads (its checkpoint's latest events and those after it) is always
// what the stream holds now. (The count alone would take a checkpoint of
// the last incarnation: Delete and Checkpoint hold the session's fence.)
func TestCheckpointRacesDeletes(t *testing.T) {
	st := open(t, t.TempDir(), nil)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // the hibernations
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := st.Checkpoint(context.Background(), "s", nil); err != nil && !errors.Is(err, store.ErrClosed) {
				t.Errorf("checkpoint: %v", err)
				return
			}
		}
	}()
	for gen := range 30 {
		if err := st.Delete(ctx(t), "s"); err != nil {
			t.Fatal(err)
		}
		appendAll(t, journal(t, st, "s"), evs(fmt.Sprintf("g%d", gen), 150)...) // as many as the last: only the fence tells them apart
		if err := st.Checkpoint(ctx(t), "s", nil); err != nil {
			t.Fatal(err)
		}
		stored := load(t, st, "s")
		cp, after, _, err := st.ResumeFrom(ctx(t), "s")
		if err != nil {
			t.Fatal(err)
		}
		var got []session.Event
		if cp != nil {
			got = append(got, cp.Latest...)
		}
		got = append(got, after...)
		if len(got) == 0 || len(got) > len(stored) || !slices.Equal(writers(got), writers(stored[len(stored)-len(got):])) {
			t.Fatalf("generation %d: a wake reads %v…, the stream holds %v…", gen, writers(got)[:min(3, len(got))], writers(stored)[:3])
		}
	}
	close(stop)
	<-done
}

// TestCheckpointOfALostTail: a wake that finds fewer events than the
// session's checkpoint covers — a tail lost to a damaged block, or to a
// crash before the events' fsync — drops the checkpoint, so that new
// events bringing the count back never make it current again (it was
// taken then: the session woke with the lost events and could store
// nothing more). And a checkpoint that still slips through is dropped by
// the first append it makes fail, so the next load reads the events.
func TestCheckpointOfALostTail(t *testing.T) {
	var logs bytes.Buffer
	dir := t.TempDir()
	opts := &store.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	st := open(t, dir, opts)
	appendAll(t, journal(t, st, "s"), evs("a", 200)...)
	if err := st.Checkpoint(ctx(t), "s", nil); err != nil {
		t.Fatal(err)
	}
	for seq := uint64(198); seq <= 200; seq++ { // the session is the stream's only one: its seqs are the stream's
		if err := store.DeleteEvent(ctx(t), st, seq); err != nil {
			t.Fatal(err)
		}
	}
	cp, events, j, err := st.ResumeFrom(ctx(t), "s")
	if err != nil || cp != nil || len(events) != 197 {
		t.Fatalf("after the tail was lost: resumed from %v with %d events, %v", cp, len(events), err)
	}
	if !strings.Contains(logs.String(), "the store holds 197 of the 200 events it covers") {
		t.Errorf("the drop was not logged:\n%s", logs.String())
	}
	appendAll(t, j, ev(198, "b"), ev(199, "b"), ev(200, "b")) // as many as it covered
	if err := st.Checkpoint(ctx(t), "s", nil); err != nil {
		t.Fatal(err)
	}
	cp, events, _, err = st.ResumeFrom(ctx(t), "s")
	if err != nil || cp == nil || len(events) != 0 || !slices.Equal(writers(cp.Latest[len(cp.Latest)-3:]), []string{"b.198", "b.199", "b.200"}) {
		t.Fatalf("the new events: resumed from %v with %d events after, %v", cp, len(events), err)
	}

	// The count comes back before any wake sees it fall: the checkpoint
	// is taken, and the first append, refused, drops it.
	if err := store.DeleteEvent(ctx(t), st, 203); err != nil { // b.200
		t.Fatal(err)
	}
	data, _ := protocol.EncodeFrame(&protocol.Frame{Seq: 200, Msg: ev(200, "c").Msg})
	if _, err := store.PublishRaw(ctx(t), st, "s", data); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil { // a restart: nothing in memory knows the stream's last event
		t.Fatal(err)
	}
	st = open(t, dir, opts)
	cp, _, j, err = st.ResumeFrom(ctx(t), "s")
	if err != nil || cp == nil {
		t.Fatalf("resumed from %v, %v", cp, err)
	}
	if err := j.Append(ev(201, "d")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("an append after a checkpoint the stream outran: %v, want ErrConflict", err)
	}
	cp, events, _, err = st.ResumeFrom(ctx(t), "s")
	if err != nil || cp != nil || len(events) != 200 || writer(events[199]) != "c.200" {
		t.Fatalf("after the refused append: resumed from %v with %d events, %v", cp, len(events), err)
	}
}

// TestCheckpointOfLargeLatestEvents: a session whose latest events are
// large (results of hundreds of KiB) is checkpointed with fewer of them —
// the restored session reads the others back — rather than not at all.
func TestCheckpointOfLargeLatestEvents(t *testing.T) {
	st := open(t, t.TempDir(), nil)
	events := evs("a", 200)
	for seq := uint64(201); seq <= 220; seq++ {
		events = append(events, session.Event{Seq: seq, Msg: &protocol.CapabilityDeregister{Names: []string{strings.Repeat("x", 200<<10)}}})
	}
	appendAll(t, journal(t, st, "s"), events...)
	full, err := session.Restore("s", load(t, st, "s"), &session.Options{PeerGrace: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := restoredState(t, full)
	if err := st.Checkpoint(ctx(t), "s", nil); err != nil {
		t.Fatal(err)
	}
	s, cp, after := wake(t, st, "s")
	if cp == nil || len(after) != 0 || len(cp.Latest) >= 32 || cp.Seq != 220 {
		t.Fatalf("woke from %v and %d events after it; want a checkpoint of fewer than 32 latest events", cp != nil, len(after))
	}
	if got := restoredState(t, s); got != want {
		t.Fatal("the session woken from its checkpoint is not the one its events restore")
	}
}
