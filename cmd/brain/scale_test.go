package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brainrt/brain/internal/scaleclient"
	"github.com/brainrt/brain/internal/testutil"
)

// The scale tests (issue 21) run `brain serve` in this process and its
// clients in a child process (internal/scaleclient), so that this
// process's memory is the kernel's alone. The default suite runs a small
// version that holds the per-client bound; -scale.clients runs the load:
//
//	go test ./cmd/brain -run '^TestScaleClients$' -count 1 -timeout 30m -args -scale.clients 1000,3000,10000
//
// scale.sh runs it and prints each figure beside its goal.
var (
	scaleClients = flag.String("scale.clients", "", "connected-clients load: the sizes to measure, comma-separated (e.g. 1000,3000,10000)")
	scaleRate    = flag.Float64("scale.rate", 2000, "connected-clients load: round trips per second, spread over every client")
	scaleSeconds = flag.Float64("scale.seconds", 10, "connected-clients load: how long each size's load runs")
	scaleJSON    = flag.String("scale.json", "", "write the scale figures here as JSON")
	scaleHeap    = flag.String("scale.heapprofile", "", "TestIdleClientMemory: write the kernel's heap profiles here (and .base)")
	scaleCPU     = flag.String("scale.cpuprofile", "", "TestScaleClients: write the kernel's CPU profile of each size's load here (.N)")
	scaleTrace   = flag.String("scale.trace", "", "TestScaleClients: write an execution trace of each size's load here (.N)")
)

func writeHeapProfile(t *testing.T, suffix string) {
	if *scaleHeap == "" {
		return
	}
	f, err := os.Create(*scaleHeap + suffix)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		t.Fatal(err)
	}
}

// startCPUProfile starts what -scale.cpuprofile and -scale.trace ask
// for over a size's load; stop ends both.
func startCPUProfile(t *testing.T, n int) (stop func()) {
	var stops []func()
	start := func(path string, begin func(io.Writer) error, end func()) {
		if path == "" {
			return
		}
		f, err := os.Create(fmt.Sprintf("%s.%d", path, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := begin(f); err != nil {
			t.Fatal(err)
		}
		stops = append(stops, func() { end(); f.Close() })
	}
	start(*scaleCPU, pprof.StartCPUProfile, pprof.StopCPUProfile)
	start(*scaleTrace, trace.Start, trace.Stop)
	return func() {
		for _, s := range stops {
			s()
		}
	}
}

// Issue 21's goals for connected clients.
const (
	goalBytesPerClient = 32 << 10
	goalP99            = 20 * time.Millisecond
)

// idleWait bounds the wait for idle connections' writers to end: they do
// within two seconds of their last write (server/idle.go); a loaded
// machine may take longer.
const idleWait = 15 * time.Second

// memSample is the process's memory, settled: after two collections,
// with the freed pages returned to the system.
type memSample struct {
	Heap       uint64 `json:"heapBytes"`       // live heap objects
	StoreCache uint64 `json:"storeCacheBytes"` // of which the store's write cache, when profiled (storeCacheHeap)
	Stack      uint64 `json:"stackBytes"`      // goroutine stacks
	RSS        uint64 `json:"rssBytes"`        // resident set (VmRSS)
	Goroutines int    `json:"goroutines"`
	// Where the runtime's memory is (runtime/metrics): what it maps and
	// has not returned, and of that the free space in spans in use
	// (fragmentation) and the collector's and allocator's own.
	Mapped   uint64 `json:"mappedBytes"`
	Unused   uint64 `json:"heapUnusedBytes"`
	Metadata uint64 `json:"metadataBytes"`
}

// memoryClasses reads the runtime's memory classes.
func memoryClasses(m *memSample) {
	samples := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"}, {Name: "/memory/classes/metadata/other:bytes"},
		{Name: "/memory/classes/metadata/mspan/inuse:bytes"}, {Name: "/memory/classes/metadata/mcache/inuse:bytes"}}
	metrics.Read(samples)
	v := func(i int) uint64 { return samples[i].Value.Uint64() }
	m.Mapped, m.Unused, m.Metadata = v(0)-v(1), v(2), v(3)+v(4)+v(5)
}

func sampleMemory(t testing.TB) memSample {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory() // collects again, and returns what is free
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := memSample{Heap: ms.HeapAlloc, StoreCache: storeCacheHeap(), Stack: ms.StackInuse, RSS: residentBytes(t), Goroutines: runtime.NumGoroutine()}
	memoryClasses(&m)
	return m
}

// storeCacheProfileRate is a heap profile rate at which every buffer of
// the store's write cache (a mebibyte or more) is sampled, with its exact
// size: the chance of missing one is e^-16.
const storeCacheProfileRate = 64 << 10

// storeCacheHeap is the live heap in the embedded NATS server's message
// block caches, by the heap profile: the
// store's write cache, one block's worth (up to 8 MiB) that it frees after
// ten idle seconds — the node's, not any client's, and in steps (1, 4, 8
// MiB) that would swamp a small test's per-client figure.
func storeCacheHeap() uint64 {
	if runtime.MemProfileRate > storeCacheProfileRate {
		return 0
	}
	n, _ := runtime.MemProfile(nil, true)
	var recs []runtime.MemProfileRecord
	for {
		recs = make([]runtime.MemProfileRecord, n+64)
		var ok bool
		if n, ok = runtime.MemProfile(recs, true); ok {
			recs = recs[:n]
			break
		}
	}
	var total uint64
	for _, r := range recs {
		if r.InUseBytes() == 0 {
			continue
		}
		frames := runtime.CallersFrames(r.Stack())
		for {
			f, more := frames.Next()
			if strings.HasSuffix(f.Function, "nats-server/v2/server.getMsgBlockBuf") {
				total += uint64(r.InUseBytes())
				break
			}
			if !more {
				break
			}
		}
	}
	return total
}

// settledMemory waits for the connections' writers to end — an idle
// connection keeps none after a second or two (server/idle.go) — until
// at most goroutines run, for at most idleWait, then samples until two
// samples in a row agree within 1 % of heap (the kernel may still be
// finishing what the last connections started), at most ten times.
func settledMemory(t testing.TB, goroutines int) memSample {
	t.Helper()
	for deadline := time.Now().Add(idleWait); runtime.NumGoroutine() > goroutines && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond) // polling a count, for at most idleWait
	}
	prev := sampleMemory(t)
	for range 10 {
		cur := sampleMemory(t)
		if d := int64(cur.Heap) - int64(prev.Heap); d*100 < int64(prev.Heap) && -d*100 < int64(prev.Heap) {
			return cur
		}
		prev = cur
	}
	return prev
}

// warmupLoad is how long the load runs, unmeasured, after the node's
// quiet (quietMemory) and before the measured round trips.
const warmupLoad = 3 * time.Second

// quietWait bounds quietMemory's wait: the embedded NATS server drops a
// message block's cache once it has been idle ten seconds
// (defaultCacheBufferExpiration in nats-server's filestore.go), checked
// on a timer of its own; the buffer then waits in the server's pool for
// two collections.
const quietWait = 30 * time.Second

// quietMemory waits, for at most quietWait, until the store's write
// cache is back to what it held at the baseline (baseCache) — the node
// has written nothing for ten seconds and dropped the block it was
// writing from memory — and returns the settled memory then and how long
// it waited. The cache is told apart by the heap profile, which a
// collection brings up to date: one a second.
func quietMemory(t testing.TB, goroutines int, baseCache uint64) (memSample, time.Duration) {
	t.Helper()
	start := time.Now()
	for time.Since(start) < quietWait {
		runtime.GC()
		if storeCacheHeap() <= baseCache {
			break
		}
		time.Sleep(time.Second) // polling the profile, for at most quietWait
	}
	return settledMemory(t, goroutines), time.Since(start)
}

// residentBytes reads the process's VmRSS.
func residentBytes(t testing.TB) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// perClient is a size's memory over the baseline, per client.
type perClient struct {
	N          int     `json:"clients"`
	Heap       float64 `json:"heapBytesPerClient"` // less the store's write cache when profiled
	Stack      float64 `json:"stackBytesPerClient"`
	RSS        float64 `json:"rssBytesPerClient"`
	Goroutines float64 `json:"goroutinesPerClient"`
	// RSSLessCache is RSS less the store's write cache (when profiled):
	// the node's, resident, up to 8 MiB a block being written or read.
	RSSLessCache float64 `json:"rssLessStoreCacheBytesPerClient"`
	Unused       float64 `json:"heapUnusedBytesPerClient"` // free space in the heap's spans in use
	Metadata     float64 `json:"metadataBytesPerClient"`
	Mapped       float64 `json:"mappedBytesPerClient"` // all the runtime maps and has not returned
}

func per(n int, base, at memSample) perClient {
	d := func(a, b uint64) float64 { return (float64(a) - float64(b)) / float64(n) }
	return perClient{N: n, Heap: d(at.Heap-at.StoreCache, base.Heap-base.StoreCache), Stack: d(at.Stack, base.Stack), RSS: d(at.RSS, base.RSS),
		Goroutines:   float64(at.Goroutines-base.Goroutines) / float64(n),
		RSSLessCache: d(at.RSS-at.StoreCache, base.RSS-base.StoreCache),
		Unused:       d(at.Unused, base.Unused), Metadata: d(at.Metadata, base.Metadata), Mapped: d(at.Mapped, base.Mapped)}
}

// scaleKernel runs `brain serve` in this process — the default tools over
// a temporary workspace, its own data directory, no console, no quota of
// sessions per token — and returns its address and data directory (its
// tokens: tokenOf).
func scaleKernel(t *testing.T) (addr, data string) {
	t.Helper()
	dir := t.TempDir()
	ws := filepath.Join(dir, "workspace")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("workspace/notes.txt", "the scale tests' file\n") // what TestScaleMCP's calls read
	write("grants.yaml", "workspace: "+ws+"\nfs: {}\njs: {}\n")
	cfg := write("brain.yaml", "grants: grants.yaml\ntools: [fs.read, fs.search, js.eval]\nlimits:\n  sessions_per_token: -1\n")
	ctx, cancel := context.WithCancel(context.Background())
	data = filepath.Join(dir, "data")
	// The node's warnings and errors are the test's log when it fails
	// (this cleanup runs last, once the node has stopped).
	var logged testutil.LockedBuffer
	t.Cleanup(func() {
		if t.Failed() && logged.Len() > 0 {
			t.Logf("the node logged:\n%s", logged.String())
		}
	})
	log := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))
	addr, _, done := serveLogged(t, ctx, serveArgs{addr: "127.0.0.1:0", data: data, config: cfg, consoleAddr: "off", idle: time.Hour}, log)
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Error("brain serve did not stop within a minute")
		}
	})
	return addr, data
}

// startClients starts the clients' process against the kernel at addr.
func startClients(t *testing.T, addr, token string) *scaleclient.Child {
	t.Helper()
	c, err := scaleclient.Start(os.Args[0], scaleclient.Config{Addr: addr, Token: token, Prefix: "scale-"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("clients: %v", err)
		}
	})
	return c
}

// TestIdleClientMemory is the default suite's small version of the
// connected-clients load: 200 clients, each in a session of its own with
// a client capability registered, hold at most issue 21's 32 KiB each of
// the kernel's heap and goroutine stacks, idle and settled, and one round
// trip each goes through.
func TestIdleClientMemory(t *testing.T) {
	warm, n := 100, 200
	if testutil.RaceEnabled {
		warm, n = 50, 100 // the race detector slows both processes about tenfold: half the clients
	}
	// The heap profile tells the store's write cache apart
	// (storeCacheHeap); two collections empty the pools, so that what the
	// store caches from here on is allocated, and profiled, afresh.
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	runtime.MemProfileRate = storeCacheProfileRate
	runtime.GC()
	runtime.GC()
	scaleclient.RaiseFileLimit()
	addr, data := scaleKernel(t)
	clients := startClients(t, addr, tokenOf(t, data, "client"))
	g0 := runtime.NumGoroutine() // the kernel's own, and the test's: an idle client adds one
	// The baseline has warm clients connected already, so that what the
	// first sessions cost once (compiled schemas, pools, the store's
	// write cache) is not counted per client.
	if err := clients.Connect(warm); err != nil {
		t.Fatal(err)
	}
	base := settledMemory(t, g0+warm)
	writeHeapProfile(t, ".base")
	bound := float64(goalBytesPerClient)
	if testutil.RaceEnabled {
		bound *= 2 // the race detector's bookkeeping rides on every allocation and goroutine
	}
	// The samples are the whole process's: what the goroutines of the
	// tests before this one still hold, or let go of, moves the heap
	// between them by megabytes now and then on a loaded machine (once:
	// 7 MB over 100 clients, 84 KB a client where 11 KB is usual). A
	// sample over the bound is taken again, with another batch of
	// clients over the last; clients that hold more than the bound do so
	// in every batch.
	const attempts = 3
	var pc perClient
	for attempt, connected := 0, warm+n; ; attempt, connected = attempt+1, connected+n {
		if err := clients.Connect(connected); err != nil {
			t.Fatal(err)
		}
		at := settledMemory(t, g0+connected)
		writeHeapProfile(t, "")
		pc = per(n, base, at)
		t.Logf("%d clients over %d: the store's write cache %d → %d B; per client %.0f B heap, %.0f B stacks, %.0f B RSS, %.2f goroutines (%.0f B mapped: %.0f B free in spans in use, %.0f B metadata)",
			n, connected-n, base.StoreCache, at.StoreCache, pc.Heap, pc.Stack, pc.RSS, pc.Goroutines, pc.Mapped, pc.Unused, pc.Metadata)
		if pc.Heap+pc.Stack <= bound || attempt == attempts-1 {
			break
		}
		base = at
	}
	if got := pc.Heap + pc.Stack; got > bound {
		t.Errorf("an idle connected client holds %.0f bytes of heap and stacks in %d batches in a row, want at most %.0f", got, attempts, bound)
	}
	if pc.Goroutines > 2.05 {
		t.Errorf("an idle connected client holds %.2f goroutines, want at most 2", pc.Goroutines)
	}
	r, err := clients.Load(400, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.OK != r.Sent || r.Sent == 0 {
		t.Errorf("round trips: %+v, want every one ok", r)
	}
}

// connectIdle connects one client, then n more, each in a session of
// its own, and returns the goroutines before the first, the settled
// memory with the one (the baseline) and with all of them, and how long
// the n took to connect.
func connectIdle(t *testing.T, clients *scaleclient.Child, n int) (g0 int, base, at memSample, took time.Duration) {
	t.Helper()
	g0 = runtime.NumGoroutine()
	if err := clients.Connect(1); err != nil {
		t.Fatal(err)
	}
	base = settledMemory(t, g0+1)
	start := time.Now()
	if err := clients.Connect(n + 1); err != nil {
		t.Fatal(err)
	}
	took = time.Since(start)
	return g0, base, settledMemory(t, g0+1+n), took
}

// scaleFigures is what TestScaleClients writes to -scale.json.
type scaleFigures struct {
	Load  string               `json:"loadAverage"`
	Sizes []scaleClientsAtSize `json:"sizes"`
}

type scaleClientsAtSize struct {
	perClient
	// Quiet is the memory per client once the node has been idle long
	// enough for the store to drop its write cache (quietMemory): what a
	// node of idle clients holds, where perClient is taken as soon as
	// their connections are idle.
	Quiet perClient `json:"quiet"`
	// Warmup is the load's first seconds after the quiet (warmupLoad),
	// before the measured round trips (Result).
	Warmup scaleclient.Result `json:"warmupRoundTrips"`
	Result scaleclient.Result `json:"roundTrips"`
	Load   string             `json:"loadAverage"` // after the round trips
	// After is the memory per client once the round trips are done and
	// the clients idle again: each session keeps its latest events for
	// replay and its latest calls' timings (bounded: session.Options
	// LogSize, server's maxCallTimes).
	After perClient `json:"afterRoundTrips"`
}

// TestScaleClients is the connected-clients load of issue 21, run only
// with -scale.clients: at each size, on a kernel of its own (so that no
// size carries what an earlier one's round trips left), the kernel's
// memory per idle connected client (over a baseline of one), then round
// trips at -scale.rate a second spread over all of them, then the memory
// per client again.
func TestScaleClients(t *testing.T) {
	if *scaleClients == "" {
		t.Skip("the connected-clients load runs with -scale.clients (scale.sh)")
	}
	var sizes []int
	for _, f := range strings.Split(*scaleClients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			t.Fatalf("-scale.clients %q: want positive counts", *scaleClients)
		}
		sizes = append(sizes, n)
	}
	limit := scaleclient.RaiseFileLimit()
	if need := uint64(sizes[len(sizes)-1]) + 256; limit < need {
		t.Fatalf("the open-file limit is %d, %d clients need %d", limit, sizes[len(sizes)-1], need)
	}
	// The store's write cache is the node's, not any client's: profiled,
	// so that the heap per client leaves it out (storeCacheHeap).
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	runtime.MemProfileRate = storeCacheProfileRate
	figs := scaleFigures{Load: loadAverage()}
	idle := runtime.NumGoroutine()
	for _, n := range sizes {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			// The last size's kernel has stopped (its subtest's cleanup);
			// its goroutines, and with them what they hold, end before this
			// size's baseline is taken.
			for deadline := time.Now().Add(time.Minute); runtime.NumGoroutine() > idle && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond) // polling a count, for at most a minute
			}
			runtime.GC()
			runtime.GC()
			addr, data := scaleKernel(t)
			clients := startClients(t, addr, tokenOf(t, data, "client"))
			g0, base, at, connected := connectIdle(t, clients, n)
			pc := per(n, base, at)
			t.Logf("%d clients (connected in %s): per client %.0f B heap, %.0f B stacks, %.0f B RSS (%.0f B less the store's write cache), %.2f goroutines (%.0f B mapped: %.0f B free in spans in use, %.0f B metadata)",
				n, connected.Round(time.Millisecond), pc.Heap, pc.Stack, pc.RSS, pc.RSSLessCache, pc.Goroutines, pc.Mapped, pc.Unused, pc.Metadata)
			quietAt, waited := quietMemory(t, g0+1+n, base.StoreCache)
			quiet := per(n, base, quietAt)
			t.Logf("%d clients, the node quiet for %s (the store's write cache %d → %d B): per client %.0f B heap, %.0f B stacks, %.0f B RSS",
				n, waited.Round(time.Second), at.StoreCache, quietAt.StoreCache, quiet.Heap, quiet.Stack, quiet.RSS)
			// The node has been quiet: it has dropped its write cache, and
			// its collector paces itself on the smaller heap. The first
			// seconds of load pay to grow both again (reported, not the
			// goal's figure); the measured load is the node warm, as it
			// is right after the clients connect.
			warm, err := clients.Load(*scaleRate, warmupLoad)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d clients: the first %s of load after the quiet: %d round trips, p50 %.2f ms, p99 %.2f ms, max %.2f ms; %d failed, %d dropped",
				n, warmupLoad, warm.Sent, warm.P50, warm.P99, warm.Max, warm.Failed, warm.Dropped)
			stop := startCPUProfile(t, n)
			r, err := clients.Load(*scaleRate, time.Duration(*scaleSeconds*float64(time.Second)))
			stop()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d clients: %d round trips at %.0f/s: p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms; %d failed, %d dropped (load %s)",
				n, r.Sent, r.Achieved, r.P50, r.P99, r.P999, r.Max, r.Failed, r.Dropped, loadAverage())
			for _, w := range r.Slow {
				t.Logf("%d clients: %d round trips over 20 ms started at %d–%d ms of the load, the slowest %.1f ms", n, w.Calls, w.AtMs, w.AtMs+100, w.MaxMs)
			}
			after := per(n, base, settledMemory(t, g0+1+n))
			t.Logf("%d clients after the round trips: per client %.0f B heap, %.0f B stacks, %.0f B RSS (%.0f B less the store's write cache)", n, after.Heap, after.Stack, after.RSS, after.RSSLessCache)
			figs.Sizes = append(figs.Sizes, scaleClientsAtSize{pc, quiet, warm, r, loadAverage(), after})
		})
	}
	if *scaleJSON != "" {
		b, _ := json.MarshalIndent(figs, "", "  ")
		if err := os.WriteFile(*scaleJSON, b, 0o644); err != nil {
			t.Fatal(err)
		}
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
	return fmt.Sprintf("%s %s %s", f[0], f[1], f[2])
}
