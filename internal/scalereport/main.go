// Command scalereport prints the figures of scale.sh's loads (issue 21)
// beside their goals, from the JSON files the loads wrote:
//
//	go run ./internal/scalereport DIR
//
// DIR holds clients.json, history.json and mcp.json (cmd/brain
// TestScaleClients, TestScaleHistory, TestScaleMCP), outside.json
// (clients/ts/scale/outside.mjs), stored.json and
// appenders.json (store TestScaleStored, TestScaleAppenders), floor.txt
// (the journaled round trip's benchmarks) and binary.txt (the release
// binaries' sizes); a missing file is reported as not run.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: scalereport DIR")
		os.Exit(2)
	}
	dir := os.Args[1]
	clients(dir)
	outside(dir)
	history(dir)
	stored(dir)
	appenders(dir)
	mcpLoad(dir)
	floor(dir)
	sizes(dir)
}

// read decodes dir/name into v, reporting false (and saying so) when the
// file is missing.
func read(dir, name string, v any) bool {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		fmt.Printf("  (%s: not run)\n\n", name)
		return false
	}
	if err := json.Unmarshal(b, v); err != nil {
		fmt.Printf("  (%s: %v)\n\n", name, err)
		return false
	}
	return true
}

func verdict(ok bool) string {
	if ok {
		return "ok"
	}
	return "MISSED"
}

func kib(b float64) string { return fmt.Sprintf("%.1f KiB", b/1024) }

// perClient is a size's memory per client (cmd/brain's perClient).
type perClient struct {
	Heap         float64 `json:"heapBytesPerClient"`
	Stack        float64 `json:"stackBytesPerClient"`
	RSS          float64 `json:"rssBytesPerClient"`
	RSSLessCache float64 `json:"rssLessStoreCacheBytesPerClient"`
	Goroutines   float64 `json:"goroutinesPerClient"`
}

// roundTrips is a load's result (internal/scaleclient's Result).
type roundTrips struct {
	Sent, OK, Failed, Dropped int64
	Achieved                  float64 `json:"achieved"`
	P50                       float64 `json:"p50Ms"`
	P99                       float64 `json:"p99Ms"`
	Max                       float64 `json:"maxMs"`
}

func clients(dir string) {
	fmt.Println("Connected clients (each in its own session, a client capability registered; a kernel of its own at each size)")
	var f struct {
		Load  string `json:"loadAverage"`
		Sizes []struct {
			N int `json:"clients"`
			perClient
			Quiet  perClient  `json:"quiet"`
			After  perClient  `json:"afterRoundTrips"`
			Warmup roundTrips `json:"warmupRoundTrips"`
			Result roundTrips `json:"roundTrips"`
			Load   string     `json:"loadAverage"`
		} `json:"sizes"`
	}
	if !read(dir, "clients.json", &f) {
		return
	}
	const goalMem, goalP99 = 32 << 10, 20.0
	fmt.Printf("  %8s  %-28s  %-22s  %-22s  %-28s  %6s  %-40s  %-26s  %s\n", "clients", "RSS/client (goal ≤ 32 KiB)", "quiet 10 s (≤ 32 KiB)", "less the store's cache", "heap+stacks/client (≤ 32 KiB)", "gorout",
		"round trips (goal p99 ≤ 20 ms, 0 dropped)", "after them: RSS, heap+stacks", "load")
	for _, s := range f.Sizes {
		r := s.Result
		quiet := "—"
		if s.Quiet.RSS != 0 {
			quiet = kib(s.Quiet.RSS) + " " + verdict(s.Quiet.RSS <= goalMem)
		}
		fmt.Printf("  %8d  %-10s %-17s  %-22s  %-10s %-11s  %-10s %-17s  %6.2f  %6.0f/s p50 %6.2f p99 %7.2f ms %-6s  %-10s %-15s  %s\n", s.N,
			kib(s.RSS), verdict(s.RSS <= goalMem), quiet, kib(s.RSSLessCache), verdict(s.RSSLessCache <= goalMem), kib(s.Heap+s.Stack), verdict(s.Heap+s.Stack <= goalMem), s.Goroutines,
			r.Achieved, r.P50, r.P99, verdict(r.P99 <= goalP99 && r.Dropped == 0 && r.Failed == 0 && r.Sent > 0), kib(s.After.RSS), kib(s.After.Heap+s.After.Stack), s.Load)
		if r.Failed+r.Dropped > 0 {
			fmt.Printf("  %8s  %d of %d round trips failed, %d dropped\n", "", r.Failed, r.Sent, r.Dropped)
		}
		if w := s.Warmup; w.Sent > 0 {
			fmt.Printf("  %8s  the first seconds of load after the quiet (not the goal's figure): %d round trips, p50 %.2f p99 %.2f ms, %d failed, %d dropped\n", "", w.Sent, w.P50, w.P99, w.Failed, w.Dropped)
		}
	}
	fmt.Println()
}

func outside(dir string) {
	fmt.Println("Connected clients from outside (npm ws clients against the brain serve binary, snapshot first; RSS from /proc as the node settles by itself)")
	var f struct {
		Sizes []struct {
			N           int     `json:"clients"`
			ConnectedMs float64 `json:"connectedMs"`
			AtOnce      float64 `json:"rssBytesPerClientAtOnce"`
			Settled     []struct {
				After float64 `json:"afterSeconds"`
				RSS   float64 `json:"rssBytesPerClient"`
			} `json:"settled"`
			Load string `json:"loadAverage"`
		} `json:"sizes"`
	}
	if !read(dir, "outside.json", &f) {
		return
	}
	const goalMem = 32 << 10
	fmt.Printf("  %8s  %-12s  %-18s  %-44s  %s\n", "clients", "connected in", "RSS/client at once", "RSS/client after (goal ≤ 32 KiB)", "load")
	for _, s := range f.Sizes {
		var after []string
		for _, a := range s.Settled {
			after = append(after, fmt.Sprintf("%s %s at %.0f s", kib(a.RSS), verdict(a.RSS <= goalMem), a.After))
		}
		fmt.Printf("  %8d  %10.1f s  %-18s  %-44s  %s\n", s.N, s.ConnectedMs/1000, kib(s.AtOnce), strings.Join(after, ", "), s.Load)
	}
	fmt.Println()
}

func history(dir string) {
	fmt.Println("Connected clients after a long history (each made more calls than a session remembers, then idle, the node quiet)")
	var f struct {
		perClient
		N      int        `json:"clients"`
		Calls  int        `json:"callsPerClient"`
		After  perClient  `json:"afterHistory"`
		Result roundTrips `json:"roundTrips"`
		Load   string     `json:"loadAverage"`
	}
	if !read(dir, "history.json", &f) {
		return
	}
	const goalMem = 32 << 10
	fmt.Printf("  %8s  %6s  %-22s  %-28s  %-22s  %s\n", "clients", "calls", "RSS/client when new", "RSS/client after (≤ 32 KiB)", "heap+stacks after", "load")
	fmt.Printf("  %8d  %6d  %-22s  %-10s %-17s  %-22s  %s\n", f.N, f.Calls, kib(f.RSS), kib(f.After.RSS), verdict(f.After.RSS <= goalMem), kib(f.After.Heap+f.After.Stack), f.Load)
	fmt.Println()
}

func stored(dir string) {
	fmt.Println("Stored (hibernated) sessions, one event each, in the embedded store")
	var f struct {
		Load   string `json:"loadAverage"`
		Stored []struct {
			N          int     `json:"sessions"`
			Fill       float64 `json:"fillSessionsPerSecond"`
			Disk       float64 `json:"diskBytesPerSession"`
			DiskEvent  float64 `json:"diskBytesPerEvent"`
			Open       float64 `json:"openMs"`
			Heap       float64 `json:"heapBytesPerSessionAfterOpen"`
			RSS        float64 `json:"rssBytesPerSessionAfterOpen"`
			FirstPage  float64 `json:"firstPageMs"`
			NextPage   float64 `json:"nextPageMs"`
			Index      float64 `json:"indexHeapBytesPerSession"`
			WakeP50    float64 `json:"wakeP50Ms"`
			WakeP99    float64 `json:"wakeP99Ms"`
			WakeEvents int     `json:"wakeSessionEvents"`
			AllP50     float64 `json:"wakeEventsP50Ms"`
			AllP99     float64 `json:"wakeEventsP99Ms"`
		} `json:"stored"`
	}
	if !read(dir, "stored.json", &f) {
		return
	}
	fmt.Printf("  %9s  %-22s  %-18s  %-14s  %-12s  %-22s  %-34s  %-26s  %s\n", "sessions", "open (goal ≤ 1 s)", "memory/session", "index/session", "disk/session", "first page, next", "wake 1,000 events (p99 ≤ 5 ms)", "without its checkpoint", "disk/event")
	for _, s := range f.Stored {
		fmt.Printf("  %9d  %7.0f ms %-11s  %5.0f B heap %4.0f B RSS  %5.0f B  %9.0f B  %8.0f ms, %5.2f ms  p50 %6.2f p99 %6.2f ms %-11s  p50 %6.2f p99 %6.2f ms  %.0f B\n", s.N,
			s.Open, verdict(s.Open <= 1000), s.Heap, s.RSS, s.Index, s.Disk, s.FirstPage, s.NextPage, s.WakeP50, s.WakeP99, verdict(s.WakeP99 <= 5), s.AllP50, s.AllP99, s.DiskEvent)
	}
	fmt.Printf("  (load %s)\n\n", f.Load)
}

func appenders(dir string) {
	fmt.Println("Busy sessions: each appends to its own journal as fast as it can")
	var f struct {
		Appenders []struct {
			N    int     `json:"sessions"`
			Rate float64 `json:"eventsPerSecond"`
			P50  float64 `json:"appendP50Ms"`
			P99  float64 `json:"appendP99Ms"`
			Max  float64 `json:"appendMaxMs"`
			Load string  `json:"loadAverage"`
		} `json:"appenders"`
	}
	if !read(dir, "appenders.json", &f) {
		return
	}
	fmt.Printf("  %9s  %12s  %28s  %s\n", "sessions", "events/s", "append p50 / p99 / max", "load")
	for _, s := range f.Appenders {
		fmt.Printf("  %9d  %12.0f  %8.2f / %7.2f / %7.1f ms  %s\n", s.N, s.Rate, s.P50, s.P99, s.Max, s.Load)
	}
	fmt.Println()
}

func mcpLoad(dir string) {
	fmt.Println("Sessions each driven by its own MCP client (tools/call fs.read, as fast as each can)")
	var f struct {
		MCP []struct {
			N      int     `json:"clients"`
			Rate   float64 `json:"callsPerSecond"`
			P50    float64 `json:"p50Ms"`
			P99    float64 `json:"p99Ms"`
			Max    float64 `json:"maxMs"`
			Failed int64   `json:"failed"`
			Load   string  `json:"loadAverage"`
		} `json:"mcp"`
	}
	if !read(dir, "mcp.json", &f) {
		return
	}
	fmt.Printf("  %9s  %12s  %28s  %7s  %s\n", "clients", "calls/s", "call p50 / p99 / max", "failed", "load")
	for _, s := range f.MCP {
		fmt.Printf("  %9d  %12.0f  %8.2f / %7.2f / %7.1f ms  %7d  %s\n", s.N, s.Rate, s.P50, s.P99, s.Max, s.Failed, s.Load)
	}
	fmt.Println()
}

// floor prints the journaled round trip beside its floor: medians of the
// benchmark lines in floor.txt.
func floor(dir string) {
	fmt.Println("The journaled round trip beside its floor (goal ≤ 1.5×)")
	file, err := os.Open(filepath.Join(dir, "floor.txt"))
	if err != nil {
		fmt.Printf("  (floor.txt: not run)\n\n")
		return
	}
	defer file.Close()
	ns := map[string][]float64{}
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || f[3] != "ns/op" {
			continue
		}
		name, _, _ := strings.Cut(f[0], "-")
		if v, err := strconv.ParseFloat(f[2], 64); err == nil {
			ns[name] = append(ns[name], v)
		}
	}
	med := func(v []float64) float64 {
		if len(v) == 0 {
			return 0
		}
		v = slices.Clone(v)
		slices.Sort(v)
		return v[len(v)/2]
	}
	rts, fls := ns["BenchmarkWSRoundTripJournaled"], ns["BenchmarkFloorWSEchoJournaled"]
	rt, fl := med(rts), med(fls)
	if rt == 0 || fl == 0 {
		fmt.Printf("  (floor.txt: no figures)\n\n")
		return
	}
	// scale.sh runs them in turn: the i-th of each ran side by side, and
	// their ratio is the fair one. The verdict is the median pair's.
	var ratios []float64
	for i := range min(len(rts), len(fls)) {
		ratios = append(ratios, rts[i]/fls[i])
	}
	r := med(ratios)
	fmt.Printf("  BenchmarkWSRoundTripJournaled %.1f µs, BenchmarkFloorWSEchoJournaled %.1f µs (medians of %d); ratio of each pair run in turn, median %.2f× %s (%.2f–%.2f×)\n\n",
		rt/1000, fl/1000, len(rts), r, verdict(r <= 1.5), slices.Min(ratios), slices.Max(ratios))
}

func sizes(dir string) {
	fmt.Println("The binary (goal: a release ≤ 80 MB)")
	b, err := os.ReadFile(filepath.Join(dir, "binary.txt"))
	if err != nil {
		fmt.Printf("  (binary.txt: not run)\n")
		return
	}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		name, v, ok := strings.Cut(l, " ")
		n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if !ok || err != nil {
			continue
		}
		goal := ""
		if strings.HasPrefix(name, "release") {
			goal = verdict(n <= 80e6)
		}
		fmt.Printf("  %-28s %6.1f MB  %s\n", name, n/1e6, goal)
	}
}
