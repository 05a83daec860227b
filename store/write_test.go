package store_test

import (
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/brainrt/brain/store"
)

// TestWriteFailureIsSaid: once the embedded server's file store cannot
// write (here past the process's file-size limit, EFBIG; in the probe, a
// full disk), the store says so — Health not ready, naming the cause and
// what to do — and every append after fails at once with that sentence.
// nats-server writes nothing more until it restarts; appends waited 5 s
// each and failed "nats: timeout", the cause only in the server's log (a
// lifecycle probe).
func TestWriteFailureIsSaid(t *testing.T) {
	dir := t.TempDir()
	st := open(t, dir, &store.Options{SyncAlways: true}) // each append written at once
	j := journal(t, st, "full")
	appendAll(t, j, benchEvent(1))
	blocks, _ := filepath.Glob(filepath.Join(dir, "jetstream", "$G", "streams", "BRAIN_EVENTS", "msgs", "*.blk"))
	var size int64
	for _, b := range blocks {
		if fi, err := os.Stat(b); err == nil {
			size = max(size, fi.Size())
		}
	}
	// The block may grow a little more, and no other file of the
	// process's is written meanwhile; the limit is put back before the
	// store closes.
	signal.Ignore(syscall.SIGXFSZ) // a write past the limit fails with EFBIG instead of ending the process
	defer signal.Reset(syscall.SIGXFSZ)
	var was syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &was); err != nil {
		t.Fatal(err)
	}
	limit := syscall.Rlimit{Cur: uint64(size) + 256, Max: was.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &limit); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Setrlimit(syscall.RLIMIT_FSIZE, &was) }()
	var err error
	for seq := uint64(2); seq < 50 && err == nil; seq++ {
		err = j.Append(benchEvent(seq))
	}
	if err == nil {
		t.Fatal("49 appends past the file-size limit were stored")
	}
	h := st.Health()
	if h.State != store.HealthWriteFailed || h.Ready || !strings.Contains(h.Message, "cannot write to its disk: free space (or fix the disk), then restart brain") || !strings.Contains(h.Message, "file too large") {
		t.Fatalf("health after the write failed: %+v (the append: %v)", h, err)
	}
	j2, err := st.Journal("next") // it reads the session's last event: refused at once too
	if err == nil {
		err = j2.Append(benchEvent(1))
	}
	var ue *store.UnavailableError
	if !errors.As(err, &ue) || !strings.Contains(ue.StoreUnavailable(), "cannot write to its disk") {
		t.Fatalf("an append after: %v, want the store's sentence", err)
	}
}
