package main

import (
	"encoding/json"
	"flag"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/brainrt/brain/internal/scaleclient"
)

// The long-history load of issue 21, run only with -scale.history (scale.sh):
//
//	go test ./cmd/brain -run '^TestScaleHistory$' -count 1 -args -scale.history 200
var (
	scaleHistory      = flag.Int("scale.history", 0, "long-history load: the clients, each making -scale.historycalls calls before its memory is measured")
	scaleHistoryCalls = flag.Int("scale.historycalls", 1100, "long-history load: the calls each client makes")
	scaleHistoryRate  = flag.Float64("scale.historyrate", 4000, "long-history load: round trips per second, spread over every client")
	scaleHistoryJSON  = flag.String("scale.historyjson", "", "write the long-history figures here as JSON")
)

// historyFigures is what TestScaleHistory writes to -scale.historyjson.
type historyFigures struct {
	perClient                    // as soon as the clients are connected
	Calls     int                `json:"callsPerClient"` // made, on average
	After     perClient          `json:"afterHistory"`   // idle again, the node quiet
	Result    scaleclient.Result `json:"roundTrips"`
	Load      string             `json:"loadAverage"`
}

// TestScaleHistory measures what an idle connected client costs once its
// session has a long history: the clients connect (the memory of a new
// session each), make -scale.historycalls calls each — more than the
// 1,024 calls a session remembers (session.Options.FinishedMemory, the
// console's timings) and than the events it keeps in memory — and then
// idle until the node is quiet (quietMemory), when their memory is
// measured again.
func TestScaleHistory(t *testing.T) {
	n := *scaleHistory
	if n <= 0 {
		t.Skip("the long-history load runs with -scale.history (scale.sh)")
	}
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	runtime.MemProfileRate = storeCacheProfileRate
	scaleclient.RaiseFileLimit()
	addr, data := scaleKernel(t)
	clients := startClients(t, addr, tokenOf(t, data, "client"))
	g0, base, at, _ := connectIdle(t, clients, n)
	fresh := per(n, base, at)
	t.Logf("%d new clients: per client %.0f B heap, %.0f B stacks, %.0f B RSS", n, fresh.Heap, fresh.Stack, fresh.RSS)
	seconds := float64(*scaleHistoryCalls) * float64(n+1) / *scaleHistoryRate
	r, err := clients.Load(*scaleHistoryRate, time.Duration(seconds*float64(time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	if r.OK == 0 || r.Failed > 0 {
		t.Fatalf("round trips: %+v", r)
	}
	calls := int(r.OK) / (n + 1)
	quiet, waited := quietMemory(t, g0+1+n, base.StoreCache)
	after := per(n, base, quiet)
	writeHeapProfile(t, ".history")
	t.Logf("%d clients after %d calls each, the node quiet for %s: per client %.0f B heap, %.0f B stacks, %.0f B RSS (%d round trips at %.0f/s, p99 %.1f ms, %d dropped)",
		n, calls, waited.Round(time.Second), after.Heap, after.Stack, after.RSS, r.Sent, r.Achieved, r.P99, r.Dropped)
	if *scaleHistoryJSON != "" {
		b, _ := json.MarshalIndent(historyFigures{fresh, calls, after, r, loadAverage()}, "", "  ")
		if err := os.WriteFile(*scaleHistoryJSON, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
