package store_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/session"
	"github.com/brainrt/brain/store"
)

// The stored-sessions and busy-sessions loads of issue 21, run only with
// their flags (scale.sh runs them):
//
//	go test ./store -run '^TestScaleStored$' -count 1 -timeout 30m -args -scale.stored 100000,300000,1000000
//	go test ./store -run '^TestScaleAppenders$' -count 1 -args -scale.appenders 100,1000
var (
	scaleStored    = flag.String("scale.stored", "", "stored-sessions load: the sizes to measure, comma-separated (e.g. 100000,1000000)")
	scaleAppenders = flag.String("scale.appenders", "", "busy-sessions load: the numbers of sessions appending at once, comma-separated (e.g. 100,1000)")
	scaleSeconds   = flag.Float64("scale.seconds", 5, "busy-sessions load: how long each size appends")
	scaleJSON      = flag.String("scale.json", "", "write the figures here as JSON")
)

func sizesOf(t *testing.T, name, v string) []int {
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			t.Fatalf("-%s %q: want positive counts", name, v)
		}
		out = append(out, n)
	}
	return out
}

// heapInUse is the live heap, settled.
func heapInUse() uint64 {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// rss is the process's resident set (VmRSS), in bytes.
func rss(t *testing.T) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// diskBytes is what the files under dir take.
func diskBytes(t *testing.T, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// storedAtSize is what TestScaleStored measures at one size.
type storedAtSize struct {
	Sessions        int     `json:"sessions"`
	FillPerSecond   float64 `json:"fillSessionsPerSecond"`
	DiskPerSession  float64 `json:"diskBytesPerSession"` // one event each
	OpenMs          float64 `json:"openMs"`              // Open of the store, as brain serve starts
	HeapPerSession  float64 `json:"heapBytesPerSessionAfterOpen"`
	RSSPerSession   float64 `json:"rssBytesPerSessionAfterOpen"`
	FirstPageMs     float64 `json:"firstPageMs"` // reads the index
	NextPageMs      float64 `json:"nextPageMs"`
	IndexPerSession float64 `json:"indexHeapBytesPerSession"`
	WakeP50Ms       float64 `json:"wakeP50Ms"` // journal, checkpoint and restore of a 1,000-event session
	WakeP99Ms       float64 `json:"wakeP99Ms"`
	// The same sessions woken from all of their events (no checkpoint).
	WakeEventsP50Ms   float64 `json:"wakeEventsP50Ms"`
	WakeEventsP99Ms   float64 `json:"wakeEventsP99Ms"`
	DiskPerEvent      float64 `json:"diskBytesPerEvent"` // in the 1,000-event sessions
	WakeSessionEvents int     `json:"wakeSessionEvents"`
}

// wakeEvents is the length of the logs woken; wakeSessions how many.
const (
	wakeEvents   = 1000
	wakeSessions = 100
)

// TestScaleStored fills one embedded store with hibernated sessions (one
// event each) up to each size, plus wakeSessions sessions of wakeEvents
// events, and measures at each size: the disk per session and per event,
// the store's open (what brain serve's start waits for) and the memory it
// holds after it, the first page of the sessions list (which reads the
// index) and the next, and the wake of a 1,000-event session (journal,
// load, restore: what a WebSocket connect or an MCP call does first).
func TestScaleStored(t *testing.T) {
	if *scaleStored == "" {
		t.Skip("the stored-sessions load runs with -scale.stored (scale.sh)")
	}
	sizes := sizesOf(t, "scale.stored", *scaleStored)
	dir := t.TempDir()
	data, err := protocol.EncodeFrame(&protocol.Frame{Seq: 1, Msg: benchEvent(1).Msg})
	if err != nil {
		t.Fatal(err)
	}
	opts := &store.Options{MaxStore: 64 << 30}
	st := open(t, dir, opts)
	// The long logs woken at each size: finished calls, checkpointed as a
	// hibernation does (a session with a call pending is not hibernated).
	for i := range wakeSessions {
		id := fmt.Sprintf("wake-%03d", i)
		appendAll(t, journal(t, st, id), wakeLog(wakeEvents)...)
		if err := st.Checkpoint(ctx(t), id, nil); err != nil {
			t.Fatal(err)
		}
	}
	_ = st.Close()
	diskWake := diskBytes(t, dir)
	var figs []storedAtSize
	filled := 0
	for _, n := range sizes {
		st := open(t, dir, opts)
		start := time.Now()
		c, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		err := store.Fill(c, st, n-filled, func(i int) string { return fmt.Sprintf("stored-%010d", filled+i) }, data)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		fill := time.Since(start)
		added := n - filled
		filled = n
		_ = st.Close()
		fig := storedAtSize{Sessions: n, FillPerSecond: float64(added) / fill.Seconds(), WakeSessionEvents: wakeEvents}
		disk := diskBytes(t, dir)
		fig.DiskPerSession = float64(disk-diskWake) / float64(n)
		fig.DiskPerEvent = float64(diskWake) / float64(wakeSessions*wakeEvents)

		h0, r0 := heapInUse(), rss(t)
		start = time.Now()
		st = open(t, dir, opts)
		fig.OpenMs = ms(time.Since(start))
		h1, r1 := heapInUse(), rss(t)
		fig.HeapPerSession = (float64(h1) - float64(h0)) / float64(n)
		fig.RSSPerSession = (float64(r1) - float64(r0)) / float64(n)

		start = time.Now()
		pctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // the index's read: seconds at a million
		ids, more, err := st.SessionsPage(pctx, "", 100)
		cancel()
		fig.FirstPageMs = ms(time.Since(start))
		if err != nil || len(ids) != 100 || !more {
			t.Fatalf("first page: %d ids, more %v, %v", len(ids), more, err)
		}
		h2 := heapInUse()
		fig.IndexPerSession = (float64(h2) - float64(h1)) / float64(n)
		start = time.Now()
		if _, _, err := st.SessionsPage(ctx(t), ids[99], 100); err != nil {
			t.Fatal(err)
		}
		fig.NextPageMs = ms(time.Since(start))

		// Woken from their checkpoints first, as package server wakes a
		// session: the events stream's blocks are still unread after the
		// start when the same sessions are then woken from all of their
		// events.
		var wakes, fromEvents []time.Duration
		for i := range wakeSessions {
			id := fmt.Sprintf("wake-%03d", i)
			start := time.Now()
			cp, events, j, err := st.ResumeFrom(ctx(t), id)
			if err != nil || cp == nil || cp.Seq != wakeEvents || len(events) != 0 {
				t.Fatalf("resume %s: checkpoint %v, %d events after it, %v", id, cp != nil, len(events), err)
			}
			s, err := session.RestoreFrom(id, cp, events, &session.Options{Journal: j}, nil)
			if err != nil {
				t.Fatal(err)
			}
			wakes = append(wakes, time.Since(start))
			_ = s // a restored session holds no goroutine: the collector takes it
		}
		for i := range wakeSessions {
			id := fmt.Sprintf("wake-%03d", i)
			start := time.Now()
			events, j, err := st.Resume(ctx(t), id)
			if err != nil || len(events) != wakeEvents {
				t.Fatalf("load %s: %d events, %v", id, len(events), err)
			}
			s, err := session.Restore(id, events, &session.Options{Journal: j}, nil)
			if err != nil {
				t.Fatal(err)
			}
			fromEvents = append(fromEvents, time.Since(start))
			_ = s
		}
		fig.WakeP50Ms, fig.WakeP99Ms = ms(quantile(wakes, 0.5)), ms(quantile(wakes, 0.99))
		fig.WakeEventsP50Ms, fig.WakeEventsP99Ms = ms(quantile(fromEvents, 0.5)), ms(quantile(fromEvents, 0.99))
		_ = st.Close()
		t.Logf("%d stored sessions: filled at %.0f/s; disk %.0f B a session, %.0f B an event; open %.0f ms, then %.0f B heap and %.0f B RSS a session; first page %.1f ms (the index: %.0f B a session), next %.2f ms; wake of a %d-event session from its checkpoint p50 %.2f ms, p99 %.2f ms, from its events p50 %.2f ms, p99 %.2f ms (load %s)",
			n, fig.FillPerSecond, fig.DiskPerSession, fig.DiskPerEvent, fig.OpenMs, fig.HeapPerSession, fig.RSSPerSession, fig.FirstPageMs, fig.IndexPerSession, fig.NextPageMs, wakeEvents, fig.WakeP50Ms, fig.WakeP99Ms, fig.WakeEventsP50Ms, fig.WakeEventsP99Ms, loadAverage())
		figs = append(figs, fig)
	}
	writeFigures(t, map[string]any{"loadAverage": loadAverage(), "stored": figs})
}

// appendersAtSize is what TestScaleAppenders measures at one size.
type appendersAtSize struct {
	Sessions     int     `json:"sessions"`
	Events       int     `json:"events"`
	PerSecond    float64 `json:"eventsPerSecond"`
	P50Ms        float64 `json:"appendP50Ms"`
	P99Ms        float64 `json:"appendP99Ms"`
	MaxMs        float64 `json:"appendMaxMs"`
	LoadAverage  string  `json:"loadAverage"`
	SecondsAsked float64 `json:"seconds"`
}

// TestScaleAppenders: N sessions append concurrently, each its own
// journal, for -scale.seconds: events a second across all, and each
// append's latency.
func TestScaleAppenders(t *testing.T) {
	if *scaleAppenders == "" {
		t.Skip("the busy-sessions load runs with -scale.appenders (scale.sh)")
	}
	var figs []appendersAtSize
	for _, n := range sizesOf(t, "scale.appenders", *scaleAppenders) {
		st := open(t, t.TempDir(), nil)
		journals := make([]session.Journal, n)
		for i := range journals {
			journals[i] = journal(t, st, fmt.Sprintf("busy-%05d", i))
		}
		d := time.Duration(*scaleSeconds * float64(time.Second))
		lats := make([][]time.Duration, n)
		var wg sync.WaitGroup
		start := time.Now()
		deadline := start.Add(d)
		for i, j := range journals {
			wg.Go(func() {
				for seq := uint64(1); time.Now().Before(deadline) && seq < 1_000_000; seq++ {
					t0 := time.Now()
					if err := j.Append(benchEvent(seq)); err != nil {
						t.Error(err)
						return
					}
					lats[i] = append(lats[i], time.Since(t0))
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		all := slices.Concat(lats...)
		fig := appendersAtSize{Sessions: n, Events: len(all), PerSecond: float64(len(all)) / elapsed.Seconds(),
			P50Ms: ms(quantile(all, 0.5)), P99Ms: ms(quantile(all, 0.99)), MaxMs: ms(quantile(all, 1)), LoadAverage: loadAverage(), SecondsAsked: *scaleSeconds}
		t.Logf("%d sessions appending: %d events in %s, %.0f events/s; append p50 %.2f ms, p99 %.2f ms, max %.1f ms (load %s)",
			n, fig.Events, elapsed.Round(time.Millisecond), fig.PerSecond, fig.P50Ms, fig.P99Ms, fig.MaxMs, fig.LoadAverage)
		figs = append(figs, fig)
		_ = st.Close()
	}
	writeFigures(t, map[string]any{"appenders": figs})
}

func writeFigures(t *testing.T, v any) {
	if *scaleJSON == "" {
		return
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	if err := os.WriteFile(*scaleJSON, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// loadAverage is /proc/loadavg's first three fields.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
