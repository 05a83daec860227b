package store

import "errors"

var (
	// ErrInvalidSessionID reports a session id that cannot name a session
	// in the store: ids are 1 to 128 characters of A-Z, a-z, 0-9, '_' and
	// '-', since they become NATS subject tokens.
	ErrInvalidSessionID = errors.New("store: invalid session id")

	// ErrConflict reports an append that would not continue the session's
	// stored events: another journal wrote to the session since this one
	// last did, the session was deleted, or the event's seq does not follow
	// the last stored one. A journal that lost its session to another
	// journal or to [Store.Delete] refuses every later append.
	ErrConflict = errors.New("store: session written by another owner")

	// ErrClosed reports a use of a closed [Store].
	ErrClosed = errors.New("store: closed")

	// ErrLocked reports a data directory already opened by another store,
	// in this process or another one.
	ErrLocked = errors.New("store: data directory in use")

	// ErrTooLarge reports an event whose frame exceeds
	// protocol.MaxFrameBytes (or the server's maximum payload): it could
	// not be loaded again.
	ErrTooLarge = errors.New("store: event too large")
)
