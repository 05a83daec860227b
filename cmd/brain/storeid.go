package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/brainrt/brain/internal/regularfile"
)

// The embedded store keeps the sessions under <data>/nats. A data
// directory whose nats/ was deleted, or whose stream's files were, opened
// as a fresh store without a word: an operator's probe saw a client
// resume ?after=603 into a new session at seq 3. So the data directory
// remembers when its store's stream was created (store.id), and a start
// that finds a stream created since says so, loudly, and once.

// storeIDFile is the data directory's record of its store.
const storeIDFile = "store.id"

// checkStoreID compares the stream's creation time with the one the data
// directory recorded: it records it when there is no record, and logs an
// error when the stream is newer than the record and holds nothing older
// than itself (the store was made anew), then records the new one so that
// the next start is quiet. A stream made again over its own files (the
// server skipped one whose metadata it could not read; its events were
// recovered, older than the stream), a record that is not a time (of a
// store that holds events) and one after the stream's creation are warned
// of, not alarmed: their sessions are all there, and the alarm's advice —
// restore a backup — would have lost the newest (a lifecycle probe). An
// unreadable record beside an empty store is the alarm's: a record says a
// store was there.
func checkStoreID(dataDir string, created, oldest time.Time, logger *slog.Logger) error {
	path := filepath.Join(dataDir, storeIDFile)
	stamp := created.UTC().Format(time.RFC3339Nano)
	b, err := regularfile.Read(path, 1<<10) // a named pipe there held the start for ever (a re-probe)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("%s: %w", path, err)
	default:
		was := strings.TrimSpace(string(b))
		if was == stamp {
			return nil
		}
		wasTime, perr := time.Parse(time.RFC3339Nano, was)
		switch {
		case perr != nil && !oldest.IsZero():
			logger.Warn("the data directory's record of its session store was not readable; recorded again",
				slog.String("file", path), slog.String("created", stamp))
		case perr == nil && created.Before(wasTime):
			// A store made anew is newer than the record; this one is
			// older: the record is what changed.
			logger.Warn("the data directory's record of its session store names a time after the store's creation; recorded again",
				slog.String("file", path), slog.String("created", stamp), slog.String("was_created", was))
		case !oldest.IsZero() && oldest.Before(created):
			logger.Warn("the session store's stream was made again over its files (the server could not read its metadata): its events are there, the oldest from "+oldest.UTC().Format(time.RFC3339),
				slog.String("store", filepath.Join(dataDir, "nats")), slog.String("created", stamp), slog.String("was_created", was))
		default:
			logger.Error("the session store was made anew: the sessions this data directory held are not in it",
				slog.String("store", filepath.Join(dataDir, "nats")), slog.String("created", stamp), slog.String("was_created", was),
				slog.String("what_to_do", "if nats/ was deleted or damaged, stop brain and restore the data directory from a backup (docs/operations.md, \"Backups\"); if starting afresh was meant, nothing: "+storeIDFile+" now names the new store"))
		}
	}
	if err := writeReplacing(path, []byte(stamp+"\n")); err != nil {
		return fmt.Errorf("record the session store: %w", err)
	}
	return nil
}

// storeCountsFile records, at a graceful stop, how many events the
// embedded store held and its last sequence: nothing changes them until
// the next start, so a start that finds fewer knows events were lost.
const storeCountsFile = "store.last"

// recordStoreCounts writes the store's counts at a graceful stop, when no
// journal appends any more.
func recordStoreCounts(dataDir string, lastSeq, events uint64) error {
	return writeReplacing(filepath.Join(dataDir, storeCountsFile), fmt.Appendf(nil, "last_seq=%d events=%d\n", lastSeq, events))
}

// writeReplacing writes b to a new file beside path and renames it over
// path: whatever was at path (a named pipe, which a write waits on for
// ever, held a stop past its bound; a link) is replaced, not written
// through.
func writeReplacing(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(f.Name(), 0o600)
	}
	if werr == nil {
		werr = os.Rename(f.Name(), path)
	}
	if werr != nil {
		_ = os.Remove(f.Name())
	}
	return werr
}

// checkStoreCounts compares the store's counts as it opened with those
// recorded at the last graceful stop, and logs an error when it holds
// fewer: a block damaged or cut short since (the embedded server drops
// what it cannot read, and warns in its own words only — an adversarial
// probe lost 2 of 5 sessions so). The record is removed: between this
// start and the next stop, deletes lower the counts rightly, and a crash
// records nothing.
func checkStoreCounts(dataDir string, lastSeq, events uint64, logger *slog.Logger) {
	path := filepath.Join(dataDir, storeCountsFile)
	b, err := regularfile.Read(path, 1<<10)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return // no record: a first start, or the last stop was not graceful
	case err != nil:
		_ = os.Remove(path)
		logger.Warn("the data directory's record of its session store at the last stop was not readable; not compared", slog.String("file", path), slog.String("error", err.Error()))
		return
	}
	_ = os.Remove(path)
	var wasLast, wasEvents uint64
	if _, err := fmt.Sscanf(string(b), "last_seq=%d events=%d", &wasLast, &wasEvents); err != nil || string(b) != fmt.Sprintf("last_seq=%d events=%d\n", wasLast, wasEvents) {
		// Only what recordStoreCounts writes is compared: anything else
		// (a trailing word, another spelling) raised a false alarm.
		logger.Warn("the data directory's record of its session store at the last stop was not readable; not compared", slog.String("file", path))
		return
	}
	if lastSeq >= wasLast && events >= wasEvents {
		return
	}
	logger.Error(fmt.Sprintf("the session store holds fewer events than at its last stop: %d of %d (last sequence %d, was %d); its files were damaged or cut short since, and the embedded server dropped what it could not read", events, wasEvents, lastSeq, wasLast),
		slog.String("store", filepath.Join(dataDir, "nats")),
		slog.String("what_to_do", "stop brain and restore the data directory from a backup (docs/operations.md, \"Backups\"), or go on without the lost events: this start is not refused, the sessions left are served"))
}
