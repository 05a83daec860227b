package store

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

const (
	// streamName is the stream holding every session's events.
	streamName = "BRAIN_EVENTS"
	// subjectPrefix, followed by a session id, is the subject of that
	// session's events.
	subjectPrefix = "brain.events."
	// serverName is the embedded server's fixed name: JetStream keys its
	// state to it, so it must not change between runs.
	serverName = "brain"
	// maxSessionID is the longest session id.
	maxSessionID = 128
	// maxPayload is the embedded server's largest message: a frame of
	// protocol.MaxFrameBytes and its headers fit.
	maxPayload = 2 << 20
	// startTimeout bounds the embedded server's start when ctx has no
	// deadline (it recovers its streams before it is ready).
	startTimeout = 30 * time.Second
)

// Options configure a [Store]. A nil *Options means the defaults, which
// need a DataDir to be useful.
type Options struct {
	// URL is an external NATS server or cluster to use ("nats://host:4222";
	// several URLs separated by commas). Empty means an embedded server.
	URL string
	// DataDir is where the embedded server keeps its data (created with
	// mode 0700 if missing). Required when URL is empty; ignored otherwise.
	// One store at a time may use a directory: a second gets [ErrLocked].
	DataDir string
	// MaxMemory and MaxStore cap the embedded server's JetStream memory and
	// file storage (JetStreamMaxMemory, JetStreamMaxStore). Defaults 64 MiB
	// and 1 GiB; the server's own defaults would be 75% of RAM and disk.
	MaxMemory, MaxStore int64
	// SyncAlways makes the embedded server fsync every write before
	// acknowledging it, about ten times slower. By default an acknowledged
	// event is in the operating system's page cache — it survives the
	// process being killed — and is fsynced within 2 minutes: a power loss
	// or kernel crash can lose the events of the last 2 minutes. An external
	// server follows its own sync setting. docs/operations.md has the why.
	SyncAlways bool
	// MaxEventsPerSession, when positive, keeps only the latest events of
	// each session (the stream's MaxMsgsPerSubject): older ones are dropped
	// as new ones arrive. Default 0: keep everything. [session.Restore]
	// accepts a log that starts after seq 1, but what the dropped events
	// registered or left pending is gone from a restored session.
	MaxEventsPerSession int64
	// Replicas is the stream's replication factor on an external cluster
	// (1 to 5). Default 1; the embedded server always uses 1.
	Replicas int
	// Timeout bounds every Append (unless its journal holds, see the
	// journal's HoldWhile), and every request whose context has no
	// deadline. Default 5 s. On an external server a request that meets a
	// stream without a leader (an election) or no answer is sent again
	// for up to 15 s (or Timeout, if longer) — unless the store knows its
	// servers are unreachable or without a quorum ([Store.Health]): then
	// it fails at once with an [*UnavailableError].
	Timeout time.Duration
	// Logger receives the store's and the embedded server's logs; nil
	// discards them.
	Logger *slog.Logger
	// OnAppend, if set, is told how long each journal Append took and its
	// error (nil when the event was acknowledged), for metrics. It is
	// called with the journal's lock held: it must be quick.
	OnAppend func(d time.Duration, err error)
}

func (o *Options) withDefaults() (Options, error) {
	var out Options
	if o != nil {
		out = *o
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if out.MaxMemory <= 0 {
		out.MaxMemory = 64 << 20
	}
	if out.MaxStore <= 0 {
		out.MaxStore = 1 << 30
	}
	if out.Timeout <= 0 {
		out.Timeout = 5 * time.Second
	}
	if out.Replicas <= 0 || out.URL == "" {
		out.Replicas = 1
	}
	switch {
	case out.URL == "" && out.DataDir == "":
		return out, errors.New("store: Options.DataDir is required for the embedded server")
	case out.Replicas > 5:
		return out, fmt.Errorf("store: Options.Replicas is %d, at most 5", out.Replicas)
	case out.MaxEventsPerSession < 0:
		return out, fmt.Errorf("store: Options.MaxEventsPerSession is %d, want 0 (unlimited) or more", out.MaxEventsPerSession)
	}
	return out, nil
}

// Store keeps session events in JetStream. Its methods are safe for
// concurrent use.
type Store struct {
	opts Options
	log  *slog.Logger
	ns   *server.Server // nil with an external server
	nc   *nats.Conn
	// maxEvent is the largest event a journal stores (MaxEventBytes).
	maxEvent int
	js       jetstream.JetStream
	stream   jetstream.Stream
	owners   jetstream.KeyValue // who created each session (owners.go)
	// checkpoints holds each hibernated session's checkpoint
	// (checkpoint.go); nil on a store that keeps none.
	checkpoints      jetstream.KeyValue
	checkpointStream jetstream.Stream // the bucket's
	replies          replySlots       // where journal appends wait for acknowledgements (reply.go)
	fences           fences           // the sessions' fences on the embedded server (fence.go)
	idx              index            // the sessions with stored events, by id (index.go)
	// direct: loads use batched direct gets (load.go); loads is where
	// their batches arrive.
	direct bool
	loads  replySlots
	// loadBatch, loadMaxBytes and pullBatch bound a load's batches
	// (load.go's constants; tests lower them). loadHook, set only by
	// tests, runs between a load's batches.
	loadBatch, loadMaxBytes, pullBatch int
	loadHook                           func()
	// countsReady: the owners bucket counts each owner's sessions
	// (owned.go); countsMu serializes making the counts of an older one.
	countsReady atomic.Bool
	countsMu    sync.Mutex
	// countLocks serialize this process's updates of one owner's count
	// (owned.go); countsLost counts the updates another writer won.
	countLocks [countStripes]sync.Mutex
	countsLost atomic.Int64
	// msgIDs: journal appends carry a message id (Nats-Msg-Id), so that
	// the stream drops a repeated publish. Only on an external server: the
	// embedded one stores a session's messages one at a time, in order, so
	// the expected last subject sequence every append carries already
	// refuses a repeat of a stored event (the journal then recognises it,
	// journal.go's resync), and the id would cost the stream a lookup and
	// 2 minutes of memory per event. A clustered stream checks ids before
	// sequences, and a publish repeated while the first is still being
	// replicated needs them.
	msgIDs bool
	unlock func() // releases DataDir; nil with an external server

	// publishHook, set only by tests, replaces the journal's publish.
	publishHook func(context.Context, *nats.Msg) (*jetstream.PubAck, error)
	// answerHook, set only by tests, answers a publish's attempt in the
	// server's place when it returns data (publish.go's attempt).
	answerHook func(*nats.Msg) (*nats.Msg, error, bool)

	// health is what the store knows of its servers (health.go); probed
	// on an external server only.
	health *health

	connClosed chan struct{}
	closed     atomic.Bool
	closeOnce  sync.Once
	closeErr   error
}

// noDuplicatesWindow is the embedded stream's deduplication window: its
// appends carry no message id (msgIDs), and the server takes no less (0 is
// its default, 2 minutes).
const noDuplicatesWindow = 100 * time.Millisecond

// Open starts the embedded server (or connects to Options.URL), waits until
// it is ready, and creates or updates the events stream. ctx bounds the
// start; without a deadline, the embedded server gets 30 seconds and each
// request Options.Timeout.
//
// Close the store when done: it drains the connection and stops the
// embedded server.
func Open(ctx context.Context, opts *Options) (_ *Store, err error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Store{opts: o, log: o.Logger, connClosed: make(chan struct{}), health: newHealth(), loadBatch: loadBatch, loadMaxBytes: loadMaxBytes, pullBatch: pullBatch}
	s.loads.buffer = loadBatch + 1
	defer func() {
		if err != nil {
			s.shutdown()
		}
	}()
	connOpts := []nats.Option{
		nats.Name("brain"),
		nats.ClosedHandler(func(*nats.Conn) { close(s.connClosed) }),
	}
	url := o.URL
	if url == "" {
		if err := s.startEmbedded(ctx); err != nil {
			return nil, err
		}
		connOpts = append(connOpts, nats.InProcessServer(s.ns), nats.NoReconnect())
	} else {
		connOpts = append(connOpts, nats.MaxReconnects(-1))
		s.msgIDs = true
	}
	if s.nc, err = nats.Connect(url, connOpts...); err != nil {
		return nil, fmt.Errorf("store: connect: %w", err)
	}
	if s.js, err = jetstream.New(s.nc, jetstream.WithDefaultTimeout(o.Timeout)); err != nil {
		return nil, fmt.Errorf("store: jetstream: %w", err)
	}
	s.maxEvent = min(protocol.MaxFrameBytes, int(s.nc.MaxPayload())-headerRoom)
	maxPer := int64(-1)
	if o.MaxEventsPerSession > 0 {
		maxPer = o.MaxEventsPerSession
	}
	cfg := jetstream.StreamConfig{
		Name:              streamName,
		Description:       "brain session events, one subject per session",
		Subjects:          []string{subjectPrefix + "*"},
		Storage:           jetstream.FileStorage,
		Retention:         jetstream.LimitsPolicy,
		Discard:           jetstream.DiscardOld,
		MaxMsgsPerSubject: maxPer,
		Replicas:          o.Replicas,
		// Direct gets are answered by any replica, and a follower may not
		// have applied the latest acknowledged events yet: a journal must
		// read the session's last event from the leader. One replica has
		// nothing to lag behind.
		AllowDirect: o.Replicas == 1,
	}
	if !s.msgIDs {
		// No message ids, nothing to deduplicate: the least window the
		// server takes (0 is its default of 2 minutes). The window is not
		// free: at every start the server reads back each message stored
		// within it to rebuild its ids — every event of the last 2 minutes,
		// more than half of a start after busy minutes (docs/RATIONALE.md,
		// "Why the embedded stream has no deduplication window").
		cfg.Duplicates = noDuplicatesWindow
	}
	rctx, cancel := s.requestContext(ctx)
	defer cancel()
	if s.stream, err = s.js.CreateOrUpdateStream(rctx, cfg); err != nil {
		return nil, fmt.Errorf("store: create stream %s: %w", streamName, err)
	}
	if info := s.stream.CachedInfo(); s.ns != nil && !info.State.FirstTime.IsZero() && info.State.FirstTime.Before(info.Created) {
		// Made again over its own files: the server skipped the stream
		// for metadata it could not read (a meta.inf whose checksum does
		// not match), and keeps that file as it is until the stream's
		// configuration is written again — skipping it, and warning, at
		// every start (the re-probe). An update writes it.
		if _, err := s.js.UpdateStream(rctx, cfg); err != nil {
			s.log.Warn("store: the stream's metadata could not be written again", slog.String(logKeyError, err.Error()))
		}
	}
	// Loads use batched direct gets on the embedded server only: its
	// version is the one go.mod pins, whose batches' protocol the tests
	// check (load.go); an external server's may answer a batch otherwise
	// (before v2.11 it sends one message and no end of batch).
	s.direct = s.ns != nil && s.stream.CachedInfo().Config.AllowDirect
	if s.owners, err = s.js.CreateOrUpdateKeyValue(rctx, jetstream.KeyValueConfig{
		Bucket:      ownersBucket,
		Description: "brain: who created each session",
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
	}); err != nil {
		return nil, fmt.Errorf("store: create bucket %s: %w", ownersBucket, err)
	}
	if err := s.markCounted(rctx); err != nil {
		return nil, err
	}
	if checkpointsWanted(s.direct, o) {
		if err := s.openCheckpoints(rctx); err != nil {
			return nil, err
		}
	} else if s.ns != nil {
		if err := s.dropCheckpoints(rctx); err != nil {
			return nil, err
		}
	}
	if s.ns == nil {
		go s.monitor() // health.go
	} else {
		close(s.health.done)
	}
	return s, nil
}

// startEmbedded starts the in-process server and waits until it is ready.
func (s *Store) startEmbedded(ctx context.Context) error {
	o := s.opts
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return fmt.Errorf("store: data directory: %w", err)
	}
	unlock, err := lockDir(o.DataDir)
	if err != nil {
		return err
	}
	s.unlock = unlock
	if err := checkStoreFiles(o.DataDir); err != nil { // recovered.go
		return err
	}
	ns, err := server.NewServer(&server.Options{
		ServerName:             serverName,
		DontListen:             true,
		JetStream:              true,
		StoreDir:               o.DataDir,
		JetStreamMaxMemory:     o.MaxMemory,
		JetStreamMaxStore:      o.MaxStore,
		SyncAlways:             o.SyncAlways,
		MaxPayload:             maxPayload,
		NoSigs:                 true,
		NoLog:                  true,
		DisableJetStreamBanner: true,
	})
	if err != nil {
		return fmt.Errorf("store: embedded server: %w", err)
	}
	ns.SetLoggerV2(natsLogger{l: s.log.With(slog.String(logKeyComponent, "nats")), writeFailed: s.writeFailed}, false, false, false)
	s.ns = ns
	ns.Start()
	wait := startTimeout
	if dl, ok := ctx.Deadline(); ok {
		wait = time.Until(dl)
	}
	if !ns.ReadyForConnections(wait) {
		return fmt.Errorf("store: embedded server not ready after %s", wait.Round(time.Millisecond))
	}
	if !ns.JetStreamEnabled() {
		return errors.New("store: embedded server started without JetStream (see its log)")
	}
	return nil
}

// Close drains the connection, stops the embedded server and releases the
// data directory. Appends and loads after Close fail with [ErrClosed].
// Close is idempotent.
// headerRoom is what an event's message keeps for its headers (the
// journal's token, the expected sequence, the message id) within the
// server's max payload.
const headerRoom = 1 << 10

// MaxEventBytes returns the largest event (its encoded frame) a journal of
// this store stores: the server's max payload less room for headers, and
// at most protocol.MaxFrameBytes (what a load decodes). A session's
// Options.MaxEventBytes is set to it (package server does), so that no
// event is shown that could not be stored.
func (s *Store) MaxEventBytes() int { return s.maxEvent }

// Created returns when the sessions' stream was created — by this Open,
// or by an earlier one that left it in the store. A caller that
// remembers it can tell a store made anew (its directory deleted) from
// the one it had.
func (s *Store) Created() time.Time { return s.stream.CachedInfo().Created }

// Oldest returns when the oldest event the stream holds was stored (zero
// when it holds none), as the stream was opened. A stream made again over
// files it found (the server skipped a stream whose metadata it could not
// read, and Open made it anew, recovering its messages) holds events
// older than its Created; a store made anew does not.
func (s *Store) Oldest() time.Time { return s.stream.CachedInfo().State.FirstTime }

// Counts returns the stream's last sequence and how many events it holds,
// now (the store's record at a stop: cmd/brain's storeid.go).
func (s *Store) Counts(ctx context.Context) (lastSeq, events uint64, err error) {
	info, err := s.stream.Info(ctx)
	if err != nil {
		return 0, 0, err
	}
	return info.State.LastSeq, info.State.Msgs, nil
}

// OpenedCounts is [Store.Counts] as the stream was opened.
func (s *Store) OpenedCounts() (lastSeq, events uint64) {
	st := s.stream.CachedInfo().State
	return st.LastSeq, st.Msgs
}

func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.closeErr = s.shutdown()
	})
	return s.closeErr
}

// shutdown releases whatever Open acquired.
func (s *Store) shutdown() error {
	var err error
	select {
	case <-s.health.stop:
	default:
		close(s.health.stop)
	}
	if s.owners != nil {
		<-s.health.done // the monitor started, or done was closed
	}
	if s.nc != nil {
		if derr := s.nc.Drain(); derr != nil {
			s.nc.Close()
		}
		select {
		case <-s.connClosed:
		case <-time.After(s.opts.Timeout):
			s.nc.Close()
			err = fmt.Errorf("store: close: connection not drained after %s", s.opts.Timeout)
		}
	}
	if s.ns != nil {
		s.ns.Shutdown()
		s.ns.WaitForShutdown()
	}
	if s.unlock != nil {
		s.unlock()
	}
	return err
}

// Journal returns a journal appending the session's events, continuing what
// the store holds for it when Journal is called: create it together with
// [Store.Load] (before or after), and give it to the session
// ([session.Options.Journal]). If another owner writes to the session in
// between, the appends fail with [ErrConflict] instead of interleaving. It
// asks the store for the session's last event, bounded by Options.Timeout.
//
// Each Append is one publish acknowledged by JetStream. It fails with
// [ErrConflict] — and so does every later one — once another journal has
// written to the session or the session was deleted. An append that failed
// for another reason (a timeout, a lost connection) is published again,
// before the next event, by the next Append. A journal is safe for
// concurrent use, but a session appends in seq order.
func (s *Store) Journal(sessionID string) (session.Journal, error) {
	subj, err := subjectFor(sessionID)
	if err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, ErrClosed
	}
	j := &journal{s: s, id: sessionID, subject: subj, token: rand.Text()}
	if s.ns != nil {
		j.fence = s.fences.get(subj) // before the read of the last event: a fence made now is unknown until an append
	}
	var last lastEvent
	err = s.retry(context.Background(), fmt.Sprintf("read the last event of session %q", sessionID), func(ctx context.Context) error {
		last, err = s.last(ctx, subj)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: journal for session %q: %w", sessionID, err)
	}
	j.lastStream, j.lastSeq = last.streamSeq, last.seq
	return j, nil
}

// Resume returns the session's stored events, as [Store.Load] does, and a
// journal that continues them, as [Store.Journal]'s does: a wake's two
// reads of the store in one. On the embedded server the journal takes
// the session's last event from the load, the last one it read, instead
// of reading it on its own first: that read was a wake's slowest part
// after a start, since the server loads the whole file block that holds
// the event to answer it (40–70 ms for a block of 8 MB), and the load
// then reads the same block again. The journal expects exactly the
// events returned, so its first append fails with [ErrConflict] if
// another journal wrote after them. Elsewhere Resume is Journal, then
// Load. [Store.ResumeFrom] reads a checkpoint instead, where there is one.
func (s *Store) Resume(ctx context.Context, sessionID string) ([]session.Event, session.Journal, error) {
	return s.resume(ctx, sessionID)
}

// ResumeFrom is [Store.Resume] from the session's checkpoint, when it has
// one ([Store.Checkpoint]): it returns the checkpoint and the events
// stored after it, for session.RestoreFrom, and reads no other event. A
// session without a usable checkpoint — never checkpointed, checkpointed
// by another version, or whose stored events no longer bear its
// checkpoint out — gets a nil checkpoint and all of its events, as from
// Resume.
//
// Only the embedded store with one replica and no cap on a session's
// events keeps checkpoints (Options.MaxEventsPerSession); any other
// always answers as Resume.
func (s *Store) ResumeFrom(ctx context.Context, sessionID string) (*session.Checkpoint, []session.Event, session.Journal, error) {
	subj, err := subjectFor(sessionID)
	if err != nil {
		return nil, nil, nil, err
	}
	if s.checkpoints == nil || s.closed.Load() {
		events, j, err := s.resume(ctx, sessionID)
		return nil, events, j, err
	}
	j := &journal{s: s, id: sessionID, subject: subj, token: rand.Text(), fence: s.fences.get(subj)} // the fence before the reads, as Journal's before its read
	st, events, last := s.resumeCheckpoint(ctx, sessionID, subj)
	if st == nil {
		events, j, err := s.resume(ctx, sessionID)
		return nil, events, j, err
	}
	j.lastStream, j.lastSeq, j.fromCheckpoint = last, st.Seq, true
	if n := len(events); n > 0 {
		j.lastSeq = events[n-1].Seq
	}
	j.recordAnchor(st.Seq, st.Stream)
	cp := st.Checkpoint
	cp.Bytes = st.Bytes
	return &cp, events, j, nil
}

// resume is Resume.
func (s *Store) resume(ctx context.Context, sessionID string) ([]session.Event, session.Journal, error) {
	subj, err := subjectFor(sessionID)
	if err != nil {
		return nil, nil, err
	}
	if !s.direct {
		j, err := s.Journal(sessionID)
		if err != nil {
			return nil, nil, err
		}
		events, err := s.Load(ctx, sessionID)
		if err != nil {
			return nil, nil, err
		}
		return events, j, nil
	}
	j := &journal{s: s, id: sessionID, subject: subj, token: rand.Text(), fence: s.fences.get(subj)} // the fence before the load, as Journal's before its read
	events, last, err := s.loadSession(ctx, sessionID)
	if err != nil {
		return nil, nil, err
	}
	j.lastStream = last
	if n := len(events); n > 0 {
		j.lastSeq = events[n-1].Seq
	}
	return events, j, nil
}

// lastEvent describes the newest message stored for a session.
type lastEvent struct {
	streamSeq uint64 // 0: none
	seq       uint64 // its event seq
	token     string // the journal that wrote it
}

// last reads the newest message on subj.
func (s *Store) last(ctx context.Context, subj string) (lastEvent, error) {
	m, err := s.stream.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return lastEvent{}, nil
	}
	if err != nil {
		return lastEvent{}, err
	}
	f, err := protocol.DecodeFrame(m.Data)
	if err != nil {
		return lastEvent{}, fmt.Errorf("stream sequence %d: %w", m.Sequence, err)
	}
	return lastEvent{streamSeq: m.Sequence, seq: f.Seq, token: m.Header.Get(tokenHeader)}, nil
}

// Sessions returns the ids of every session with stored events, sorted
// (the whole of [Store.SessionsPage]'s list: prefer pages when there may
// be many).
func (s *Store) Sessions(ctx context.Context) ([]string, error) {
	if err := s.loadIndex(ctx); err != nil {
		return nil, err
	}
	ids, _ := s.idx.page("", s.idx.count()+1)
	return ids, nil
}

// Delete removes every stored event of the session, and its owner record
// ([Store.SetSessionOwner]). A journal still appending to it fails from
// then on with [ErrConflict]. Deleting a session never stored is not an
// error.
//
// JetStream remembers message ids for 2 minutes: a new session reusing the
// id within that window is still stored (see the journal), only not
// deduplicated.
func (s *Store) Delete(ctx context.Context, sessionID string) error {
	subj, err := subjectFor(sessionID)
	if err != nil {
		return err
	}
	if s.closed.Load() {
		return ErrClosed
	}
	{
		// No plain append may land after the purge: a journal's next
		// one is checked by the server, and finds the session deleted.
		// Nor may a checkpoint be written meanwhile (Checkpoint holds the
		// fence too).
		f := s.fences.get(subj)
		f.mu.Lock()
		defer f.mu.Unlock()
		defer f.forget()
	}
	if err := s.dropCheckpoint(ctx, sessionID); err != nil { // first: a checkpoint never outlives its events
		return err
	}
	if err := s.retry(ctx, fmt.Sprintf("delete session %q", sessionID), func(ctx context.Context) error {
		return s.stream.Purge(ctx, jetstream.WithPurgeSubject(subj))
	}); err != nil {
		return fmt.Errorf("store: delete session %q: %w", sessionID, err)
	}
	s.idx.removed(sessionID)
	return s.deleteOwner(ctx, sessionID)
}

// publishHeld stores one message, waiting at most timeout for its
// acknowledgement — or, while hold reports true, riding out a stream
// without a leader for up to maxAppendHold (publish.go).
func (s *Store) publishHeld(m *nats.Msg, timeout time.Duration, hold func() bool) (*jetstream.PubAck, error) {
	if s.publishHook != nil {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return s.publishHook(ctx, m)
	}
	return s.request(m, timeout, hold)
}

// publishPlain stores one message without headers (fence.go) in one
// attempt: nothing in it would make a repeat harmless, so one that goes
// unanswered is not sent again here.
func (s *Store) publishPlain(m *nats.Msg) (*jetstream.PubAck, error) {
	if s.publishHook != nil {
		ctx, cancel := context.WithTimeout(context.Background(), min(s.opts.Timeout, pubAttempt))
		defer cancel()
		return s.publishHook(ctx, m)
	}
	sl, err := s.replies.take(s.nc)
	if err != nil {
		return nil, err
	}
	defer s.replies.give(sl)
	var attempts int
	resp, err := s.attempt(sl, m, min(s.opts.Timeout, pubAttempt), &attempts)
	switch {
	case err == nil:
		return parsePubAck(resp.Data)
	case errors.Is(err, nats.ErrNoResponders):
		return nil, jetstream.ErrNoStreamResponse
	}
	return nil, err
}

// requestContext bounds a request by Options.Timeout when ctx has no
// deadline of its own.
func (s *Store) requestContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, s.opts.Timeout)
}

// subjectFor validates a session id and returns its subject.
func subjectFor(id string) (string, error) {
	if id == "" || len(id) > maxSessionID {
		return "", fmt.Errorf("%w: %d characters, want 1 to %d", ErrInvalidSessionID, len(id), maxSessionID)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return "", fmt.Errorf("%w %.64q: byte %d is %q; use A-Z, a-z, 0-9, '_' and '-'", ErrInvalidSessionID, id, i, c)
		}
	}
	return subjectPrefix + id, nil
}
