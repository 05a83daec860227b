package store

import "strings"

// writeFailed records that the embedded server's file store could not
// write (why is nats-server's error): nats-server keeps a file store's
// first write error and refuses every write after it until the server
// restarts, so a full disk freed again left every append waiting 5 s for
// an answer and failing with "nats: timeout" — the cause only in the
// server's own log line, /readyz saying the store did not answer, clients
// closed 1012 (a lifecycle probe). The store now says what is wrong and
// what to do, and fails requests at once (health.go).
func (s *Store) writeFailed(why string) {
	// What to do first: a WebSocket's close reason keeps 123 bytes.
	msg := "the session store cannot write to its disk: free space (or fix the disk), then restart brain; until then it stores nothing (" + strings.TrimSpace(why) + ")"
	s.setHealth(Health{State: HealthWriteFailed, Message: msg}, nil)
}
