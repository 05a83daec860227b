package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
)

// A load reads a session's events in one of two ways. On the embedded
// server it sends batched direct gets: one request names the session's
// subject and a starting stream sequence, and the stream sends up to
// loadBatch of its messages (at most loadMaxBytes, and always at least
// one) to the request's reply subject, then an end-of-batch status
// counting them — a round trip per batch and no server-side state. On an
// external server it reads through an ephemeral consumer: a create, a
// pull per batch, and a delete. A replicated stream refuses direct gets
// (a follower may answer them with stale data; see Open), and an external
// server of another version than go.mod's may not answer batches as
// loadDirect reads them (Open). docs/RATIONALE.md ("Why batched direct
// gets for a wake?") has the measurements.
const (
	// loadBatch is how many events one direct get of [Store.Load] asks
	// for. The embedded server answers a direct get on the goroutine that
	// reads the store's connection, holding the stream's isolation lock
	// (which writes wait for): a batch bounds how long the appends of
	// other sessions wait behind a wake. But every batch after a
	// session's first also makes the server count the session's messages
	// from where it starts, by reading each message of the file block
	// from there to the block's end, whosever it is (nats-server v2.15.2's
	// NumPending; the first batch, from sequence 1, is counted from the
	// subject's totals): with batches of 256, a wake of 1,000 events in a
	// block shared with other sessions took 6–8 ms, with 1,024 it takes 3.
	loadBatch = 1024
	// pullBatch is how many events one pull of a load's consumer asks
	// for: the consumer sends them from a goroutine of its own, and on an
	// external server each pull is a network round trip.
	pullBatch = 512
	// loadMaxBytes caps a direct-get batch's bytes (subjects, headers and
	// events): the server stops after the message that reaches it, so a
	// batch of the largest events (MaxEventBytes, about 1 MiB) holds two.
	// Without it the server would send up to its slow-consumer limit.
	loadMaxBytes = 2 << 20
	// directGetSubject is where the events stream answers direct gets.
	directGetSubject = "$JS.API.DIRECT.GET." + streamName
)

// Headers of the status that ends a direct-get batch (nats-server's
// stream.go: eob).
const (
	pendingHeader     = "Nats-Num-Pending"   // the subject's messages from the batch's first (see loadDirect)
	lastSeqHeader     = "Nats-Last-Sequence" // the batch's last stream sequence
	descriptionHeader = "Description"        // a status's text
	statusEndOfBatch  = "204"
	statusNotFound    = "404"
)

// Load returns every event stored for the session, in seq order: an empty
// slice for a session never stored, or deleted. An event that does not
// decode is an error naming its stream sequence, never skipped; so is a
// session deleted while Load reads it. Events appended while Load runs may
// or may not be included.
//
// Load reads in batches: through batched direct gets of up to 1,024
// events on the embedded server, and through an ephemeral consumer,
// deleted when done, pulling up to 512, on an external one. A context
// without a deadline bounds each request by Options.Timeout.
func (s *Store) Load(ctx context.Context, sessionID string) ([]session.Event, error) {
	events, _, err := s.loadSession(ctx, sessionID)
	return events, err
}

// loadSession is Load. On the embedded server it also returns the stream
// sequence of the last event it read (0: none; and 0 on an external
// server, whose consumer's messages are not asked for theirs).
func (s *Store) loadSession(ctx context.Context, sessionID string) ([]session.Event, uint64, error) {
	subj, err := subjectFor(sessionID)
	if err != nil {
		return nil, 0, err
	}
	if s.closed.Load() {
		return nil, 0, ErrClosed
	}
	var events []session.Event
	var lastStream uint64
	err = s.retryEach(ctx, fmt.Sprintf("load session %q", sessionID), 0, func(ctx context.Context) error {
		if s.direct {
			events, lastStream, err = s.loadDirect(ctx, subj)
		} else {
			events, err = s.load(ctx, subj)
		}
		return err
	})
	// Replicated, the load's consumer may sit on a follower that has not
	// applied the latest acknowledged events: load again until the events
	// reach the last one the leader holds (a node taking a session over
	// must restore everything its peers were shown).
	for try := 0; err == nil && s.opts.Replicas > 1; try++ {
		var last lastEvent
		err = s.retry(ctx, fmt.Sprintf("read the last event of session %q", sessionID), func(ctx context.Context) error {
			last, err = s.last(ctx, subj)
			return err
		})
		if err != nil || last.streamSeq == 0 || (len(events) > 0 && events[len(events)-1].Seq >= last.seq) {
			break
		}
		if try == loadCatchUp {
			err = fmt.Errorf("the events stop at %d of %d after %d loads: a replica lags", len(events), last.seq, try+1)
			break
		}
		time.Sleep(20 * time.Millisecond) // a follower catching up
		events, err = s.load(ctx, subj)
	}
	if errors.Is(err, ErrUnavailable) {
		return nil, 0, err
	}
	if err != nil {
		return nil, 0, fmt.Errorf("store: load session %q: %w", sessionID, err)
	}
	return events, lastStream, nil
}

// loadCatchUp bounds the loads again of a replicated session that lag
// its leader.
const loadCatchUp = 50

// loadDirect reads the events on subj with batched direct gets, each
// batch starting after the last one's final stream sequence, until the
// stream says none are left or the events reach the count the first batch
// announced (so that a session being appended to does not keep a load
// going).
//
// A batch asked for without headers ends with a pending count that is not
// decremented by what the batch sent (nats-server v2.15.2's stream.go,
// getDirectRequest, decrements it only where it writes each message's
// headers): it is the number of the subject's messages from the batch's
// first sequence on, counted under the stream's isolation lock, which
// every write waits for. TestDirectGetCounts holds the server to that.
//
// It also returns the stream sequence of the last event it read (0: none).
func (s *Store) loadDirect(ctx context.Context, subj string) (events []session.Event, last uint64, err error) {
	err = s.withLoadSlot(func(sl *replySlot) (err error) {
		events, last, _, err = s.loadDirectOn(ctx, sl, subj, 1)
		return err
	})
	return events, last, err
}

// withLoadSlot runs f with a reply slot for direct gets. A slot whose
// every batch ended (f returned nil) is reused; after an error, a batch
// may still be arriving on it: it goes.
func (s *Store) withLoadSlot(f func(*replySlot) error) error {
	sl, err := s.loads.take(s.nc)
	if err != nil {
		return fmt.Errorf("direct get: subscribe: %w", err)
	}
	if err = f(sl); err == nil {
		s.loads.give(sl)
	} else {
		s.loads.drop(sl)
	}
	return err
}

// loadDirectOn is loadDirect on the slot sl, of the events from stream
// sequence from on. It also returns the bytes the events take in the
// stream (their frames).
func (s *Store) loadDirectOn(ctx context.Context, sl *replySlot, subj string, from uint64) ([]session.Event, uint64, int64, error) {
	var events []session.Event
	var last uint64 // the stream sequence of the last event read
	var size int64
	decode := func(data []byte) error {
		f, err := protocol.DecodeFrame(data)
		if err != nil {
			return err
		}
		events = append(events, session.Event{Seq: f.Seq, Msg: f.Msg})
		size += int64(len(data))
		return nil
	}
	total := uint64(0) // the session's events when the first batch was read
	for next, batches := from, 0; ; batches++ {
		b, err := s.directGet(ctx, sl, subj, next, s.loadBatch, decode)
		var bad *badMessage
		switch {
		case errors.As(err, &bad):
			return nil, 0, 0, s.undecodable(ctx, subj, next, bad)
		case err != nil:
			return nil, 0, 0, err
		case !b.found && batches == 0:
			return []session.Event{}, 0, 0, nil // never stored, or deleted
		case !b.found:
			return nil, 0, 0, fmt.Errorf("direct get: the events after stream sequence %d are gone: %s", next-1, missingWhy)
		case b.pending < b.sent:
			return nil, 0, 0, fmt.Errorf("direct get: a batch of %d ends with %d pending, fewer than it sent: the server counts pending messages differently than this store expects", b.sent, b.pending)
		}
		last = b.last
		if batches == 0 {
			total = b.pending
			events = slices.Grow(events, int(min(total, 1<<16))-len(events))
		}
		if b.pending == b.sent || uint64(len(events)) >= total {
			break
		}
		next = b.last + 1
		if s.loadHook != nil {
			s.loadHook()
		}
	}
	if uint64(len(events)) < total {
		return nil, 0, 0, fmt.Errorf("direct get: %d of %d events missing: %s", total-uint64(len(events)), total, missingWhy)
	}
	return events, last, size, nil
}

// badMessage is a message of a batch that each refused.
type badMessage struct {
	index uint64 // in its batch, from 0
	data  []byte
	err   error
}

func (b *badMessage) Error() string { return b.err.Error() }

// undecodable returns the error of an event that does not decode, naming
// its stream sequence. A load's batches carry no headers (the server
// would build six for each message, and the client parse them: about 40
// allocations an event), so the sequence is read again: the batch from
// from up to the bad message, whose end names the last sequence it sent.
func (s *Store) undecodable(ctx context.Context, subj string, from uint64, bad *badMessage) error {
	var last []byte
	b, err := s.directGetOnce(ctx, subj, from, int(bad.index)+1, func(data []byte) error {
		last = data
		return nil
	})
	if err == nil && (!b.found || b.sent != bad.index+1 || !bytes.Equal(last, bad.data)) {
		err = errors.New("the session changed since")
	}
	if err != nil {
		return fmt.Errorf("event %d of the batch from stream sequence %d (its own sequence not read again: %v): %w", bad.index+1, from, err, bad.err)
	}
	return fmt.Errorf("stream sequence %d: %w", b.last, bad.err)
}

// directGetOnce is directGet on a slot of its own, dropped after.
func (s *Store) directGetOnce(ctx context.Context, subj string, from uint64, batch int, each func(data []byte) error) (batchEnd, error) {
	sl, err := s.loads.take(s.nc)
	if err != nil {
		return batchEnd{}, fmt.Errorf("direct get: subscribe: %w", err)
	}
	defer s.loads.drop(sl)
	return s.directGet(ctx, sl, subj, from, batch, each)
}

// batchEnd is what a direct-get batch ended with.
type batchEnd struct {
	found   bool   // false: the stream had no message on the subject from the start sequence on (404)
	sent    uint64 // the batch's messages
	pending uint64 // the subject's messages from the batch's first on (see loadDirect)
	last    uint64 // the batch's last stream sequence
}

// directGet asks for one batch of up to batch messages on subj from
// stream sequence from on, without their headers, hands each message's
// data to each, and returns how the batch ended. An error of each ends
// the batch as a *badMessage. The wait for the whole batch is bounded by
// ctx, or by Options.Timeout if ctx has no deadline.
func (s *Store) directGet(ctx context.Context, sl *replySlot, subj string, from uint64, batch int, each func(data []byte) error) (batchEnd, error) {
	if err := ctx.Err(); err != nil {
		return batchEnd{}, fmt.Errorf("direct get: %w", err)
	}
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	sl.attempt++
	reply := sl.prefix + strconv.FormatUint(sl.attempt, 10)
	// The request's JSON, by hand: a session's subject needs no escaping
	// (subjectFor).
	req := make([]byte, 0, 112+len(subj))
	req = strconv.AppendUint(append(req, `{"seq":`...), from, 10)
	req = append(append(append(req, `,"next_by_subj":"`...), subj...), `","batch":`...)
	req = strconv.AppendInt(req, int64(batch), 10)
	req = strconv.AppendInt(append(req, `,"max_bytes":`...), int64(s.loadMaxBytes), 10)
	req = append(req, `,"no_hdr":true}`...)
	if err := s.nc.PublishMsg(&nats.Msg{Subject: directGetSubject, Reply: reply, Data: req}); err != nil {
		return batchEnd{}, fmt.Errorf("direct get: %w", err)
	}
	var end batchEnd
	for {
		var m *nats.Msg
		select {
		case m = <-sl.ch:
		case <-ctx.Done():
			return batchEnd{}, fmt.Errorf("direct get: %d events of a batch came: %w", end.sent, ctx.Err())
		case <-s.connClosed:
			return batchEnd{}, fmt.Errorf("direct get: %w", nats.ErrConnectionClosed)
		}
		if m.Subject != reply {
			continue // an answer to an earlier request (a slot is reused only once they all ended)
		}
		if m.Header == nil {
			if err := each(m.Data); err != nil {
				return batchEnd{}, &badMessage{index: end.sent, data: m.Data, err: err}
			}
			end.sent++
			continue
		}
		switch status := m.Header.Get(statusHeader); status {
		case statusEndOfBatch:
			pending, perr := strconv.ParseUint(m.Header.Get(pendingHeader), 10, 64)
			last, lerr := strconv.ParseUint(m.Header.Get(lastSeqHeader), 10, 64)
			if perr != nil || lerr != nil {
				return batchEnd{}, fmt.Errorf("direct get: an end of batch without a pending count and last sequence (%q, %q)", m.Header.Get(pendingHeader), m.Header.Get(lastSeqHeader))
			}
			end.found, end.pending, end.last = true, pending, last
			return end, nil
		case statusNotFound:
			if end.sent > 0 {
				return batchEnd{}, fmt.Errorf("direct get: status %s after %d events", status, end.sent)
			}
			return end, nil
		case noResponders:
			return batchEnd{}, nats.ErrNoResponders
		case "":
			return batchEnd{}, fmt.Errorf("direct get: a message with headers and no status (asked for none)")
		default:
			return batchEnd{}, fmt.Errorf("direct get: status %s %s", status, m.Header.Get(descriptionHeader))
		}
	}
}

// load reads the events on subj through an ephemeral consumer (a
// replicated stream, which refuses direct gets).
func (s *Store) load(ctx context.Context, subj string) ([]session.Event, error) {
	cons, done, err := s.ephemeralConsumer(ctx, s.requestContext, "load", jetstream.ConsumerConfig{
		FilterSubject: subj,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, err
	}
	defer done()
	pending := cons.CachedInfo().NumPending
	events := make([]session.Event, 0, pending)
	for uint64(len(events)) < pending {
		n := min(pending-uint64(len(events)), uint64(s.pullBatch))
		rctx, cancel := s.requestContext(ctx)
		got, err := fetchInto(rctx, cons, int(n), &events)
		cancel()
		if err != nil {
			return nil, err
		}
		if got == 0 {
			// The session was deleted or trimmed while loading.
			return nil, fmt.Errorf("fetch: %d events missing: %s", pending-uint64(len(events)), missingWhy)
		}
		if s.loadHook != nil && uint64(len(events)) < pending {
			s.loadHook()
		}
	}
	return events, nil
}

// fetchInto fetches up to n events from cons and appends them to events,
// returning how many came. A fetch that meets no responders before any
// event came is sent again after a pause until ctx ends: in a cluster the
// consumer just created may sit on another server whose interest in its
// pull requests has not reached this connection's server yet (seen in
// TestClusterLeases: "fetch: nats: no responders available for request").
func fetchInto(ctx context.Context, cons jetstream.Consumer, n int, events *[]session.Event) (int, error) {
	for {
		got, err := fetchOnce(ctx, cons, n, events)
		if got > 0 || !errors.Is(err, nats.ErrNoResponders) {
			return got, err
		}
		if !pause(ctx, fetchRetryWait) {
			return 0, fmt.Errorf("%w (and then %w)", err, ctx.Err())
		}
	}
}

// fetchRetryWait is the pause before a fetch that met no responders is sent
// again: interest reaches the other servers of a cluster in milliseconds.
const fetchRetryWait = 20 * time.Millisecond

// fetchOnce is one fetch of fetchInto.
func fetchOnce(ctx context.Context, cons jetstream.Consumer, n int, events *[]session.Event) (int, error) {
	batch, err := cons.Fetch(n, jetstream.FetchContext(ctx))
	if err != nil {
		return 0, fmt.Errorf("fetch: %w", err)
	}
	got := 0
	for m := range batch.Messages() {
		got++
		md, err := m.Metadata()
		if err != nil {
			return got, err
		}
		f, err := protocol.DecodeFrame(m.Data())
		if err != nil {
			return got, fmt.Errorf("stream sequence %d: %w", md.Sequence.Stream, err)
		}
		*events = append(*events, session.Event{Seq: f.Seq, Msg: f.Msg})
	}
	if err := batch.Error(); err != nil {
		return got, fmt.Errorf("fetch: %w", err)
	}
	return got, nil
}

// ephemeralConsumer creates a consumer for one read (cfg's filter and
// delivery; no acks, in memory, one replica, gone after a minute idle in
// case its delete is lost), its creation bounded by the context bound
// derives from ctx. done deletes it; what names it in the log if the
// delete fails.
func (s *Store) ephemeralConsumer(ctx context.Context, bound func(context.Context) (context.Context, context.CancelFunc), what string, cfg jetstream.ConsumerConfig) (_ jetstream.Consumer, done func(), _ error) {
	cfg.AckPolicy = jetstream.AckNonePolicy
	cfg.MemoryStorage = true
	cfg.Replicas = 1
	cfg.InactiveThreshold = time.Minute
	rctx, cancel := bound(ctx)
	cons, err := s.stream.CreateConsumer(rctx, cfg)
	cancel()
	if err != nil {
		return nil, nil, fmt.Errorf("create consumer: %w", err)
	}
	return cons, func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.Timeout)
		defer cancel()
		if err := s.stream.DeleteConsumer(dctx, cons.CachedInfo().Name); err != nil {
			s.log.Debug("delete "+what+" consumer", slog.String(logKeyError, err.Error()))
		}
	}, nil
}

// missingWhy says what can make a session's events go missing while it
// loads: a probe's flipped byte in a file block was reported as a
// deletion only, and named nothing an operator could check.
const missingWhy = "the session was deleted while it loaded, or the store lost them — a damaged file block " +
	"(the NATS server's log says so: look for \"corrupt\" or \"checksum\"), files removed from its directory; " +
	"restore the data directory from a backup, or delete the session"
