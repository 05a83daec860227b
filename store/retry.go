package store

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Riding out an election. In a NATS cluster every stream and bucket is a
// raft group with a leader; when the server leading one dies, its
// followers elect another after their election timeout, 4 to 9 s after
// the leader's last heartbeat (nats-server's raft.go: minElectionTimeout,
// maxElectionTimeout; measured here 6–7.6 s with three servers). Until
// then a request to that stream meets no responders, or goes unanswered
// if it was sent to the dying leader. Such a request is sent again, after
// a pause growing from retryFirst to retryMax, until it is answered or its
// bound passes — unless the store knows it is unreachable or has no
// quorum (health.go), which no wait cures: then it fails at once.
const (
	// rideOut bounds the retries of a request on an external server: an
	// election and a second or two of margin.
	rideOut = 15 * time.Second
	// requestAttempt bounds one attempt of a request (a request sent to a
	// leader that died is never answered).
	requestAttempt = 2 * time.Second
	retryFirst     = 50 * time.Millisecond
	retryMax       = 500 * time.Millisecond
)

// errAgain is what an attempt returns to be tried again.
var errAgain = errors.New("store: try again")

// retryable reports an error of a request that a later attempt may not
// meet: no stream leader, no answer, a JetStream cluster between leaders.
func retryable(err error) bool {
	var apiErr *jetstream.APIError
	switch {
	case err == nil:
		return false
	case errors.Is(err, errAgain), errors.Is(err, nats.ErrNoResponders), isNoStreamResponse(err),
		errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, nats.ErrDisconnected), errors.Is(err, nats.ErrConnectionReconnecting):
		return true
	case errors.As(err, &apiErr):
		switch apiErr.ErrorCode {
		case 10008, // JetStream system temporarily unavailable (no meta leader)
			10004, // incomplete results
			10163, // expected last sequence per subject temporarily unavailable (a new leader)
			// "wrong last sequence" from a replicated stream while another
			// update of the same subject (key) is proposed and not yet
			// applied: not a compared revision, so not a conflict yet
			// (publish.go's pubRetryable says more). A lease's release met
			// it beside its own renewal in flight, and failed, leaving the
			// lease held until it expired.
			jetstream.JSErrCodeStreamWrongLastSequenceConstant:
			return true
		}
	}
	return false
}

// pause waits d, or until ctx is done; it reports whether it waited all
// of d.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// isNoStreamResponse reports jetstream.ErrNoStreamResponse.
func isNoStreamResponse(err error) bool { return errors.Is(err, jetstream.ErrNoStreamResponse) }

// bound returns how long a request may ride out an election: rideOut on
// an external server (at least Options.Timeout), Options.Timeout on the
// embedded one, which has no elections.
func (s *Store) bound() time.Duration {
	if s.ns != nil {
		return s.opts.Timeout
	}
	return max(rideOut, s.opts.Timeout)
}

// retry runs op until it succeeds or fails for a reason a retry does not
// cure, each attempt bounded by requestAttempt, all of them by ctx and by
// s.bound(). A request the store cannot serve — it is unreachable or has
// no quorum, or the bound passed — fails with an [*UnavailableError]
// naming op.
func (s *Store) retry(ctx context.Context, op string, f func(ctx context.Context) error) error {
	return s.retryEach(ctx, op, requestAttempt, f)
}

// retryEach is retry with each attempt bounded by attempt instead of
// requestAttempt (0: only by the whole's bound).
func (s *Store) retryEach(ctx context.Context, op string, attempt time.Duration, f func(ctx context.Context) error) error {
	deadline := time.Now().Add(s.bound())
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	wait := retryFirst
	for {
		if h := s.failing(); h != nil {
			return &UnavailableError{Op: op, Health: *h}
		}
		end := time.Now().Add(attempt)
		if attempt <= 0 || deadline.Before(end) {
			end = deadline
		}
		actx, cancel := context.WithDeadline(ctx, end)
		go func(bad <-chan struct{}) {
			// An attempt waiting on servers the store has just found
			// unreachable (or without a quorum) ends now.
			select {
			case <-bad:
				cancel()
			case <-actx.Done():
			}
		}(s.badChan())
		err := f(actx)
		cancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return err
		case !retryable(err) && !errors.Is(err, context.Canceled):
			return err
		}
		s.kickHealth()
		if h := s.failing(); h != nil {
			return &UnavailableError{Op: op, Health: *h, Err: err}
		}
		if !retryable(err) {
			return err
		}
		if time.Until(deadline) <= wait {
			return s.unavailable(op, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		case <-s.badChan():
			t.Stop()
		}
		wait = min(2*wait, retryMax)
	}
}
