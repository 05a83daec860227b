// Package store keeps sessions durable on NATS JetStream.
//
// By default [Open] starts an embedded NATS server with JetStream inside the
// process: it opens no listener, keeps its data under [Options.DataDir], and
// is reached through an in-process connection. With [Options.URL] set, the
// store connects to an external NATS server or cluster instead; from there
// on the code path is the same.
//
// Every event of a session is one message on the subject
// brain.events.<session id> of the stream BRAIN_EVENTS, its body the event's
// protocol frame ([protocol.EncodeFrame]). A [session.Journal] from
// [Store.Journal] appends them; [Store.Load] reads them back for
// [session.Restore]:
//
//	st, err := store.Open(ctx, &store.Options{DataDir: "/var/lib/brain"})
//	if err != nil { … }
//	defer st.Close()
//	events, err := st.Load(ctx, id)          // nothing for a new session
//	j, err := st.Journal(id)                  // continues what is stored
//	s, err := session.Restore(id, events, &session.Options{Journal: j}, reattach)
//
// # One owner at a time
//
// A session has one owner at a time, and its seqs stay gap-free across
// owners: every append expects the session's last stored message to be the
// one this journal last wrote (JetStream's expected last subject sequence).
// When another journal has written to the session since, or the session was
// deleted, the append fails with [ErrConflict] and the journal refuses every
// later append: the newer owner wins, and the two never interleave. On an
// external server appends also carry a message id, <session id>/<seq>, so
// that a repeated publish is not stored twice; on the embedded one the
// expected sequence alone refuses a repeat (see Store's msgIDs). The
// embedded store, the stream's only writer, keeps each live session's
// last stream sequence itself, and leaves the server to check only the
// appends it cannot vouch for (fence.go).
//
// # Checkpoints
//
// The embedded store keeps a checkpoint of each session it is asked to
// ([Store.Checkpoint], which package server calls when it hibernates a
// session): a [session.Checkpoint] in the key-value bucket
// brain_checkpoints. [Store.ResumeFrom] wakes a session from it and the
// events stored after it, reading no other event, for
// [session.RestoreFrom]; a session without a checkpoint its events still
// bear out is woken from every event, as [Store.Resume] does.
//
// docs/operations.md describes the data directory, the fsync choice,
// retention and backups.
package store
