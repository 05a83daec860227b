package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brainrt/brain/internal/testutil"
	"github.com/brainrt/brain/protocol"
)

// serveOnce runs serve on data until use (if any) returns, stops it
// gracefully, and returns what it logged.
func serveOnce(t *testing.T, data string, use func(addr string)) string {
	t.Helper()
	var logs testutil.LockedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	addr, _, done := serveLogged(t, ctx, serveArgs{addr: "127.0.0.1:0", data: data, consoleAddr: "off", idle: time.Hour}, slog.New(slog.NewTextHandler(&logs, nil)))
	if use != nil {
		use(addr)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	return logs.String()
}

// TestStoreMadeAnewIsSaid: a data directory whose nats/ was deleted
// starts (with no sessions), and says so in the log — once, naming what
// to do; a start on the same store, or a first start, says nothing.
func TestStoreMadeAnewIsSaid(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	start := func() string { t.Helper(); return serveOnce(t, data, nil) }
	t.Chdir(dir) // the default workspace is made here
	const said = "the session store was made anew"
	if logs := start(); strings.Contains(logs, said) {
		t.Fatalf("a first start said the store was made anew:\n%s", logs)
	}
	if logs := start(); strings.Contains(logs, said) {
		t.Fatalf("a start on the same store said it was made anew:\n%s", logs)
	}
	if err := os.RemoveAll(filepath.Join(data, "nats")); err != nil {
		t.Fatal(err)
	}
	if logs := start(); !strings.Contains(logs, said) || !strings.Contains(logs, "restore the data directory from a backup") {
		t.Fatalf("a start after nats/ was deleted said nothing of it:\n%s", logs)
	}
	if logs := start(); strings.Contains(logs, said) {
		t.Fatalf("the start after that said it again:\n%s", logs)
	}
}

// TestStoreRecordedAgainIsNoAlarm: a store.id that is not a time, and a
// stream the server skipped for its damaged metadata and Open made again
// over its files, keep their sessions: each start warns and says so, and
// does not call the store made anew — whose advice, restore a backup,
// would lose the newest sessions (a lifecycle probe).
func TestStoreRecordedAgainIsNoAlarm(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	t.Chdir(dir)
	const alarm = "the session store was made anew"
	start := func(use func(addr string)) string { t.Helper(); return serveOnce(t, data, use) }
	request := func(addr, method, path string) int {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(`{"id":"kept"}`))
		req.Header.Set("Authorization", "Bearer "+tokenOf(t, data, "client"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	start(func(addr string) {
		if status := request(addr, "POST", "/v1/sessions"); status != http.StatusCreated {
			t.Fatalf("create: %d", status)
		}
	})
	kept := func(addr string) {
		if status := request(addr, "GET", "/v1/sessions/kept"); status != http.StatusOK {
			t.Errorf("session kept: %d, want 200", status)
		}
	}

	if err := os.WriteFile(filepath.Join(data, storeIDFile), []byte("garbage!!\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if logs := start(kept); strings.Contains(logs, alarm) || !strings.Contains(logs, "was not readable; recorded again") {
		t.Fatalf("a store.id that is no time:\n%s", logs)
	}

	if err := os.WriteFile(filepath.Join(data, storeIDFile), []byte("2099-01-01T00:00:00Z\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if logs := start(kept); strings.Contains(logs, alarm) || !strings.Contains(logs, "names a time after the store's creation") {
		t.Fatalf("a store.id after the store's creation:\n%s", logs)
	}

	meta := filepath.Join(data, "nats", "jetstream", "$G", "streams", "BRAIN_EVENTS", "meta.inf")
	f, err := os.OpenFile(meta, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(" ") // its checksum no longer matches: the server skips the stream
	_ = f.Close()
	if logs := start(kept); strings.Contains(logs, alarm) || !strings.Contains(logs, "made again over its files") {
		t.Fatalf("a stream made again over its files:\n%s", logs)
	}
	// Its metadata is written again: the next start is quiet.
	if logs := start(kept); strings.Contains(logs, alarm) || strings.Contains(logs, "made again over its files") || strings.Contains(logs, "checksums do not match") {
		t.Fatalf("the start after:\n%s", logs)
	}

	// An unreadable record beside a store made anew is still the alarm.
	if err := os.RemoveAll(filepath.Join(data, "nats")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, storeIDFile), []byte("garbage!!\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if logs := start(nil); !strings.Contains(logs, alarm) {
		t.Fatalf("nats/ deleted, store.id garbled: no alarm:\n%s", logs)
	}
}

// TestStoreLossAfterAStopIsSaid: events lost between a graceful stop and
// the next start — a block cut short, which the embedded server drops
// with warnings of its own only (an adversarial probe lost 2 of 5
// sessions so) — are said at the start, once, with what to do; a start
// after a stop that lost nothing, and the start after the one that said
// it, say nothing.
func TestStoreLossAfterAStopIsSaid(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	t.Chdir(dir)
	const said = "the session store holds fewer events than at its last stop"
	start := func(use func(addr string)) string { t.Helper(); return serveOnce(t, data, use) }
	logs := start(func(addr string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, id := range []string{"s1", "s2", "s3"} {
			p := dialPeer(t, ctx, addr, tokenOf(t, data, "client"), id, "")
			p.send("r", &protocol.CapabilityRegister{Capabilities: []protocol.Capability{approvalCap("ui.confirm")}})
			for f := p.next(); f.Ref != "r"; f = p.next() {
			}
			p.conn.CloseNow()
		}
	})
	if strings.Contains(logs, said) {
		t.Fatalf("a first start said events were lost:\n%s", logs)
	}
	if logs := start(nil); strings.Contains(logs, said) {
		t.Fatalf("a start after a stop that lost nothing said events were lost:\n%s", logs)
	}
	blocks, _ := filepath.Glob(filepath.Join(data, "nats", "jetstream", "$G", "streams", "BRAIN_EVENTS", "msgs", "*.blk"))
	if len(blocks) == 0 {
		t.Fatal("no block")
	}
	fi, err := os.Stat(blocks[len(blocks)-1])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(blocks[len(blocks)-1], fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	if logs := start(nil); !strings.Contains(logs, said) || !strings.Contains(logs, "restore the data directory from a backup") {
		t.Fatalf("a start after a block was cut short said nothing of it:\n%s", logs)
	}
	if logs := start(nil); strings.Contains(logs, said) {
		t.Fatalf("the start after that said it again:\n%s", logs)
	}
}

// TestDataFilesThatArePipes: a named pipe at tokens.json, store.id or
// store.last held the start for ever with an empty log (and one put at
// store.last while brain ran held the stop past its bound): a re-probe.
// tokens.json and store.id are refused naming the path; store.last is
// warned of and replaced at the stop.
func TestDataFilesThatArePipes(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	t.Chdir(dir)
	serveOnce(t, data, nil) // makes tokens.json, store.id
	for _, name := range []string{"tokens.json", storeIDFile} {
		path := filepath.Join(data, name)
		aside := path + ".aside"
		if err := os.Rename(path, aside); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		done := make(chan error, 1)
		go func() {
			done <- serve(ctx, serveArgs{addr: "127.0.0.1:0", data: data, consoleAddr: "off", idle: time.Hour}, io.Discard, slog.New(slog.DiscardHandler))
		}()
		err := testutil.Recv(t, done, "serve's refusal of a pipe at "+name) // it hung for ever
		cancel()
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "named pipe") {
			t.Fatalf("a named pipe at %s: %v, want a refusal naming it", name, err)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(aside, path); err != nil {
			t.Fatal(err)
		}
	}
	last := filepath.Join(data, storeCountsFile)
	_ = os.Remove(last)
	if err := syscall.Mkfifo(last, 0o600); err != nil {
		t.Fatal(err)
	}
	if logs := serveOnce(t, data, nil); !strings.Contains(logs, "was not readable; not compared") {
		t.Fatalf("a named pipe at store.last:\n%s", logs)
	}
	if fi, err := os.Lstat(last); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("store.last after the stop: %v %v, want the record, a regular file", fi, err)
	}
}
